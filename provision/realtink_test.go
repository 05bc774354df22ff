package provision

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/tinktest"
	"github.com/fleetkit/fleet/inventory"
)

// realTink is a harness on the real kube-apiserver with the real
// Tinkerbell (tink-server, tink-controller, Rufio) beside it, and an agent
// of the test's that reports the machines' actions to tink-server.
type realTink struct {
	*harness
	agent *tinktest.Agent
	ctx   context.Context
}

// newRealTink starts Tinkerbell and a harness of devs (edit tunes it, as
// newHarness's does), and creates the Template fleet-provision:
// global_timeout seconds, and the actions wipe-disk and install.
func newRealTink(t *testing.T, globalTimeout int, edit func(*Cluster, *Config), devs ...inventory.Device) *realTink {
	t.Helper()
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	tb := tinktest.Start(t, env, ns, nil)
	h := newRealHarnessIn(t, env, ns, edit, devs...)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	t.Cleanup(cancel)
	// One task for the worker the Workflow's device_1 names, its actions
	// images of their names, each with a 600 s timeout.
	data := fmt.Sprintf("version: \"0.1\"\nname: fleet-provision\nglobal_timeout: %d\ntasks:\n  - name: provision\n    worker: \"{{.device_1}}\"\n    actions:\n", globalTimeout)
	for _, a := range []string{"wipe-disk", "install"} {
		data += fmt.Sprintf("      - name: %s\n        image: 127.0.0.1:5000/%s:v1\n        timeout: 600\n", a, a)
	}
	h.create(tinkerbell.GroupVersion.WithResource("templates"), tinkerbell.GroupVersion.WithKind("Template"),
		&tinkerbell.Template{ObjectMeta: metav1.ObjectMeta{Name: "fleet-provision", Namespace: h.ns}, Spec: tinkerbell.TemplateSpec{Data: &data}}, nil)
	return &realTink{harness: h, agent: tb.Agent(), ctx: ctx}
}

// waitWorkflow reads Workflow name until cond holds, or fails the test.
func (r *realTink) waitWorkflow(name string, cond func(tinkerbell.Workflow) bool) (wf tinkerbell.Workflow) {
	r.t.Helper()
	kubetest.WaitFor(r.ctx, r.t, r.tinkAPI, WorkflowResource, r.ns, name, &wf, func() bool { return cond(wf) })
	return wf
}

// fetch takes the next action of the machine mac from tink-server, as its
// agent does.
func (r *realTink) fetch(mac string) *tinktest.Action {
	r.t.Helper()
	a, err := r.agent.GetAction(r.ctx, mac)
	if err != nil {
		r.t.Fatalf("GetAction(%s): %v", mac, err)
	}
	return a
}

// report reports a's state as the agent does: RUNNING without times, an
// end with "action completed" and the action's times.
func (r *realTink) report(a *tinktest.Action, state string) {
	r.t.Helper()
	var err error
	if state == "RUNNING" {
		err = r.agent.Report(r.ctx, a, state, "running action", time.Time{}, time.Time{}, "")
	} else {
		stop := time.Now().UTC()
		err = r.agent.Report(r.ctx, a, state, "action completed", stop.Add(-time.Second), stop, "1s")
	}
	if err != nil {
		r.t.Fatalf("report %s %s: %v", a.Name, state, err)
	}
}

