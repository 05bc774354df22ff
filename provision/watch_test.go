package provision

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/bmc"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fleetkit/fleet/inventory"
)

const run1 = "provision-node-01-946684800"

var started1 = journalLine{1, inventory.JournalInfo, "started Workflow provision-node-01-946684800; the machine attested from HookOS at 10.0.0.21"}

func actions(states map[string]tinkerbell.WorkflowState) []tinkerbell.Task {
	var acts []tinkerbell.Action
	for _, name := range []string{"wipe-disk", "install", "next-boot", "reboot"} {
		st := states[name]
		if st == "" {
			st = tinkerbell.WorkflowStatePending
		}
		acts = append(acts, tinkerbell.Action{Name: name, State: st})
	}
	return []tinkerbell.Task{{Name: "provision", Actions: acts}}
}

// succeeded makes a Workflow's status that of a run whose every action
// succeeded.
func succeeded(s *tinkerbell.WorkflowStatus) {
	s.State = tinkerbell.WorkflowStateSuccess
	s.Tasks = actions(map[string]tinkerbell.WorkflowState{"wipe-disk": "SUCCESS", "install": "SUCCESS", "next-boot": "SUCCESS", "reboot": "SUCCESS"})
}

// endedAt makes a Workflow's status that of a run that ended in state at
// action, after wipe-disk succeeded (unless action is wipe-disk).
func endedAt(state tinkerbell.WorkflowState, action string) func(*tinkerbell.WorkflowStatus) {
	return func(s *tinkerbell.WorkflowStatus) {
		states := map[string]tinkerbell.WorkflowState{"wipe-disk": "SUCCESS"}
		states[action] = state
		s.State = state
		s.Tasks = actions(states)
	}
}

// bootJobFailed makes a Workflow's status that of a run whose Rufio job
// failed, as tink-controller writes it.
func bootJobFailed(s *tinkerbell.WorkflowStatus) {
	s.State = tinkerbell.WorkflowStatePreparing
	s.Conditions = []tinkerbell.WorkflowCondition{{Type: tinkerbell.BootJobFailed, Status: "True", Message: "job failed"}}
}

// atInstall makes a Workflow's status that of a run at install, its
// wipe-disk done.
func atInstall(s *tinkerbell.WorkflowStatus) {
	s.State = tinkerbell.WorkflowStateRunning
	s.CurrentState = &tinkerbell.CurrentState{ActionName: "install", State: tinkerbell.WorkflowStateRunning}
	s.Tasks = actions(map[string]tinkerbell.WorkflowState{"wipe-disk": "SUCCESS", "install": "RUNNING"})
}

