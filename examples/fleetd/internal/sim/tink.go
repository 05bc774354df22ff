package sim

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/bmc"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
	"github.com/fleetkit/fleet/provision"
)

// agentAction is an action tink-server hands a worker's agent: the
// answer of GetAction that the agent reports on.
type agentAction struct {
	WorkflowID string // <namespace>/<name>
	TaskID     string
	AgentID    string
	ActionID   string
	Name       string
	// Environment holds the task's and the action's KEY=value strings,
	// sorted.
	Environment []string
}

// env returns the value of the action's environment variable key.
func (a agentAction) env(key string) string {
	for _, kv := range a.Environment {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// workflow is the name of the action's Workflow.
func (a agentAction) workflow() string {
	_, name, _ := strings.Cut(a.WorkflowID, "/")
	return name
}

// A tinkServer is what a machine's agent talks to: tink-server's two
// calls. The simulation serves them itself (tinkSim); a test may hand
// the agents the real tink-server's.
type tinkServer interface {
	GetAction(ctx context.Context, agentID string) (agentAction, error)
	Report(ctx context.Context, a agentAction, state, message string, start, stop time.Time, duration string) error
}

// tinkSim plays Tinkerbell v0.25.0 for simulated machines: tink-controller,
// tink-server, Rufio, and each machine's agent. It writes what they write,
// the way they write it, so that a real kube-apiserver takes it and fleet
// sees what it would see of the real one:
//
//   - tink-controller renders a new Workflow's Template with its values
//     and replaces its status: every task and action of the Template
//     (PENDING), the Template's global timeout, the worker as agentID,
//     the condition TemplateRenderedSuccess; then PENDING, or PREPARING
//     when the Workflow asks to netboot. A Workflow whose Template does
//     not render gets the condition false, and stays as it was.
//   - PREPARING: a Rufio Job netboot-<workflow> for the Machine its
//     Hardware's bmcRef names, which powers the machine off, sets a
//     one-time PXE boot (in EFI mode when an interface of the Hardware
//     has dhcp.uefi, as the real controller reads it) and powers it on;
//     Rufio completes it and the machine boots HookOS; then PENDING with
//     the conditions BootJobSetupComplete and BootJobComplete. Hardware
//     with no bmcRef fails the Workflow with BootJobSetupFailed.
//   - tink-server: GetAction serves the first Workflow (by name) whose
//     agentID is the worker's, refusing it while PREPARING or once it is
//     neither PENDING nor RUNNING, and sets currentState to the action
//     served (its actionName set before any report); a report sets the
//     action's state, times and message, the Workflow's state to any end
//     but SUCCESS, and POST after the last action's SUCCESS.
//   - tink-controller again: RUNNING gets globalExecutionStop (now plus
//     the global timeout) when the first action's report carried its start
//     while it is still current; past it, TIMEOUT; POST becomes SUCCESS.
//   - Each machine's agent, once its HookOS boot's attestation received an
//     install code, asks for actions and reports them as Tinkerbell's
//     agent does: RUNNING with "running action" and no times, then the
//     end with "action completed" and the action's times. An action whose
//     environment names a code by its SHA-256 (INSTALL_CODE_SHA256) fails
//     unless the boot's record holds that code, as fleet's actions check
//     it. After the reboot action the machine boots its installed Talos.
//
// Writes go through the status subresource with the resourceVersion last
// seen, read again after a conflict (fleetd annotates Workflows while they
// run). tinkSim follows the Workflows through a watch, as Tinkerbell's
// caches do, and lists them again every resync.
type tinkSim struct {
	w        *world
	ns       string
	machines map[string]*simMachine // by MAC
	say      func(who, source, text string)
	// failAt makes the named action fail on the named machine, for tests.
	failAt map[string]string
	// every is how often an agent asks for an action while it has none;
	// 0: every 50 ms.
	every time.Duration
	// server is the tink-server the agents talk to; nil: the
	// simulation's, with its tink-controller and Rufio. A test that runs
	// the real Tinkerbell sets it, and nothing else of Tinkerbell's is
	// simulated.
	server tinkServer

	mu      sync.Mutex
	wfs     map[string]*tinkerbell.Workflow // the latest seen, by name
	byAgent map[string]map[string]bool      // names of wfs, by status.agentID
	turns   chan struct{}                   // bounds the reconciles that run at once
	// busy: Workflows tink-controller is reconciling; true: seen again
	// meanwhile, to be reconciled once more.
	busy map[string]bool
	tpls map[string]*parsedTemplate // by Template name
	// deletedMidRun: runs whose Workflow was deleted while their machine
	// ran their actions (a wipe its run no longer stands behind).
	deletedMidRun []string
}

// parsedTemplate is a Template's data as parsed, for its resourceVersion,
// and when it was read.
type parsedTemplate struct {
	rv   string
	tpl  *template.Template
	read time.Time
}

// templateFresh is how long a Template read stands for the one in the
// cluster, as tink-controller's cache does: a render reads it again only
// after that.
const templateFresh = 2 * time.Second

// actionTime is how long a simulated action runs.
const actionTime = 60 * time.Millisecond

// resync is how often tinkSim lists the Workflows again beside its watch.
const resync = 30 * time.Second

// controllers is how many Workflows tink-controller reconciles at once.
const controllers = 8

// run runs each machine's agent and, unless server is set, Tinkerbell's
// side, until ctx ends.
func (t *tinkSim) run(ctx context.Context) {
	t.mu.Lock()
	t.wfs, t.byAgent, t.busy, t.tpls = map[string]*tinkerbell.Workflow{}, map[string]map[string]bool{}, map[string]bool{}, map[string]*parsedTemplate{}
	t.turns = make(chan struct{}, controllers)
	t.mu.Unlock()
	srv := t.server
	var wg sync.WaitGroup
	if srv == nil {
		srv = t
		wg.Go(func() { t.follow(ctx) })
	}
	for _, m := range t.machines {
		wg.Go(func() { t.agent(ctx, m, srv) })
	}
	wg.Wait()
}

// follow keeps wfs current from a watch of the namespace's Workflows,
// listing them again at each resync and whenever the watch ends, and hands
// each change to tink-controller.
func (t *tinkSim) follow(ctx context.Context) {
	res := t.w.tink.Resource(provision.WorkflowResource).Namespace(t.ns)
	for ctx.Err() == nil {
		wt, err := res.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		if list, err := res.List(ctx, metav1.ListOptions{}); err == nil {
			t.relist(ctx, list.Items)
		}
		t.events(ctx, wt)
		wt.Stop()
	}
}

// events takes the watch's events until it ends, ctx ends, or a resync
// is due.
func (t *tinkSim) events(ctx context.Context, wt watch.Interface) {
	timer := time.NewTimer(resync)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		case ev, ok := <-wt.ResultChan():
			if !ok {
				return
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			switch {
			case !isObj:
			case ev.Type == watch.Deleted:
				t.mu.Lock()
				t.forget(u.GetName())
				t.mu.Unlock()
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				t.seen(ctx, u)
			}
		}
	}
}

// relist takes a list of every Workflow.
func (t *tinkSim) relist(ctx context.Context, items []unstructured.Unstructured) {
	names := map[string]bool{}
	for i := range items {
		names[items[i].GetName()] = true
		t.seen(ctx, &items[i])
	}
	t.mu.Lock()
	for n := range t.wfs {
		if !names[n] {
			t.forget(n)
		}
	}
	t.mu.Unlock()
}

// seen takes a Workflow as read, unless a newer one was seen, and has
// tink-controller reconcile it when its state is one the controller acts
// on.
func (t *tinkSim) seen(ctx context.Context, u *unstructured.Unstructured) {
	wf := &tinkerbell.Workflow{}
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, wf) != nil {
		return
	}
	if !t.keep(wf) {
		return
	}
	switch wf.Status.State {
	case "", tinkerbell.WorkflowStatePreparing, tinkerbell.WorkflowStateRunning, tinkerbell.WorkflowStatePost:
		t.reconcile(ctx, wf.Name)
	}
}

