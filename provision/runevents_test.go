package provision

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// Each run is reported started once, and its end once, with the outcome
// its journal line tells and how long it ran, however many passes see it.
func TestRunStartedAndEnded(t *testing.T) {
	ended := func(state tinkerbell.WorkflowState, failedAt string) func(*tinkerbell.WorkflowStatus) {
		return func(s *tinkerbell.WorkflowStatus) {
			s.State = state
			s.Tasks = actions(map[string]tinkerbell.WorkflowState{failedAt: state})
		}
	}
	for _, tc := range []struct {
		name    string
		status  func(*tinkerbell.WorkflowStatus)
		outcome string
	}{
		{"success", succeeded, "success"},
		{"failed", ended(tinkerbell.WorkflowStateFailed, "wipe-disk"), "failed"},
		{"timeout", ended(tinkerbell.WorkflowStateTimeout, "wipe-disk"), "timeout"},
		{"never reported", func(s *tinkerbell.WorkflowStatus) {
			s.State = tinkerbell.WorkflowStatePending
			s.GlobalTimeout = 600
			s.Tasks = actions(nil)
		}, "never-reported"},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			h := startWorker(t, nil)
			time.Sleep(20 * time.Minute)
			h.setStatus(run1, tc.status)
			h.reconcile()
			h.reconcile()
			h.wantRunEvents(runEvent{kind: RunProvision, outcome: "started"}, runEvent{RunProvision, tc.outcome, 20 * time.Minute})
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

// A run whose end was journaled and whose mark failed is remembered as
// journaled, and reported once: the next pass marks it, or, if it was
// deleted meanwhile, forgets it. (One whose end another process journaled
// is not reported again: TestEndJournaledOnceAfterTakeover.)
func TestRunEndedOnce(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		inBubble(t, map[bool]string{false: "mark failed", true: "mark failed, run deleted"}[deleted], func(t *testing.T) {
			h := startWorker(t, nil)
			h.setStatus(run1, succeeded)
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
			h.reconcile()
			if n := len(h.p.journaled); n != 0 {
				t.Errorf("%d runs still remembered as journaled", n)
			}
			h.wantRunEvents(runEvent{kind: RunProvision, outcome: "started"}, runEvent{RunProvision, "success", 0})
		})
	}
}

// A Rufio job that failed to power the machine ends the run's watch as
// boot-job-failed; the run the loop started is reported started.
func TestRunEndedBootJobFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, _ := rufioFails(t, fakes)
		h.restart()
		// After PowerRetry, a new run from the loop, and its own failure.
		time.Sleep(31 * time.Minute)
		pass := h.reconcile()
		if len(pass.Started) != 1 {
			t.Fatalf("started %v after PowerRetry", pass.Started)
		}
		h.setStatus(pass.Started[0], func(s *tinkerbell.WorkflowStatus) {
			s.State = tinkerbell.WorkflowStatePreparing
			s.Conditions = []tinkerbell.WorkflowCondition{{Type: tinkerbell.BootJobFailed, Status: "True", Message: "job failed"}}
		})
		time.Sleep(time.Minute)
		h.reconcile()
		h.reconcile()
		started := runEvent{kind: RunProvision, outcome: "started"}
		h.wantRunEvents(started, runEvent{RunProvision, "boot-job-failed", 0}, started, runEvent{RunProvision, "boot-job-failed", time.Minute})
	})
}