// "The journal says a Workflow ended FAILED or ended TIMEOUT and names an
// action": the line names the action and the HookOS address for journalctl,
// once, however many passes and restarts. A run that ended without success
// leaves no config to fetch and no token to join with, but one whose
// reports stopped while install was current: its node may boot the install
// and fetch its config yet. Tinkerbell writes the status through the
// status subresource, and the mark of the journaled end leaves it so. On
// netboxtest, NetBox keeps the line across the restart. The run is
// reported started once, and its end once, with the outcome its line
// tells.
func TestWatchEndedFailedOrTimeout(t *testing.T) {
	for _, tc := range []struct {
		state  tinkerbell.WorkflowState
		action string
		kept   bool // the config and the token stay
	}{
		{tinkerbell.WorkflowStateFailed, "wipe-disk", false},
		{tinkerbell.WorkflowStateFailed, "install", false},
		{tinkerbell.WorkflowStateTimeout, "install", true},
		{tinkerbell.WorkflowStateTimeout, "wipe-disk", false},
	} {
		t.Run(string(tc.state)+" at "+tc.action, func(t *testing.T) {
			onClusters(t, func(t *testing.T, c cluster) {
				h, run, started := c.startWorker(t, nil)
				if c.apiserver() {
					// On the real CRD, an update of the Workflow itself drops a status.
					wf := h.workflow(run)
					wf.Status.State = tinkerbell.WorkflowStateSuccess
					if _, err := h.tinkAPI.Resource(WorkflowResource).Namespace(h.ns).Update(context.Background(),
						unstructuredOf(t, &wf, tinkerbell.GroupVersion.WithKind("Workflow")), metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
					if pass := h.reconcile(); len(pass.Ended) != 0 {
						t.Fatalf("ended %v on a status the server dropped", pass.Ended)
					}
				}
				h.setStatus(run, func(s *tinkerbell.WorkflowStatus) {
					endedAt(tc.state, tc.action)(s)
					// Tinkerbell's own message says only this.
					s.Conditions = []tinkerbell.WorkflowCondition{{Type: "ActionComplete", Status: "True", Message: "action completed"}}
				})
				if pass := h.reconcile(); !slices.Equal(pass.Ended, []string{run}) {
					t.Errorf("ended %v", pass.Ended)
				}
				h.reconcile()
				h.restart()
				h.reconcile()
				h.wantJournal(1, started, journalLine{1, inventory.JournalWarning,
					"Workflow " + run + " ended " + string(tc.state) + " at action " + tc.action + "; read its output with journalctl -t hookos HOOKOS_HOST=10.0.0.21"})
				if n := h.count(WorkflowResource); n != 1 {
					t.Errorf("%d Workflows, want the ended one kept", n)
				}
				if got := h.nb.dev(1); got.Status != inventory.StatusPlanned || got.DesiredAction != "" {
					t.Errorf("device changed: %+v", got)
				}
				h.wantKept(run, tc.kept)
				if got := h.workflow(run); got.Status.State != tc.state || got.Annotations[annReported] != string(tc.state) {
					t.Errorf("Workflow after the end was journaled: state %s, annotations %v", got.Status.State, got.Annotations)
				}
				if c.name == fakes.name { // in a bubble, the run ended as it started
					h.wantRunEvents(runEvent{kind: RunProvision, outcome: "started"}, runEvent{RunProvision, strings.ToLower(string(tc.state)), 0})
				}
			}, fakes, apiserver, withNetBox)
		})
	}
}

// wantKept fails unless run's config and bootstrap token are both held
// (kept) or both gone.
func (h *harness) wantKept(run string, kept bool) {
	h.t.Helper()
	held, token := false, false
	h.configs.mu.Lock()
	for _, c := range h.configs.held {
		held = held || c.run == run
	}
	h.configs.mu.Unlock()
	for _, s := range h.secrets() {
		token = token || s.Annotations[annRun] == run
	}
	if held != kept || token != kept {
		h.t.Errorf("%s's config held %v, its bootstrap token %v; want both %v", run, held, token, kept)
	}
}

// "The journal says a Workflow never reported its first action within its
// global timeout": fleetd deletes it, once the timeout passed and not
// before. That covers a run whose wipe-disk was fetched, or reported
// RUNNING, and never reported its end (the machine lost power, the agent
// died): Tinkerbell sets such a run no stop. Its end is reported once, as
// never-reported.
func TestWatchNeverReported(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wipeDisk tinkerbell.WorkflowState // its state as the current action; "": no action is current
		clusters []cluster                // nil: the fakes and the apiserver
	}{
		{"no action", "", nil},
		{"wipe-disk PENDING", tinkerbell.WorkflowStatePending, []cluster{fakes}},
		{"wipe-disk RUNNING", tinkerbell.WorkflowStateRunning, []cluster{fakes}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onClusters(t, func(t *testing.T, c cluster) {
				h, run, started := c.startWorker(t, nil)
				const timeout = 6 * time.Second
				h.setStatus(run, func(s *tinkerbell.WorkflowStatus) {
					s.State = tinkerbell.WorkflowStatePending
					s.GlobalTimeout = int64(timeout / time.Second)
					s.Tasks = actions(nil)
					if tc.wipeDisk != "" {
						s.State = tc.wipeDisk
						s.CurrentState = &tinkerbell.CurrentState{ActionName: "wipe-disk", State: tc.wipeDisk}
						s.Tasks = actions(map[string]tinkerbell.WorkflowState{"wipe-disk": tc.wipeDisk})
					}
				})
				// Passes at once, before the timeout and past it. Each is judged
				// by the clock around it, so that a loaded machine that oversleeps
				// makes a pass come later, not a check fail.
				deadline := h.workflowCreated(run).Add(timeout)
				deleted := false
				for _, at := range []time.Time{time.Now(), deadline.Add(-2 * time.Second), deadline.Add(time.Second)} {
					time.Sleep(time.Until(at))
					began := time.Now()
					pass := h.reconcile()
					switch {
					case deleted && len(pass.Deleted) != 0:
						t.Fatalf("deleted %v again", pass.Deleted)
					case len(pass.Deleted) != 0 && time.Now().Before(deadline):
						t.Fatalf("deleted %v before the global timeout", pass.Deleted)
					case len(pass.Deleted) != 0 && !slices.Equal(pass.Deleted, []string{run}):
						t.Fatalf("deleted %v", pass.Deleted)
					case !deleted && len(pass.Deleted) == 0 && !began.Before(deadline):
						t.Fatalf("a pass begun %v past the global timeout deleted nothing", began.Sub(deadline))
					}
					deleted = deleted || len(pass.Deleted) != 0
				}
				_, err := h.tinkAPI.Resource(WorkflowResource).Namespace(h.ns).Get(context.Background(), run, metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					t.Errorf("Get of the deleted Workflow: %v, want NotFound", err)
				}
				h.reconcile()
				h.wantJournal(1, started, journalLine{1, inventory.JournalWarning,
					"Workflow " + run + " never reported its first action within its global timeout (6s); fleetd deleted it, no later boot resumes it, and the disk may be partly wiped or still hold the old install: set desired_action to provision"})
				h.wantKept(run, false)
				if c.name == fakes.name { // in a bubble, deleted by the pass a second past the timeout
					h.wantRunEvents(runEvent{kind: RunProvision, outcome: "started"}, runEvent{RunProvision, "never-reported", timeout + time.Second})
				}
			}, tc.clusters...)
		})
	}
}