// keep stores wf unless the Workflow stored is newer; it reports whether
// it stored it.
func (t *tinkSim) keep(wf *tinkerbell.Workflow) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.wfs[wf.Name]; ok && newer(old.ResourceVersion, wf.ResourceVersion) {
		return false
	}
	t.forget(wf.Name)
	t.wfs[wf.Name] = wf
	if id := wf.Status.AgentID; id != "" {
		if t.byAgent[id] == nil {
			t.byAgent[id] = map[string]bool{}
		}
		t.byAgent[id][wf.Name] = true
	}
	return true
}

// forget drops Workflow name from wfs and byAgent. t.mu is held.
func (t *tinkSim) forget(name string) {
	if old, ok := t.wfs[name]; ok {
		delete(t.byAgent[old.Status.AgentID], name)
		if len(t.byAgent[old.Status.AgentID]) == 0 {
			delete(t.byAgent, old.Status.AgentID)
		}
		delete(t.wfs, name)
	}
}

// newer reports whether resourceVersion a is past b. kube-apiserver's are
// etcd revisions; client-go's fakes set none.
func newer(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}

// latest returns a copy of the Workflow last seen of name.
func (t *tinkSim) latest(name string) (*tinkerbell.Workflow, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	wf, ok := t.wfs[name]
	if !ok {
		return nil, false
	}
	return wf.DeepCopy(), true
}

