package provision

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// Each run is reported started once, and its end once, with the outcome
// its journal line tells and how long it ran, however many passes see it.
func TestRunStartedAndEnded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  func(*tinkerbell.WorkflowStatus)
		outcome string
	}{
		{"success", succeeded, "success"},
		{"failed", endedAt(tinkerbell.WorkflowStateFailed, "wipe-disk"), "failed"},
		{"timeout", endedAt(tinkerbell.WorkflowStateTimeout, "wipe-disk"), "timeout"},
		{"never reported", func(s *tinkerbell.WorkflowStatus) {
			s.State = tinkerbell.WorkflowStatePending
			s.GlobalTimeout = 600
			s.Tasks = actions(nil)
		}, "never-reported"},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			h, _, _ := fakes.startWorker(t, nil)
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