// A run whose first action reported its end, past its stop. "The node is
// active, and the journal says its Workflow passed its global timeout
// while install, next-boot or reboot was current": noted, nothing else
// done. A RUNNING run past its stop on a node that is not active yet is
// left to Tinkerbell, which ends it TIMEOUT: fleetd annotates it once past
// its stop (not before), so that tink-controller reconciles it, and
// journals nothing until it ended. Such a run is never deleted for the
// global timeout: Tinkerbell set its stop. A run which Tinkerbell set no
// globalExecutionStop (the agent fetched the next action before
// tink-controller saw the first one's end) is never timed out by
// Tinkerbell: fleetd ends it at the stop the controller would have set,
// the first action's start plus the global timeout, with the runbook's
// "ended TIMEOUT" line (or, on an active node, its "passed its global
// timeout" line). A pass comes before the stop (after before), then past
// it (after another after); a run Tinkerbell ended TIMEOUT ends at the
// first.
func TestWatchPastGlobalTimeout(t *testing.T) {
	stop := metav1.NewTime(t0.Add(time.Hour))
	ranTo := func(state tinkerbell.WorkflowState, action string) func(*tinkerbell.WorkflowStatus) {
		return func(s *tinkerbell.WorkflowStatus) {
			s.State = state
			s.GlobalExecutionStop = &stop
			s.CurrentState = &tinkerbell.CurrentState{ActionName: action, State: tinkerbell.WorkflowStateRunning}
			s.Tasks = actions(map[string]tinkerbell.WorkflowState{"wipe-disk": "SUCCESS", "install": "SUCCESS", action: "RUNNING"})
		}
	}
	noStop := func(s *tinkerbell.WorkflowStatus) {
		start := metav1.NewTime(t0.Add(time.Minute))
		atInstall(s)
		s.GlobalTimeout = 3600
		s.Tasks[0].Actions[0].ExecutionStart = &start
	}
	passed := func(action string) *journalLine {
		return &journalLine{1, inventory.JournalInfo, "Workflow provision-node-01-946684800 passed its global timeout while " + action + " was current; the node is active, so it has its config, and nothing else is done"}
	}
	for _, tc := range []struct {
		name          string
		status        func(*tinkerbell.WorkflowStatus)
		active        bool
		before, after time.Duration
		line          *journalLine // nil: the run has not ended
	}{
		{"TIMEOUT at install, active", ranTo(tinkerbell.WorkflowStateTimeout, "install"), true, 0, 2 * time.Hour, passed("install")},
		{"RUNNING at next-boot past its stop, active", ranTo(tinkerbell.WorkflowStateRunning, "next-boot"), true, 0, 2 * time.Hour, passed("next-boot")},
		{"TIMEOUT at reboot, active", ranTo(tinkerbell.WorkflowStateTimeout, "reboot"), true, 0, 2 * time.Hour, passed("reboot")},
		{"RUNNING at install past its stop, not active", func(s *tinkerbell.WorkflowStatus) {
			atInstall(s)
			s.GlobalTimeout = 3600
			s.GlobalExecutionStop = &stop
		}, false, 0, 2 * time.Hour, nil},
		{"no stop set", noStop, false, 60 * time.Minute, 2 * time.Minute, &journalLine{1, inventory.JournalWarning,
			"Workflow provision-node-01-946684800 ended TIMEOUT at action install; read its output with journalctl -t hookos HOOKOS_HOST=10.0.0.21"}},
		{"no stop set, active", noStop, true, 60 * time.Minute, 2 * time.Minute, passed("install")},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			h, _, _ := fakes.startWorker(t, nil)
			h.setStatus(run1, tc.status)
			status := inventory.StatusPlanned
			if tc.active {
				status = inventory.StatusActive
				h.nb.set(1, func(d *inventory.Device) { d.Status = status })
			}
			// The run's end, by pass; the annotation past its stop.
			ends, annotated := [2][]string{nil, {run1}}, ""
			switch {
			case tc.line == nil:
				ends[1], annotated = nil, t0.Add(tc.before+tc.after).Format(time.RFC3339)
			case h.workflow(run1).Status.State == tinkerbell.WorkflowStateTimeout:
				ends = [2][]string{{run1}, nil}
			}
			for i, wait := range []time.Duration{tc.before, tc.after} {
				time.Sleep(wait)
				if pass := h.reconcile(); !slices.Equal(pass.Ended, ends[i]) || len(pass.Deleted) != 0 {
					t.Fatalf("pass %d = %+v, want ended %v, nothing deleted", i, pass, ends[i])
				}
				if a := h.workflow(run1).Annotations[annPastStop]; i == 0 && a != "" {
					t.Errorf("annotated %q before its stop", a)
				}
			}
			time.Sleep(time.Minute)
			h.reconcile()
			if a := h.workflow(run1).Annotations[annPastStop]; a != annotated {
				t.Errorf("annotation %s = %q, want %q: the time of the first pass past its stop, if the run has not ended", annPastStop, a, annotated)
			}
			lines := []journalLine{started1}
			if tc.line != nil {
				lines = append(lines, *tc.line)
			}
			h.wantJournal(1, lines...)
			if n := h.count(WorkflowResource); n != 1 {
				t.Errorf("%d Workflows, want it kept", n)
			}
			h.wantKept(run1, true)
			if got := h.nb.dev(1); got.Status != status || got.DesiredAction != "" {
				t.Errorf("device changed: %+v", got)
			}
		})
	}
}