// reconcile has tink-controller reconcile Workflow name: at once when no
// reconcile of it runs, else once more after the one that runs.
func (t *tinkSim) reconcile(ctx context.Context, name string) {
	t.mu.Lock()
	if _, running := t.busy[name]; running {
		t.busy[name] = true
		t.mu.Unlock()
		return
	}
	t.busy[name] = false
	t.mu.Unlock()
	go func() {
		for {
			t.controller(ctx, name)
			t.mu.Lock()
			again := t.busy[name]
			if !again || ctx.Err() != nil {
				delete(t.busy, name)
				t.mu.Unlock()
				return
			}
			t.busy[name] = false
			t.mu.Unlock()
		}
	}()
}

// controller is one reconcile of Workflow name by tink-controller.
func (t *tinkSim) controller(ctx context.Context, name string) {
	wf, ok := t.latest(name)
	if !ok || !wf.DeletionTimestamp.IsZero() {
		return
	}
	select {
	case t.turns <- struct{}{}:
		defer func() { <-t.turns }()
	case <-ctx.Done():
		return
	}
	var err error
	switch wf.Status.State {
	case "":
		err = t.write(ctx, wf, t.render)
	case tinkerbell.WorkflowStatePreparing:
		err = t.prepare(ctx, wf)
	case tinkerbell.WorkflowStateRunning:
		err = t.running(ctx, wf)
	case tinkerbell.WorkflowStatePost:
		err = t.write(ctx, wf, func(_ context.Context, wf *tinkerbell.Workflow) error {
			if wf.Status.State == tinkerbell.WorkflowStatePost && wf.Status.CurrentState != nil {
				wf.Status.State = wf.Status.CurrentState.State
			}
			return nil
		})
	}
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		t.say(wf.Spec.HardwareRef, "tink", fmt.Sprintf("Workflow %s: %v", name, err))
	}
}

// errUnchanged: a change that found nothing to change.
var errUnchanged = errors.New("nothing to change")

// write applies change to wf's status and writes it, from the Workflow as
// last seen; after a conflict it reads the Workflow again and applies
// change to that. A change that returns errUnchanged writes nothing.
func (t *tinkSim) write(ctx context.Context, wf *tinkerbell.Workflow, change func(context.Context, *tinkerbell.Workflow) error) error {
	res := t.w.tink.Resource(provision.WorkflowResource).Namespace(t.ns)
	var err error
	for try := 0; try < 5; try++ {
		before := wf.Status.DeepCopy()
		if err = change(ctx, wf); err != nil {
			if errors.Is(err, errUnchanged) {
				return nil
			}
			return err
		}
		if equality.Semantic.DeepEqual(before, &wf.Status) {
			return nil // as tink-controller and tink-server, no write that changes nothing
		}
		var obj map[string]any
		if obj, err = runtime.DefaultUnstructuredConverter.ToUnstructured(wf); err != nil {
			return err
		}
		var u *unstructured.Unstructured
		if u, err = res.UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{}); err == nil {
			t.seenWritten(u)
			return nil
		}
		if !apierrors.IsConflict(err) {
			break
		}
		if u, err = res.Get(ctx, wf.Name, metav1.GetOptions{}); err != nil {
			break
		}
		wf = &tinkerbell.Workflow{}
		if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, wf); err != nil {
			break
		}
		t.keep(wf.DeepCopy())
	}
	return fmt.Errorf("write its status: %w", err)
}

// seenWritten stores what a write returned. The watch brings it too; the
// write's answer comes first, so the next write does not conflict.
func (t *tinkSim) seenWritten(u *unstructured.Unstructured) {
	wf := &tinkerbell.Workflow{}
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, wf) == nil {
		t.keep(wf)
	}
}