// untilJournal runs the loop's passes until the device's journal holds a
// line that matches, and returns it.
func (r *realTink) untilJournal(id int64, matches func(line string) bool) string {
	r.t.Helper()
	for {
		r.reconcile()
		for _, l := range r.nb.lines() {
			if l.ID == id && matches(l.Text) {
				return l.Text
			}
		}
		select {
		case <-r.ctx.Done():
			r.t.Fatalf("no journal line of device %d that the test waits for: %+v", id, r.nb.lines())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// The Template's global timeout and the stop tink-controller sets, on the
// real Tinkerbell: the Workflow's globalTimeout is the Template's from its
// render on. node-01's agent fetches wipe-disk, reports it RUNNING and
// dies: Tinkerbell sets that run no stop (it does only once the first
// action reported its end), so fleetd deletes it once the global timeout
// passed, with the runbook's "never reported its first action" line.
// node-02's wipe-disk succeeds and its agent dies during install:
// tink-controller sets its globalExecutionStop and ends it TIMEOUT there,
// and fleetd journals "ended TIMEOUT" at install.
func TestIntegrationTinkerbellGlobalTimeout(t *testing.T) {
	const timeout = 6
	n1, n2 := attested(worker(1, "node-01")), attested(worker(2, "node-02"))
	r := newRealTink(t, timeout, nil, n1, n2)
	run1, run2 := r.admitStarts(n1).Run, r.admitStarts(n2).Run
	for _, run := range []string{run1, run2} {
		wf := r.waitWorkflow(run, func(wf tinkerbell.Workflow) bool { return wf.Status.State == tinkerbell.WorkflowStatePending })
		if wf.Status.GlobalTimeout != timeout || wf.Status.AgentID == "" {
			t.Errorf("%s: globalTimeout %d, agentID %q; want the Template's %d and the worker", run, wf.Status.GlobalTimeout, wf.Status.AgentID, timeout)
		}
	}

	a := r.fetch(macOf(1).String())
	if a.Name != "wipe-disk" || a.WorkflowID != r.ns+"/"+run1 {
		t.Fatalf("node-01 fetched %+v", a)
	}
	r.report(a, "RUNNING")

	a = r.fetch(macOf(2).String())
	r.report(a, "RUNNING")
	r.report(a, "SUCCESS")
	wf := r.waitWorkflow(run2, func(wf tinkerbell.Workflow) bool { return wf.Status.GlobalExecutionStop != nil })
	if a = r.fetch(macOf(2).String()); a.Name != "install" {
		t.Fatalf("node-02 fetched %+v after wipe-disk, want install", a)
	}
	r.report(a, "RUNNING")
	t.Logf("%s: globalExecutionStop %v", run2, wf.Status.GlobalExecutionStop)

	line := r.untilJournal(1, func(l string) bool { return strings.HasPrefix(l, "Workflow "+run1+" never reported") })
	want := fmt.Sprintf("Workflow %s never reported its first action within its global timeout (%ds); fleetd deleted it, no later boot resumes it, and the disk may be partly wiped or still hold the old install: set desired_action to provision", run1, timeout)
	if line != want {
		t.Errorf("node-01's line %q, want %q", line, want)
	}
	if _, err := r.tinkAPI.Resource(WorkflowResource).Namespace(r.ns).Get(r.ctx, run1, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get %s: %v, want it deleted", run1, err)
	}
	line = r.untilJournal(2, func(l string) bool { return strings.HasPrefix(l, "Workflow "+run2+" ended") })
	if want := "Workflow " + run2 + " ended TIMEOUT at action install; read its output with journalctl -t hookos HOOKOS_HOST=10.0.0.22"; line != want {
		t.Errorf("node-02's line %q, want %q", line, want)
	}
}

// An earlier run's ended Workflow does not stand between the machine's
// agent and its new run: tink-server takes the first Workflow it finds for
// the worker, and serves nothing from one that ended, so the new run's
// start deletes the run whose end is journaled, and the agent is served
// the new run's action.
func TestIntegrationTinkerbellEndedRunDeleted(t *testing.T) {
	n1 := attested(worker(1, "node-01"))
	r := newRealTink(t, 600, nil, n1)
	mac := macOf(1).String()
	run1 := r.admitStarts(n1).Run
	r.waitWorkflow(run1, func(wf tinkerbell.Workflow) bool { return wf.Status.State == tinkerbell.WorkflowStatePending })
	for range 2 {
		a := r.fetch(mac)
		r.report(a, "RUNNING")
		r.report(a, "SUCCESS")
	}
	r.waitWorkflow(run1, func(wf tinkerbell.Workflow) bool { return wf.Status.State == tinkerbell.WorkflowStateSuccess })
	r.untilJournal(1, func(l string) bool { return strings.HasPrefix(l, "Workflow "+run1+" ended SUCCESS") })

	run2 := r.rerun(run1).Run
	if got := r.runNames(); !slices.Equal(got, []string{run2}) {
		t.Fatalf("Workflows %v once %s started, want only it", got, run2)
	}
	r.waitWorkflow(run2, func(wf tinkerbell.Workflow) bool { return wf.Status.State == tinkerbell.WorkflowStatePending })
	if a := r.fetch(mac); a.WorkflowID != r.ns+"/"+run2 || a.Name != "wipe-disk" {
		t.Errorf("the agent was served %+v, want %s's wipe-disk", a, run2)
	}
}

// A netboot run whose Hardware names no BMC: tink-controller cannot make
// the Rufio job, sets the condition BootJobSetupFailed and FAILs the
// Workflow; fleetd journals the runbook's line for a Rufio job that fails
// to power the machine, with tink-controller's words, and sets
// desired_action to provision again.
func TestIntegrationTinkerbellBootJobSetupFailed(t *testing.T) {
	n3 := attested(worker(3, "node-03"))
	r := newRealTink(t, 600, nil, n3)
	noBMC := n3
	noBMC.BMC = ""
	if err := r.p.ensureHardware(r.ctx, noBMC); err != nil {
		t.Fatal(err)
	}
	run := fmt.Sprintf("provision-node-03-%d", time.Now().Unix())
	if err := r.p.newWorkflow(r.ctx, n3, run, RunProvision, "CODE", "installer:v1", "", "", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	wf := r.waitWorkflow(run, func(wf tinkerbell.Workflow) bool { return wf.Status.State == tinkerbell.WorkflowStateFailed })
	if !slices.ContainsFunc(wf.Status.Conditions, func(c tinkerbell.WorkflowCondition) bool {
		return c.Type == tinkerbell.BootJobSetupFailed && c.Status == metav1.ConditionTrue
	}) {
		t.Errorf("conditions %+v, want BootJobSetupFailed", wf.Status.Conditions)
	}
	line := r.untilJournal(3, func(l string) bool { return strings.HasPrefix(l, "the Rufio job") })
	want := fmt.Sprintf(`the Rufio job netboot-%s of Workflow %s failed to power the machine: error creating job: hardware "node-03" does not have a BMC; set AMT's address to 10.0.0.23, or power the machine on by hand`, run, run)
	if line != want {
		t.Errorf("line %q, want %q", line, want)
	}
	r.wantDesired(3)
}