// "FleetNodeBootedHookOSAfterInstall fires, and the journal says the node
// booted HookOS and attested after Workflow": once per run.
func TestBootedHookOSAfterSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, _ := fakes.startWorker(t, nil)
		h.setStatus(run1, func(s *tinkerbell.WorkflowStatus) { s.State = tinkerbell.WorkflowStateSuccess })
		h.reconcile()
		dev := h.nb.dev(1)
		for range 3 {
			d := h.admit(claimOf(dev))
			if d.Outcome != NoProvision || d.Code != "" {
				t.Errorf("Admit = %+v", d)
			}
		}
		h.wantJournal(1, started1,
			journalLine{1, inventory.JournalSuccess, "Workflow provision-node-01-946684800 ended SUCCESS"},
			journalLine{1, inventory.JournalWarning, "the node booted HookOS and attested after Workflow provision-node-01-946684800 succeeded: fix its boot order so the disk comes before PXE, then set desired_action to provision"})
		if !slices.Equal(h.booted, []string{"node-01"}) {
			t.Errorf("metric hook called for %v, want once for node-01", h.booted)
		}
		// After a restart it is still once per run.
		h.restart()
		h.admit(claimOf(dev))
		if len(h.booted) != 1 {
			t.Errorf("metric hook called %d times after a restart", len(h.booted))
		}
	})
}

// bmcUnreachable is the message of a Task whose BMC did not answer, as
// Rufio writes it: bmclib's errors one per line.
const bmcUnreachable = "Failed to connect to BMC: failed to open connection to BMC: 1 error occurred:\n\t* dial tcp 10.0.0.21:16992: connect: no route to host\n\n"

// rufioJobFails starts node-01's run from desired_action on c and has its
// Rufio job fail, each object written through its status subresource as
// Rufio does: at the BMC (own ""), the Job naming the Task that failed and
// the Task saying why (bmcUnreachable); or on Rufio's side, with the
// message own and no Task failed. It checks the run's lines: its start,
// and the warning that tells which.
func rufioJobFails(t *testing.T, c cluster, own string) (*harness, inventory.Device, string) {
	t.Helper()
	h, dev, run := c.waitingRun(t)
	on := bmc.PowerOn
	job := bmc.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "netboot-" + run, Namespace: h.ns},
		Spec:       bmc.JobSpec{MachineRef: bmc.MachineRef{Name: "node-01", Namespace: h.ns}, Tasks: []bmc.Action{{PowerAction: &on}}},
	}
	task := bmc.Task{ObjectMeta: metav1.ObjectMeta{Name: bmc.FormatTaskName(job, 0), Namespace: h.ns},
		Spec: bmc.TaskSpec{Task: job.Spec.Tasks[0], Connection: bmc.Connection{Host: "10.0.0.21", Port: 16992,
			AuthSecretRef: corev1.SecretReference{Name: "amt-node-01", Namespace: h.ns}}}}
	jobMsg, line := own, "on Rufio's side, no BMC task failed: "+own+"; fleetd starts a new run 1m0s after this one started"
	var failed func()
	if own == "" {
		jobMsg = "task " + h.ns + "/" + task.Name + " failed"
		line = "to power the machine: Failed to connect to BMC: failed to open connection to BMC: 1 error occurred: * dial tcp 10.0.0.21:16992: connect: no route to host; set AMT's address to 10.0.0.21, or power the machine on by hand"
		failed = func() {
			task.Status.Conditions = []bmc.TaskCondition{{Type: bmc.TaskFailed, Status: bmc.ConditionTrue, Message: bmcUnreachable}}
		}
	}
	h.create(JobResource, bmc.GroupVersion.WithKind("Job"), &job, func() {
		job.Status.Conditions = []bmc.JobCondition{{Type: bmc.JobFailed, Status: bmc.ConditionTrue, Message: jobMsg}}
	})
	h.create(TaskResource, bmc.GroupVersion.WithKind("Task"), &task, failed)
	h.setStatus(run, bootJobFailed)
	if pass := h.reconcile(); !slices.Equal(pass.Ended, []string{run}) || len(pass.Started) != 0 {
		t.Errorf("pass right after the Rufio job failed = %+v", pass)
	}
	h.reconcile()
	h.wantDesired(1)
	h.wantJournal(1,
		journalLine{1, inventory.JournalInfo, "started Workflow " + run + "; Rufio power-cycles the machine so that its next attestation from HookOS receives the install code"},
		journalLine{1, inventory.JournalWarning, "the Rufio job netboot-" + run + " of Workflow " + run + " failed " + line})
	return h, dev, run
}