// render is tink-controller's first reconcile of a Workflow: its
// Template rendered into its status.
func (t *tinkSim) render(ctx context.Context, wf *tinkerbell.Workflow) error {
	if wf.Status.State != "" {
		return errUnchanged
	}
	now := &metav1.Time{Time: time.Now().UTC()}
	rendered, err := t.rendered(ctx, wf)
	if err != nil {
		wf.Status.TemplateRendering = tinkerbell.TemplateRenderingFailed
		wf.Status.SetConditionIfDifferent(tinkerbell.WorkflowCondition{
			Type: tinkerbell.TemplateRenderedSuccess, Status: metav1.ConditionFalse, Reason: "Error", Message: err.Error(), Time: now,
		})
		return nil
	}
	conditions := wf.Status.Conditions
	wf.Status = rendered.status()
	wf.Status.Conditions = conditions
	wf.Status.BootOptions.Jobs = map[string]tinkerbell.JobStatus{}
	wf.Status.TemplateRendering = tinkerbell.TemplateRenderingSuccessful
	wf.Status.SetCondition(tinkerbell.WorkflowCondition{
		Type: tinkerbell.TemplateRenderedSuccess, Status: metav1.ConditionTrue, Reason: "Complete", Message: "template rendered successfully", Time: now,
	})
	wf.Status.State = tinkerbell.WorkflowStatePending
	if wf.Spec.BootOptions.BootMode != "" || wf.Spec.BootOptions.ToggleAllowNetboot {
		wf.Status.State = tinkerbell.WorkflowStatePreparing
	}
	return nil
}

// renderedWorkflow is a Template's data rendered and parsed, in the
// fields tink-controller reads (its workflow.Workflow).
type renderedWorkflow struct {
	GlobalTimeout int `yaml:"global_timeout"`
	Tasks         []struct {
		Name        string            `yaml:"name"`
		Worker      string            `yaml:"worker"`
		Volumes     []string          `yaml:"volumes"`
		Environment map[string]string `yaml:"environment"`
		Actions     []struct {
			Name        string            `yaml:"name"`
			Image       string            `yaml:"image"`
			Timeout     int64             `yaml:"timeout"`
			Command     []string          `yaml:"command"`
			Volumes     []string          `yaml:"volumes"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"actions"`
	} `yaml:"tasks"`
}

// status is the Workflow status tink-controller makes of rw
// (YAMLToStatus): each action PENDING, with IDs of its own. An action's
// pid, which tink-controller copies into a field Tinkerbell deprecates
// and fleet does not read, is left out.
func (rw *renderedWorkflow) status() tinkerbell.WorkflowStatus {
	st := tinkerbell.WorkflowStatus{GlobalTimeout: int64(rw.GlobalTimeout)}
	for _, task := range rw.Tasks {
		tk := tinkerbell.Task{Name: task.Name, AgentID: task.Worker, ID: newID(), Volumes: task.Volumes, Environment: task.Environment}
		for _, a := range task.Actions {
			tk.Actions = append(tk.Actions, tinkerbell.Action{
				ID: newID(), Name: a.Name, Image: a.Image, Timeout: a.Timeout, Command: a.Command,
				Volumes: a.Volumes, State: tinkerbell.WorkflowStatePending, Environment: a.Environment,
			})
		}
		st.Tasks = append(st.Tasks, tk)
		if st.AgentID == "" {
			st.AgentID = task.Worker
		}
	}
	return st
}

// newID is an action's or task's ID: unique, opaque.
func newID() string {
	b := make([]byte, 13)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}

// rendered renders wf's Template with its values, as tink-controller
// does (missing keys are errors), from a parse cached per Template
// version.
func (t *tinkSim) rendered(ctx context.Context, wf *tinkerbell.Workflow) (*renderedWorkflow, error) {
	tpl, err := t.template(ctx, wf.Spec.TemplateRef)
	if err != nil {
		return nil, err
	}
	data := map[string]any{}
	for k, v := range wf.Spec.HardwareMap {
		data[k] = v
	}
	var out bytes.Buffer
	if err := tpl.Execute(&out, data); err != nil {
		return nil, fmt.Errorf("error rendering template: %w", err)
	}
	rw := &renderedWorkflow{}
	if err := yaml.Unmarshal(out.Bytes(), rw); err != nil {
		return nil, fmt.Errorf("parsing yaml data: %w", err)
	}
	if len(rw.Tasks) == 0 {
		return nil, errors.New("template must have at least one task defined")
	}
	for _, task := range rw.Tasks {
		if task.Worker == "" {
			return nil, errors.New("failed to render template, empty hardware address")
		}
	}
	return rw, nil
}

// template returns Template name's data parsed.
func (t *tinkSim) template(ctx context.Context, name string) (*template.Template, error) {
	t.mu.Lock()
	p := t.tpls[name]
	t.mu.Unlock()
	if p != nil && time.Since(p.read) < templateFresh {
		return p.tpl, nil
	}
	u, err := t.w.tink.Resource(daemon.TemplateResource).Namespace(t.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errors.New("template not found")
		}
		return nil, err
	}
	if p != nil && p.rv == u.GetResourceVersion() && u.GetResourceVersion() != "" {
		t.mu.Lock()
		t.tpls[name] = &parsedTemplate{rv: p.rv, tpl: p.tpl, read: time.Now()}
		t.mu.Unlock()
		return p.tpl, nil
	}
	data, _, _ := unstructured.NestedString(u.Object, "spec", "data")
	tpl, err := template.New("workflow-template").Option("missingkey=error").Funcs(template.FuncMap{"quote": quote}).Parse(data)
	if err != nil {
		return nil, fmt.Errorf("error rendering template: %w", err)
	}
	t.mu.Lock()
	t.tpls[name] = &parsedTemplate{rv: u.GetResourceVersion(), tpl: tpl, read: time.Now()}
	t.mu.Unlock()
	return tpl, nil
}

