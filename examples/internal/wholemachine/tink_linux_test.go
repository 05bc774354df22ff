package wholemachine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"text/template"

	"go.yaml.in/yaml/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/provision"
)

// templateResource is Tinkerbell's Template resource.
var templateResource = tinkerbell.GroupVersion.WithResource("templates")

// tinkRun is Tinkerbell's workflow YAML, the Template's data once rendered.
type tinkRun struct {
	Version       string     `yaml:"version"`
	Name          string     `yaml:"name"`
	GlobalTimeout int        `yaml:"global_timeout"`
	Tasks         []tinkTask `yaml:"tasks"`
}

type tinkTask struct {
	Name        string            `yaml:"name"`
	Worker      string            `yaml:"worker"`
	Volumes     []string          `yaml:"volumes"`
	Environment map[string]string `yaml:"environment"`
	Actions     []tinkAction      `yaml:"actions"`
}

type tinkAction struct {
	Name        string            `yaml:"name"`
	Image       string            `yaml:"image"`
	Timeout     int               `yaml:"timeout"`
	Command     []string          `yaml:"command"`
	Pid         string            `yaml:"pid"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
}

// workflows returns the Workflows of the namespace.
func workflows(ctx context.Context, t *testing.T, tink dynamic.Interface, ns string) []tinkerbell.Workflow {
	t.Helper()
	list, err := tink.Resource(provision.WorkflowResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]tinkerbell.Workflow, len(list.Items))
	for i, u := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// render reads the Workflow's Template from the cluster and renders it as
// Tinkerbell does: Go's text/template over the Workflow's hardwareMap, a
// missing value an error, with Sprig's quote (fmt's %q of the value).
func render(ctx context.Context, t *testing.T, tink dynamic.Interface, wf tinkerbell.Workflow) tinkRun {
	t.Helper()
	u, err := tink.Resource(templateResource).Namespace(wf.Namespace).Get(ctx, wf.Spec.TemplateRef, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Template %s of Workflow %s: %v", wf.Spec.TemplateRef, wf.Name, err)
	}
	var tpl tinkerbell.Template
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &tpl); err != nil {
		t.Fatal(err)
	}
	if tpl.Spec.Data == nil {
		t.Fatalf("Template %s holds no data", tpl.Name)
	}
	tt, err := template.New("workflow-template").Option("missingkey=error").
		Funcs(template.FuncMap{"quote": func(s any) string { return fmt.Sprintf("%q", fmt.Sprint(s)) }}).
		Parse(*tpl.Spec.Data)
	if err != nil {
		t.Fatalf("Template %s does not parse: %v", tpl.Name, err)
	}
	vals := map[string]any{}
	for k, v := range wf.Spec.HardwareMap {
		vals[k] = v
	}
	var b bytes.Buffer
	if err := tt.Execute(&b, vals); err != nil {
		t.Fatalf("Template %s does not render with Workflow %s's hardwareMap %v: %v", tpl.Name, wf.Name, wf.Spec.HardwareMap, err)
	}
	var run tinkRun
	dec := yaml.NewDecoder(&b)
	dec.KnownFields(true)
	if err := dec.Decode(&run); err != nil {
		t.Fatalf("Template %s renders no workflow: %v\n%s", tpl.Name, err, b.String())
	}
	if len(run.Tasks) != 1 {
		t.Fatalf("Template %s renders %d tasks, want one", tpl.Name, len(run.Tasks))
	}
	return run
}

// environment is what Tinkerbell's agent gives action a of task: the
// task's environment and the action's over it. The actions run here
// without containers, so a value naming a path inside a volume (the
// container's side of host:container) names it on the machine's side.
func environment(task tinkTask, a tinkAction) map[string]string {
	env := map[string]string{}
	for k, v := range task.Environment {
		env[k] = v
	}
	for k, v := range a.Environment {
		env[k] = v
	}
	for _, vol := range append(append([]string{}, task.Volumes...), a.Volumes...) {
		parts := strings.Split(vol, ":")
		if len(parts) < 2 {
			continue
		}
		host, ctr := parts[0], parts[1]
		for k, v := range env {
			if v == ctr || strings.HasPrefix(v, ctr+"/") {
				env[k] = host + strings.TrimPrefix(v, ctr)
			}
		}
	}
	return env
}

// report writes the Workflow's status as Tinkerbell's controller does, from
// the agent's reports: through the status subresource, from the Workflow
// as last read, read again after a conflict (fleetd annotates Workflows
// while they run).
func report(ctx context.Context, tink dynamic.Interface, wf tinkerbell.Workflow, run tinkRun, state tinkerbell.WorkflowState, current string, states []tinkerbell.WorkflowState) error {
	task := run.Tasks[0]
	res := tink.Resource(provision.WorkflowResource).Namespace(wf.Namespace)
	var err error
	for try := 0; try < 5; try++ {
		var u *unstructured.Unstructured
		if u, err = res.Get(ctx, wf.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("workflow %s: %w", wf.Name, err)
		}
		var w tinkerbell.Workflow
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &w); err != nil {
			return err
		}
		acts := make([]tinkerbell.Action, len(task.Actions))
		for i, a := range task.Actions {
			acts[i] = tinkerbell.Action{Name: a.Name, Image: a.Image, Timeout: int64(a.Timeout), State: states[i]}
		}
		w.Status.State = state
		w.Status.GlobalTimeout = int64(run.GlobalTimeout)
		w.Status.CurrentState = &tinkerbell.CurrentState{AgentID: task.Worker, TaskName: task.Name, ActionName: current, State: state}
		w.Status.Tasks = []tinkerbell.Task{{Name: task.Name, AgentID: task.Worker, Actions: acts}}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&w)
		if err != nil {
			return err
		}
		if _, err = res.UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{}); err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			break
		}
	}
	return fmt.Errorf("workflow %s: write its status: %w", wf.Name, err)
}