// "The Workflow's Rufio job fails to power the machine": journaled with
// the job's message and the address AMT must answer at; desired_action is
// set again so that a machine powered on by hand gets a run.
func TestRufioJobFailsPowerOnByHand(t *testing.T) {
	onClusters(t, func(t *testing.T, c cluster) {
		h, dev, run := rufioJobFails(t, c, "")
		sleepPast(run)
		d := h.admitStarts(dev)
		if d.Run == run || d.Code != "SECRETCODE0002" {
			t.Fatalf("Admit = %+v; want a new run with the second code", d)
		}
		h.wantLastRun(1, d.Run)
	})
}

// The loop power-cycles the machine again only after PowerRetry, and the
// wait survives a restart: it is read from the cluster. A Rufio job that
// failed on Rufio's side, no Task of it failed (Rufio v0.25.0's Job
// controller creating a Task twice), is not the BMC's doing: the line says
// so rather than sending the operator to AMT's address, and the loop
// starts a new run a minute after the run started, not after PowerRetry.
// A Rufio job that failed to power the machine ends the run's watch as
// boot-job-failed (rufio-job-failed when Rufio failed on its own); the run
// the loop started is reported started.
func TestRufioJobFailsRetry(t *testing.T) {
	own := "failed to create Task tinkerbell/netboot-" + run1 + "-task-0: tasks.bmc.tinkerbell.org \"netboot-" + run1 + "-task-0\" already exists"
	for _, tc := range []struct {
		name          string
		own           string        // Rufio's own failure; "": the BMC refused
		ended         string        // the run's outcome
		before, after time.Duration // the passes before the retry and at it, from the one before
		run           string        // the retry
	}{
		{"the BMC refused", "", "boot-job-failed", 29 * time.Minute, 2 * time.Minute, "provision-node-01-946686660"},
		{"Rufio's own failure", own, "rufio-job-failed", 0, time.Minute, "provision-node-01-946684860"},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			h, _, _ := rufioJobFails(t, fakes, tc.own)
			time.Sleep(tc.before)
			if pass := h.reconcile(); len(pass.Started) != 0 {
				t.Errorf("started %v before the retry", pass.Started)
			}
			h.restart()
			time.Sleep(tc.after)
			if pass := h.reconcile(); !slices.Equal(pass.Started, []string{tc.run}) {
				t.Fatalf("started %v at the retry, want %s", pass.Started, tc.run)
			}
			// The new run's Rufio job fails too, a minute after it started.
			h.setStatus(tc.run, bootJobFailed)
			time.Sleep(time.Minute)
			h.reconcile()
			h.reconcile()
			started := runEvent{kind: RunProvision, outcome: "started"}
			h.wantRunEvents(started, runEvent{RunProvision, tc.ended, 0}, started, runEvent{RunProvision, "boot-job-failed", time.Minute})
		})
	}
}

// Retirement starts on its own for a decommissioning device with a BMC:
// its Workflow boots the machine through Rufio (boot mode netboot), with
// no bootstrap token and no config, and the machine's attestation gets
// its code. "A retirement that ended this way is a danger line", and the
// device stays decommissioning; one that ends SUCCESS is a success line.
func TestRetirementEnds(t *testing.T) {
	for _, state := range []tinkerbell.WorkflowState{tinkerbell.WorkflowStateFailed, tinkerbell.WorkflowStateTimeout, tinkerbell.WorkflowStateSuccess} {
		t.Run(string(state), func(t *testing.T) {
			onClusters(t, func(t *testing.T, c cluster) {
				dev := attested(worker(1, "node-01"))
				dev.Status = inventory.StatusDecommissioning
				dev.LastRun = "provision-node-01-1767000000"
				h := c.harness(t, nil, dev)
				run := h.passStarts("retire-node-01-")
				wf := h.workflow(run)
				if wf.Spec.TemplateRef != "fleet-retire" || wf.Spec.BootOptions.BootMode != tinkerbell.BootModeNetboot || wf.Labels[LabelRunKind] != string(RunRetire) ||
					wf.Spec.HardwareMap[ValueInstallDiskSerial] != "DISK-node-01" || wf.Spec.HardwareMap[ValueInstallCodeSHA256] != sha256Code1 {
					t.Errorf("Workflow spec %+v, labels %v", wf.Spec, wf.Labels)
				}
				if n := len(h.secrets()); n != 0 {
					t.Errorf("%d bootstrap tokens for a retirement, want none", n)
				}
				if n := h.configs.count(); n != 0 {
					t.Errorf("a retirement held %d configs", n)
				}
				if d, err := h.p.Admit(context.Background(), claimOf(dev)); err != nil || d.Outcome != Retire || d.Run != run || d.Code != "SECRETCODE0001" {
					t.Errorf("Admit = %+v, %v", d, err)
				}
				if pass := h.reconcile(); len(pass.Started) != 0 {
					t.Errorf("second pass started %v", pass.Started)
				}
				h.setStatus(run, func(s *tinkerbell.WorkflowStatus) {
					s.State = state
					s.Tasks = []tinkerbell.Task{{Name: "retire", Actions: []tinkerbell.Action{{Name: "wipe-disk", State: state}}}}
				})
				h.reconcile()
				h.reconcile()
				ended := journalLine{1, inventory.JournalSuccess, "Workflow " + run + " ended SUCCESS: the install disk is wiped"}
				if state != tinkerbell.WorkflowStateSuccess {
					ended = journalLine{1, inventory.JournalDanger, "Workflow " + run + " ended " + string(state) + " at action wipe-disk; read its output with journalctl -t hookos HOOKOS_HOST=10.0.0.21; the disk may not be wiped, so the node may still hold its data and its identity, and the device stays decommissioning"}
				}
				h.wantJournal(1,
					journalLine{1, inventory.JournalInfo, "started Workflow " + run + "; Rufio power-cycles the machine so that its next attestation from HookOS receives the install code, and the run wipes its install disk"},
					ended)
				if state == tinkerbell.WorkflowStateSuccess {
					return
				}
				if got := h.nb.dev(1); got.Status != inventory.StatusDecommissioning {
					t.Errorf("status = %s, want decommissioning", got.Status)
				}
				// No new retirement starts by itself; desired_action=provision asks for one.
				if pass := h.reconcile(); len(pass.Started) != 0 {
					t.Errorf("started %v", pass.Started)
				}
				sleepPast(run)
				h.nb.set(1, func(d *inventory.Device) { d.DesiredAction = inventory.DesiredActionProvision })
				h.passStarts("retire-node-01-")
			})
		})
	}
}