// quote is sprig's quote: each argument as a Go string literal, joined by
// spaces.
func quote(args ...any) string {
	q := make([]string, 0, len(args))
	for _, a := range args {
		if a != nil {
			q = append(q, strconv.Quote(fmt.Sprint(a)))
		}
	}
	return strings.Join(q, " ")
}

// prepare is tink-controller's PREPARING with a netboot: the Rufio Job,
// run by Rufio, then PENDING.
func (t *tinkSim) prepare(ctx context.Context, wf *tinkerbell.Workflow) error {
	now := &metav1.Time{Time: time.Now().UTC()}
	job := "netboot-" + wf.Name
	hw, err := t.w.tink.Resource(provision.HardwareResource).Namespace(t.ns).Get(ctx, wf.Spec.HardwareRef, metav1.GetOptions{})
	if err != nil {
		return t.write(ctx, wf, failPreparing(tinkerbell.WorkflowCondition{
			Type: tinkerbell.BootJobSetupFailed, Status: metav1.ConditionFalse, Reason: "Error", Message: "failed to get hardware: " + err.Error(), Time: now,
		}))
	}
	machine, _, _ := unstructured.NestedString(hw.Object, "spec", "bmcRef", "name")
	if machine == "" {
		return t.write(ctx, wf, failPreparing(tinkerbell.WorkflowCondition{
			Type: tinkerbell.BootJobSetupFailed, Status: metav1.ConditionTrue, Reason: "Error",
			Message: fmt.Sprintf("error creating job: hardware %q does not have a BMC", hw.GetName()), Time: now,
		}))
	}
	uid, err := t.netboot(ctx, wf, machine, efiBoot(hw))
	if err != nil {
		return err
	}
	return t.write(ctx, wf, func(_ context.Context, wf *tinkerbell.Workflow) error {
		if wf.Status.State != tinkerbell.WorkflowStatePreparing {
			return errUnchanged
		}
		if wf.Status.BootOptions.Jobs == nil {
			wf.Status.BootOptions.Jobs = map[string]tinkerbell.JobStatus{}
		}
		wf.Status.BootOptions.Jobs[job] = tinkerbell.JobStatus{UID: types.UID(uid), ExistingJobDeleted: true, Complete: true}
		wf.Status.SetCondition(tinkerbell.WorkflowCondition{Type: tinkerbell.BootJobSetupComplete, Status: metav1.ConditionTrue, Reason: "Created", Message: "job created", Time: now})
		wf.Status.SetCondition(tinkerbell.WorkflowCondition{Type: tinkerbell.BootJobComplete, Status: metav1.ConditionTrue, Reason: "Complete", Message: "job completed", Time: now})
		wf.Status.State = tinkerbell.WorkflowStatePending
		return nil
	})
}

// failPreparing is the change that fails a PREPARING Workflow with
// condition c.
func failPreparing(c tinkerbell.WorkflowCondition) func(context.Context, *tinkerbell.Workflow) error {
	return func(_ context.Context, wf *tinkerbell.Workflow) error {
		if wf.Status.State != tinkerbell.WorkflowStatePreparing {
			return errUnchanged
		}
		wf.Status.SetCondition(c)
		wf.Status.State = tinkerbell.WorkflowStateFailed
		return nil
	}
}

// efiBoot reports whether an interface of the Hardware has dhcp.uefi, which
// is what the real tink-controller sets the Job's EFIBoot from.
func efiBoot(hw *unstructured.Unstructured) bool {
	ifaces, _, _ := unstructured.NestedSlice(hw.Object, "spec", "interfaces")
	for _, i := range ifaces {
		if m, ok := i.(map[string]any); ok {
			if uefi, _, _ := unstructured.NestedBool(m, "dhcp", "uefi"); uefi {
				return true
			}
		}
	}
	return false
}

