package tinktest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/tinktest"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An Agent takes a Workflow through the real tink-server as Tinkerbell's
// agent does: GetAction hands it the action and sets currentState (its
// actionName before any report), RUNNING and then SUCCESS with "action
// completed" take the Workflow to POST, and tink-controller then to
// SUCCESS. The RUNNING report's zero times leave the action without an
// executionStart, as the real agent's do.
func TestIntegrationAgentReports(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	tb := tinktest.Start(t, env, ns, nil)
	dyn := kubetest.Dynamic(t, env.Config())
	ctx := testenv.Context(t, 2*time.Minute)
	const mac = "02:00:00:00:00:07"
	kubetest.Create(ctx, t, dyn, hardwareResource, ns, &tinkerbell.Hardware{
		ObjectMeta: metav1.ObjectMeta{Name: "node-7"},
		Spec:       tinkerbell.HardwareSpec{Interfaces: []tinkerbell.Interface{{DHCP: &tinkerbell.DHCP{MAC: mac}}}},
	})
	kubetest.Create(ctx, t, dyn, templateResource, ns, &tinkerbell.Template{
		ObjectMeta: metav1.ObjectMeta{Name: "tinktest"},
		Spec:       tinkerbell.TemplateSpec{Data: ptr(templateData)},
	})
	kubetest.Create(ctx, t, dyn, workflowResource, ns, &tinkerbell.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: "wf-7"},
		Spec:       tinkerbell.WorkflowSpec{TemplateRef: "tinktest", HardwareRef: "node-7", HardwareMap: map[string]string{"device_1": mac}},
	})
	var wf tinkerbell.Workflow
	kubetest.WaitFor(ctx, t, dyn, workflowResource, ns, "wf-7", &wf, func() bool { return wf.Status.State == tinkerbell.WorkflowStatePending })

	agent := tb.Agent()
	a, err := agent.GetAction(ctx, mac)
	if err != nil {
		t.Fatal(err)
	}
	want := tinkerbell.Action{}
	if len(wf.Status.Tasks) == 1 && len(wf.Status.Tasks[0].Actions) == 1 {
		want = wf.Status.Tasks[0].Actions[0]
	}
	if a.WorkflowID != ns+"/wf-7" || a.AgentID != mac || a.Name != "hello" || a.ActionID != want.ID || a.ActionID == "" ||
		a.TaskID != wf.Status.Tasks[0].ID || a.Image != "127.0.0.1:5000/tinktest/hello:v1" || a.Timeout != 60 {
		t.Fatalf("GetAction = %+v; the Workflow's action is %+v", a, want)
	}
	kubetest.WaitFor(ctx, t, dyn, workflowResource, ns, "wf-7", &wf, func() bool {
		cs := wf.Status.CurrentState
		return cs != nil && cs.ActionName == "hello" && cs.State == tinkerbell.WorkflowStatePending
	})
	if wf.Status.State != tinkerbell.WorkflowStatePending {
		t.Errorf("state %s once the action was fetched, want PENDING", wf.Status.State)
	}

	if err := agent.Report(ctx, a, "RUNNING", "running action", time.Time{}, time.Time{}, ""); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(ctx, t, dyn, workflowResource, ns, "wf-7", &wf, func() bool { return wf.Status.State == tinkerbell.WorkflowStateRunning })
	if act := wf.Status.Tasks[0].Actions[0]; act.State != tinkerbell.WorkflowStateRunning || act.ExecutionStart != nil || act.Message != "running action" {
		t.Errorf("action after RUNNING: %+v", act)
	}

	start := time.Now().UTC()
	stop := start.Add(1500 * time.Millisecond)
	if err := agent.Report(ctx, a, "SUCCESS", "action completed", start, stop, "1s500ms"); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(ctx, t, dyn, workflowResource, ns, "wf-7", &wf, func() bool { return wf.Status.State == tinkerbell.WorkflowStateSuccess })
	act := wf.Status.Tasks[0].Actions[0]
	if act.State != tinkerbell.WorkflowStateSuccess || act.Message != "action completed" || act.ExecutionDuration != "1s500ms" ||
		act.ExecutionStart == nil || !act.ExecutionStart.Time.Equal(start.Truncate(time.Second)) {
		t.Errorf("action after SUCCESS: %+v", act)
	}

	if err := agent.Report(ctx, a, "BOGUS", "", time.Time{}, time.Time{}, ""); err == nil || !strings.Contains(err.Error(), "unknown state") {
		t.Errorf("report of state BOGUS: %v", err)
	}
}