// A fleetd restart mid-run: a new Provisioner over the same cluster picks
// the runs up from it, journals an end once, and deletes a run that never
// reported on time: past the 2 h default on the fakes, past 3 s on the
// apiserver.
func TestRestartResumesWatching(t *testing.T) {
	onClusters(t, func(t *testing.T, c cluster) {
		devA, devB := worker(1, "node-01"), worker(2, "node-02")
		timeout, edit := 2*time.Hour, func(*Cluster, *Config) {}
		if c.apiserver() {
			// node-02's run must outlive the admissions and the first pass
			// (seconds on a loaded machine), then time out.
			timeout, edit = 10*time.Second, func(_ *Cluster, cfg *Config) { cfg.GlobalTimeout = 10 * time.Second }
		}
		h := c.harness(t, edit, devA, devB)
		run1, run2 := h.admitStarts(devA).Run, h.admitStarts(devB).Run
		h.setStatus(run1, atInstall)
		h.reconcile()

		h.restart() // nothing in memory survives
		h.setStatus(run1, endedAt(tinkerbell.WorkflowStateFailed, "install"))
		time.Sleep(time.Until(h.workflowCreated(run2).Add(timeout + time.Second))) // node-02's run never reported
		pass := h.reconcile()
		if !slices.Equal(pass.Ended, []string{run1}) || !slices.Equal(pass.Deleted, []string{run2}) {
			t.Errorf("pass after restart = %+v", pass)
		}
		h.restart()
		if pass := h.reconcile(); pass.Runs != 1 || len(pass.Ended)+len(pass.Deleted)+len(pass.Started) != 0 {
			t.Errorf("pass after a second restart = %+v", pass)
		}
		h.wantJournal(1, journalLine{1, inventory.JournalInfo, "started Workflow " + run1 + "; the machine attested from HookOS at 10.0.0.21"},
			journalLine{1, inventory.JournalWarning, "Workflow " + run1 + " ended FAILED at action install; read its output with journalctl -t hookos HOOKOS_HOST=10.0.0.21"})
		if n := len(h.nb.lines()); n != 4 {
			t.Errorf("%d journal lines, want 4: %+v", n, h.nb.lines())
		}
	})
}

// A new run from desired_action replaces a run of the device that has not
// ended, a minute later or in the second it started (the machine
// admitted, then desired_action set at once): a replaced run does not
// lend its name to its successor, which takes the next second, and the
// old run's config and token go, not the new one's.
func TestNewRunReplacesStalledRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bmc   string
		after time.Duration // from the old run's start
		run   string        // the new run
	}{
		{"a minute later", "none", time.Minute, "provision-node-01-946684860"},
		{"in its second", "amt", 0, "provision-node-01-946684801"},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			h, _, _ := fakes.startWorker(t, func(d *inventory.Device) { d.BMC = tc.bmc })
			h.nb.set(1, func(d *inventory.Device) { d.DesiredAction = inventory.DesiredActionProvision })
			time.Sleep(tc.after)
			d, err := h.p.Admit(context.Background(), claimOf(h.nb.dev(1)))
			if err != nil || d.Run != tc.run {
				t.Fatalf("Admit %v after run %s started = %+v, %v; want run %s", tc.after, run1, d, err, tc.run)
			}
			if names := h.runNames(); !slices.Equal(names, []string{d.Run}) {
				t.Errorf("Workflows = %v, want only the new run", names)
			}
			h.wantKept(run1, false) // replaced: nothing to fetch or join with
			h.wantKept(d.Run, true)
		})
	}
}