// netboot plays tink-controller's create of the Rufio Job
// netboot-<workflow>, owned by the Workflow, and Rufio's run of it: the
// Job's status Completed, and the machine power-cycled into a PXE boot.
// A Job that exists already (a reconcile after a failed status write) is
// run again. It returns the Job's UID.
func (t *tinkSim) netboot(ctx context.Context, wf *tinkerbell.Workflow, machine string, efi bool) (string, error) {
	name := "netboot-" + wf.Name
	off, on := bmc.PowerHardOff, bmc.PowerOn
	controller := true
	job := bmc.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: bmc.GroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: tinkerbell.GroupVersion.String(), Kind: "Workflow", Name: wf.Name, UID: wf.UID, Controller: &controller,
		}}},
		Spec: bmc.JobSpec{
			MachineRef: bmc.MachineRef{Name: machine, Namespace: t.ns},
			Tasks: []bmc.Action{
				{PowerAction: &off},
				{OneTimeBootDeviceAction: &bmc.OneTimeBootDeviceAction{Devices: []bmc.BootDevice{bmc.PXE}, EFIBoot: efi}},
				{PowerAction: &on},
			},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&job)
	if err != nil {
		return "", err
	}
	jobs := t.w.tink.Resource(provision.JobResource).Namespace(t.ns)
	u, err := jobs.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		u, err = jobs.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("create job %s: %w", name, err)
	}
	completed := []any{map[string]any{"type": string(bmc.JobCompleted), "status": string(bmc.ConditionTrue)}}
	if err := unstructured.SetNestedSlice(u.Object, completed, "status", "conditions"); err != nil {
		return "", err
	}
	if _, err := jobs.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("job %s: write its status: %w", name, err)
	}
	m := t.machines[wf.Spec.HardwareMap[provision.ValueMAC]]
	if m != nil {
		t.say(m.name, "rufio", fmt.Sprintf("job %s: PXE next, power cycle", name))
		m.powerCycle()
	}
	return string(u.GetUID()), nil
}

// running is tink-controller's reconcile of a RUNNING Workflow: the
// global timeout's stop, set once the first action reported its start
// while it is current, and TIMEOUT past it.
func (t *tinkSim) running(ctx context.Context, wf *tinkerbell.Workflow) error {
	if stop := wf.Status.GlobalExecutionStop; stop != nil {
		if time.Now().After(stop.Time) {
			return t.write(ctx, wf, func(_ context.Context, wf *tinkerbell.Workflow) error {
				if wf.Status.State != tinkerbell.WorkflowStateRunning {
					return errUnchanged
				}
				wf.Status.State = tinkerbell.WorkflowStateTimeout
				return nil
			})
		}
		return nil // reconciled again at the stop (after)
	}
	return t.write(ctx, wf, func(_ context.Context, wf *tinkerbell.Workflow) error {
		first, cs := firstAction(wf), wf.Status.CurrentState
		if wf.Status.State != tinkerbell.WorkflowStateRunning || wf.Status.GlobalExecutionStop != nil ||
			first == nil || cs == nil || first.ID != cs.ActionID || first.ExecutionStart == nil {
			return errUnchanged
		}
		now := time.Now()
		var skew time.Duration
		if now.After(first.ExecutionStart.Time) {
			skew = now.Sub(first.ExecutionStart.Time)
		}
		stop := now.Add(time.Duration(wf.Status.GlobalTimeout) * time.Second).Add(skew)
		wf.Status.GlobalExecutionStop = &metav1.Time{Time: stop}
		t.after(ctx, wf.Name, time.Until(stop))
		return nil
	})
}

// after has tink-controller reconcile Workflow name again after d.
func (t *tinkSim) after(ctx context.Context, name string, d time.Duration) {
	time.AfterFunc(d+10*time.Millisecond, func() {
		if ctx.Err() == nil {
			t.reconcile(ctx, name)
		}
	})
}

// firstAction is the first action of the Workflow's first task.
func firstAction(wf *tinkerbell.Workflow) *tinkerbell.Action {
	if len(wf.Status.Tasks) > 0 && len(wf.Status.Tasks[0].Actions) > 0 {
		return &wf.Status.Tasks[0].Actions[0]
	}
	return nil
}

// errNoAction is tink-server's answer to a worker it serves no action:
// no Workflow, or one it cannot serve now.
var errNoAction = errors.New("no action for the worker")

// GetAction is tink-server's: the worker's next action, its Workflow's
// currentState set to it.
func (t *tinkSim) GetAction(ctx context.Context, agentID string) (agentAction, error) {
	t.mu.Lock()
	names := slices.Collect(maps.Keys(t.byAgent[agentID]))
	t.mu.Unlock()
	slices.Sort(names)
	for _, n := range names {
		wf, ok := t.latest(n)
		if !ok || len(wf.Status.Tasks) == 0 {
			continue
		}
		var a agentAction
		err := t.write(ctx, wf, func(_ context.Context, wf *tinkerbell.Workflow) error {
			var err error
			a, err = serve(wf, agentID)
			return err
		})
		return a, err
	}
	return agentAction{}, fmt.Errorf("%w: no Workflows found", errNoAction)
}

// serve sets wf's currentState to the action tink-server serves the
// worker agentID, and returns it.
func serve(wf *tinkerbell.Workflow, agentID string) (agentAction, error) {
	if wf.Spec.BootOptions.BootMode != "" && wf.Status.State == tinkerbell.WorkflowStatePreparing {
		return agentAction{}, fmt.Errorf("%w: Workflow is in preparing state", errNoAction)
	}
	if wf.Status.State != tinkerbell.WorkflowStatePending && wf.Status.State != tinkerbell.WorkflowStateRunning {
		return agentAction{}, fmt.Errorf("%w: Workflow not in pending or running state", errNoAction)
	}
	if len(wf.Status.Tasks) == 0 {
		return agentAction{}, fmt.Errorf("%w: no Tasks found in Workflow", errNoAction)
	}
	task := &wf.Status.Tasks[0]
	i, err := nextAction(task, wf.Status.CurrentState)
	if err != nil {
		return agentAction{}, err
	}
	if task.AgentID != agentID {
		return agentAction{}, fmt.Errorf("%w: Task not assigned to Agent", errNoAction)
	}
	act := task.Actions[i]
	wf.Status.CurrentState = &tinkerbell.CurrentState{
		AgentID: agentID, TaskID: task.ID, ActionID: act.ID, State: act.State, ActionName: act.Name, TaskName: task.Name,
	}
	env := maps.Clone(task.Environment)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, act.Environment)
	a := agentAction{WorkflowID: wf.Namespace + "/" + wf.Name, TaskID: task.ID, AgentID: agentID, ActionID: act.ID, Name: act.Name}
	for k, v := range env {
		a.Environment = append(a.Environment, k+"="+v)
	}
	slices.Sort(a.Environment)
	return a, nil
}

// nextAction is tink-server's resolveAction: the first action while it is
// PENDING, the current one while it is PENDING or RUNNING, else the one
// after the current one once it succeeded.
func nextAction(task *tinkerbell.Task, cs *tinkerbell.CurrentState) (int, error) {
	if len(task.Actions) == 0 {
		return 0, fmt.Errorf("%w: no Actions found", errNoAction)
	}
	if task.Actions[0].State == tinkerbell.WorkflowStatePending {
		return 0, nil
	}
	if cs == nil {
		return 0, fmt.Errorf("%w: no current state available", errNoAction)
	}
	at := slices.IndexFunc(task.Actions, func(a tinkerbell.Action) bool { return a.ID == cs.ActionID })
	switch {
	case at < 0:
		return 0, fmt.Errorf("%w: no Action found", errNoAction)
	case cs.State == tinkerbell.WorkflowStateRunning || cs.State == tinkerbell.WorkflowStatePending:
		return at, nil
	case cs.State != tinkerbell.WorkflowStateSuccess:
		return 0, fmt.Errorf("%w: current Action not in success state", errNoAction)
	case at == len(task.Actions)-1:
		return 0, fmt.Errorf("%w: last Action in task", errNoAction)
	}
	return at + 1, nil
}

// Report is tink-server's ReportActionStatus.
func (t *tinkSim) Report(ctx context.Context, a agentAction, state, message string, start, stop time.Time, duration string) error {
	wf, ok := t.latest(a.workflow())
	if !ok {
		res := t.w.tink.Resource(provision.WorkflowResource).Namespace(t.ns)
		u, err := res.Get(ctx, a.workflow(), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("error getting workflow: %w", err)
		}
		wf = &tinkerbell.Workflow{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, wf); err != nil {
			return err
		}
	}
	return t.write(ctx, wf, func(_ context.Context, wf *tinkerbell.Workflow) error {
		return report(wf, a, tinkerbell.WorkflowState(state), message, start, stop, duration)
	})
}