// The loop backs off while NetBox does not answer, and returns to its
// interval once it does.
func TestRunBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil, worker(1, "node-01"))
		h.mem.down = true
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- h.p.Run(ctx) }()
		calls := h.mem.callCount
		var at []time.Duration
		start := time.Now()
		last := 0
		for range 6 {
			time.Sleep(time.Second)
			synctest.Wait()
			for calls() == last {
				time.Sleep(time.Second)
				synctest.Wait()
			}
			last = calls()
			at = append(at, time.Since(start).Truncate(time.Second))
		}
		// Passes at 0, then 30 s, 60 s, 120 s, 240 s, 300 s apart.
		want := []time.Duration{time.Second, 30 * time.Second, 90 * time.Second, 210 * time.Second, 450 * time.Second, 750 * time.Second}
		if !slices.Equal(at, want) {
			t.Errorf("passes at %v, want %v", at, want)
		}
		h.mem.mu.Lock()
		h.mem.down = false
		h.mem.mu.Unlock()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		n := calls()
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if calls() != n+1 {
			t.Errorf("after recovery: %d passes in one interval, want 1", calls()-n)
		}
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run = %v", err)
		}
	})
}

// A run from desired_action, without a fresh claim, that the loop cannot
// start waits, its line journaled once and desired_action kept, with
// nothing created: "the journal says recorded no attested switch port"
// (and a recorded port that differs), refused before anything is
// rendered; no port check for such runs; no BMC to power the machine
// (with a last run that desired_action repeats); or the device lacks
// fields (before any attestation: its MAC too). A fresh claim then starts
// the run; one without the fields does not, and is not tried.
func TestLoopRunWaits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dev      func(*inventory.Device)
		edit     func(*Cluster, *Config)
		line     journalLine
		admit    bool // a fresh claim starts the run
		machines int  // Rufio Machines after it
	}{
		{"recorded no port", func(d *inventory.Device) { d.AttestedSwitchPort = 0 }, nil,
			journalLine{1, inventory.JournalWarning, "refused a run before rendering anything: recorded no attested switch port"}, true, 1},
		{"recorded another port", func(d *inventory.Device) { d.AttestedSwitchPort = 7 }, nil,
			journalLine{1, inventory.JournalWarning, "refused a run before rendering anything: on port 7, expected 1"}, true, 1},
		{"no port check", nil, func(_ *Cluster, c *Config) { c.PortCheck = nil }, journalLine{1, inventory.JournalInfo,
			"node-01 waits for an attestation from HookOS: fleetd has no switch-port check for a run without a fresh claim; power-cycle the machine"}, true, 1},
		{"no BMC, desired_action repeats the last run", func(d *inventory.Device) {
			d.BMC, d.LastRun = "none", "provision-node-01-1767000000"
		}, func(_ *Cluster, c *Config) { c.AutoProvision = false }, journalLine{1, inventory.JournalInfo,
			"node-01 has no BMC: the run waits for the machine to attest from HookOS; power-cycle it by hand"}, true, 0},
		{"lacks every field", func(d *inventory.Device) {
			*d = worker(1, "node-01")
			d.InstallDisk, d.InstallDiskSerial, d.DesiredAction = "", "", inventory.DesiredActionProvision
		}, nil, journalLine{1, inventory.JournalWarning,
			"node-01 lacks MAC, install_disk and install_disk_serial: the run waits for MAC, install_disk and install_disk_serial, and desired_action stays provision"}, false, 0},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			dev := attested(worker(1, "node-01"))
			dev.DesiredAction = inventory.DesiredActionProvision
			if tc.dev != nil {
				tc.dev(&dev)
			}
			h := newHarness(t, tc.edit, dev)
			h.reconcile()
			h.reconcile()
			h.wantJournal(1, tc.line)
			h.wantNothingCreated()
			h.wantDesired(1)
			if !tc.admit {
				return
			}
			h.wantLastRun(1, h.admitStarts(dev).Run)
			if n := h.count(MachineResource); n != tc.machines {
				t.Errorf("%d Rufio Machines, want %d", n, tc.machines)
			}
		})
	}
}

// failPatches makes the Tinkerbell cluster refuse every patch of a
// Workflow (the mark of a run's journaled end) while the flag it returns
// is set, as it is at first.
func failPatches(h *harness) *atomic.Bool {
	var fail atomic.Bool
	fail.Store(true)
	h.tink.PrependReactor("patch", "workflows", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail.Load() {
			return true, nil, errors.New("the server is currently unable to handle the request")
		}
		return false, nil, nil
	})
	return &fail
}

// A run's end is journaled, then its Workflow is annotated: when the
// annotation fails, the run is remembered as journaled, and its end is
// journaled and reported once: the next pass annotates it without
// journaling the end again (and, past the first clean pass, without
// asking NetBox), or, if it was deleted meanwhile, forgets it. (One whose
// end another process journaled is not reported again:
// TestEndJournaledOnceAfterTakeover.)
func TestEndJournaledOnceWhenTheMarkFails(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		inBubble(t, map[bool]string{false: "mark failed", true: "mark failed, run deleted"}[deleted], func(t *testing.T) {
			h, _, _ := fakes.startWorker(t, nil)
			h.reconcile() // clean: later passes do not ask NetBox
			h.setStatus(run1, endedAt(tinkerbell.WorkflowStateFailed, "wipe-disk"))
			failing := failPatches(h)
			if _, err := h.p.Reconcile(context.Background()); err == nil {
				t.Fatal("a pass whose annotation failed reported no error")
			}
			if !h.p.journaled[run1] {
				t.Fatalf("%s not remembered as journaled after its mark failed", run1)
			}
			if !deleted {
				failing.Store(false)
			} else if err := h.tinkAPI.Resource(WorkflowResource).Namespace(h.ns).Delete(context.Background(), run1, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			pass := h.reconcile()
			h.reconcile()
			if n := len(h.p.journaled); n != 0 {
				t.Errorf("%d runs left remembered as journaled once marked", n)
			}
			if !deleted && !slices.Equal(pass.Ended, []string{run1}) {
				t.Errorf("the pass after the failed annotation ended %v, want %s", pass.Ended, run1)
			}
			if h.mem.journalReads != 0 {
				t.Errorf("NetBox's journal read %d times after a clean pass", h.mem.journalReads)
			}
			h.wantJournal(1, started1, journalLine{1, inventory.JournalWarning,
				"Workflow " + run1 + " ended FAILED at action wipe-disk; read its output with journalctl -t hookos HOOKOS_HOST=10.0.0.21"})
			h.wantRunEvents(runEvent{kind: RunProvision, outcome: "started"}, runEvent{RunProvision, "failed", 0})
		})
	}
}

// A process that journaled a run's end and was stopped (or lost its
// leadership) before it annotated the Workflow: the next Provisioner's
// first pass finds the line in NetBox's journal and only annotates the
// Workflow, and does not report the run's end again; a line not in the
// journal it writes.
func TestEndJournaledOnceAfterTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil, worker(1, "node-01"), worker(2, "node-02"))
		for _, id := range []int64{1, 2} {
			h.admit(claimOf(h.nb.dev(id)))
		}
		run2 := "provision-node-02-946684800"
		for _, r := range []string{run1, run2} {
			h.setStatus(r, succeeded)
		}
		// The previous leader journaled run1's end and died.
		ended1 := journalLine{1, inventory.JournalSuccess, "Workflow " + run1 + " ended SUCCESS"}
		if err := h.mem.Journal(context.Background(), 1, ended1.Kind, ended1.Text); err != nil {
			t.Fatal(err)
		}
		h.restart()
		pass := h.reconcile()
		slices.Sort(pass.Ended)
		if !slices.Equal(pass.Ended, []string{run1, run2}) {
			t.Errorf("ended %v, want both runs", pass.Ended)
		}
		h.reconcile()
		h.wantJournal(1, started1, ended1)
		started := runEvent{kind: RunProvision, outcome: "started"}
		h.wantRunEvents(started, started, runEvent{RunProvision, "success", 0})
		h.wantJournal(2, journalLine{2, inventory.JournalInfo, "started Workflow " + run2 + "; the machine attested from HookOS at 10.0.0.22"},
			journalLine{2, inventory.JournalSuccess, "Workflow " + run2 + " ended SUCCESS"})
		for _, wf := range h.workflows() {
			if wf.Annotations[annReported] == "" {
				t.Errorf("%s is not marked reported", wf.Name)
			}
			h.wantKept(wf.Name, true) // the installed node fetches it next
		}
	})
}

// A desired_action fleetd does not act on (Provision, reprovision) is not
// a silent no-op: one warning line per value names the value fleetd acts
// on, and no run starts; a decommissioning device still gets its
// retirement.
func TestLoopUnknownDesiredAction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dev := attested(worker(1, "node-01"))
		dev.DesiredAction = "Provision"
		old := attested(worker(2, "node-02"))
		old.Status, old.DesiredAction = inventory.StatusDecommissioning, "retire"
		h := newHarness(t, nil, dev, old)
		retire := h.passStarts("retire-node-02-") // node-02's retirement alone
		h.reconcile()
		line := func(id int64, v string) journalLine {
			return journalLine{id, inventory.JournalWarning, `desired_action is "` + v + `", which fleetd does not act on: set it to provision to start a run, or clear it`}
		}
		h.wantJournal(1, line(1, "Provision"))
		h.wantJournal(2, line(2, "retire"), journalLine{2, inventory.JournalInfo, "started Workflow " + retire +
			"; Rufio power-cycles the machine so that its next attestation from HookOS receives the install code, and the run wipes its install disk"})
		h.nb.set(1, func(d *inventory.Device) { d.DesiredAction = "reprovision" })
		h.reconcile()
		h.reconcile()
		h.wantJournal(1, line(1, "Provision"), line(1, "reprovision"))
	})
}