// report writes an agent's report of action a into wf's status.
func report(wf *tinkerbell.Workflow, a agentAction, state tinkerbell.WorkflowState, message string, start, stop time.Time, duration string) error {
	for ti := range wf.Status.Tasks {
		task := &wf.Status.Tasks[ti]
		for ai := range task.Actions {
			act := &task.Actions[ai]
			if act.ID != a.ActionID || task.AgentID != a.AgentID {
				continue
			}
			act.State, act.ExecutionStart, act.ExecutionStop = state, stamp(start), stamp(stop)
			act.ExecutionDuration, act.Message = duration, message
			if state != tinkerbell.WorkflowStateSuccess {
				wf.Status.State = state
			}
			if ti == len(wf.Status.Tasks)-1 && ai == len(task.Actions)-1 && state == tinkerbell.WorkflowStateSuccess {
				wf.Status.State = tinkerbell.WorkflowStatePost
			}
			wf.Status.CurrentState = &tinkerbell.CurrentState{
				AgentID: a.AgentID, TaskID: a.TaskID, ActionID: a.ActionID, State: state, ActionName: a.Name, TaskName: task.Name,
			}
			return nil
		}
	}
	return fmt.Errorf("%w: action not found", errNoAction)
}

// stamp is a reported time as tink-server stores it: none for the zero
// time, else to the second.
func stamp(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t.UTC().Truncate(time.Second)}
}

// agent is machine m's agent: in each HookOS boot whose attestation
// received an install code, it asks srv for an action, runs it and
// reports it, until the boot ends.
func (t *tinkSim) agent(ctx context.Context, m *simMachine, srv tinkServer) {
	every := cmp.Or(t.every, 50*time.Millisecond)
	mac := m.mac.String()
	started := map[string]bool{} // runs of this agent with an action begun
	for next := false; next || sleep(ctx, every); {
		next = false
		boot, code, ok := m.hookOSCode()
		if !ok {
			continue
		}
		askCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		a, err := srv.GetAction(askCtx, mac)
		cancel()
		if err != nil || !m.inBoot(boot) {
			continue
		}
		// An action that ended well is followed by the next at once.
		next = t.perform(ctx, m, srv, a, boot, code, started[a.workflow()])
		started[a.workflow()] = true
	}
}

// sleep waits d, and reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// perform runs action a on m in boot number boot, whose attestation
// received code, and reports it as the agent does; started: an action of
// its run began before. It reports whether the action succeeded and was
// reported, and the machine is still in HookOS.
func (t *tinkSim) perform(ctx context.Context, m *simMachine, srv tinkServer, a agentAction, boot int, code string, started bool) bool {
	run := a.workflow()
	if err := srv.Report(ctx, a, "RUNNING", "running action", time.Time{}, time.Time{}, ""); err != nil {
		t.say(m.name, "agent", fmt.Sprintf("%s: %v", a.Name, err))
		if started {
			t.deleted(run, err)
		}
		return false
	}
	start := time.Now()
	if !sleep(ctx, actionTime) || !m.inBoot(boot) {
		return false // the machine powered off mid-action
	}
	state := tinkerbell.WorkflowStateSuccess
	if sum := a.env(envCodeSHA256); t.failAt[m.name] == a.Name || sum != "" && sum != provision.CodeSHA256(code) {
		state = tinkerbell.WorkflowStateFailed
	}
	end := time.Now()
	t.say(m.name, "agent", fmt.Sprintf("%s %s", a.Name, state))
	if err := srv.Report(ctx, a, string(state), "action completed", start, end, end.Sub(start).String()); err != nil {
		t.say(m.name, "agent", fmt.Sprintf("%s: %v", a.Name, err))
		t.deleted(run, err)
		return false
	}
	if state != tinkerbell.WorkflowStateSuccess {
		return false
	}
	if a.Name == rebootAction {
		m.bootInstalled(ctx, code)
		return false
	}
	return true
}

// envCodeSHA256 is the action environment variable that names the run's
// install code by its SHA-256 (fleet's Templates set it from
// provision.ValueInstallCodeSHA256).
const envCodeSHA256 = "INSTALL_CODE_SHA256"

// rebootAction is the Template's last action, after which the machine
// boots its installed Talos.
const rebootAction = "reboot"

// deleted records run when a report found its Workflow deleted after an
// action of it began: the machine ran a wipe its run no longer stands
// behind.
func (t *tinkSim) deleted(run string, err error) {
	if !apierrors.IsNotFound(err) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deletedMidRun = append(t.deletedMidRun, run)
}
