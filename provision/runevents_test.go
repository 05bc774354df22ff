package provision

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fleetkit/fleet/inventory"
)

// runEvent is one call of Config.RunStarted ("started") or
// Config.RunEnded.
type runEvent struct {
	kind    RunKind
	outcome string
	took    time.Duration
}

// runEvents starts node-01's run through its attestation, with RunStarted
// and RunEnded recorded in events.
func runEvents(t *testing.T) (*harness, *[]runEvent) {
	t.Helper()
	var events []runEvent
	h := newHarness(t, func(_ *Cluster, c *Config) {
		c.RunStarted = func(k RunKind) { events = append(events, runEvent{kind: k, outcome: "started"}) }
		c.RunEnded = func(k RunKind, outcome string, took time.Duration) {
			events = append(events, runEvent{k, outcome, took})
		}
	}, worker(1, "node-01"))
	if d, err := h.p.Admit(context.Background(), claimOf(h.nb.dev(1))); err != nil || d.Run != run1 {
		t.Fatalf("Admit = %+v, %v", d, err)
	}
	return h, &events
}

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
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, events := runEvents(t)
				time.Sleep(20 * time.Minute)
				h.setStatus(run1, tc.status)
				h.reconcile()
				h.reconcile()
				want := []runEvent{{kind: RunProvision, outcome: "started"}, {RunProvision, tc.outcome, 20 * time.Minute}}
				if !slices.Equal(*events, want) {
					t.Errorf("reported %+v, want %+v", *events, want)
				}
			})
		})
	}
}

// A run whose end was journaled and whose mark failed is reported once;
// one whose end another process journaled is not reported again.
func TestRunEndedOnce(t *testing.T) {
	t.Run("mark failed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, events := runEvents(t)
			h.setStatus(run1, succeeded)
			var fail atomic.Bool
			fail.Store(true)
			h.tink.PrependReactor("patch", "workflows", func(k8stesting.Action) (bool, runtime.Object, error) {
				if fail.Load() {
					return true, nil, errors.New("the server is currently unable to handle the request")
				}
				return false, nil, nil
			})
			if _, err := h.p.Reconcile(context.Background()); err == nil {
				t.Fatal("a pass whose annotation failed reported no error")
			}
			fail.Store(false)
			h.reconcile()
			want := []runEvent{{kind: RunProvision, outcome: "started"}, {RunProvision, "success", 0}}
			if !slices.Equal(*events, want) {
				t.Errorf("reported %+v, want %+v", *events, want)
			}
		})
	})
	t.Run("journaled by another process", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, events := runEvents(t)
			h.setStatus(run1, succeeded)
			if err := h.mem.Journal(context.Background(), 1, inventory.JournalSuccess, "Workflow "+run1+" ended SUCCESS"); err != nil {
				t.Fatal(err)
			}
			h.restart()
			if pass := h.reconcile(); !slices.Equal(pass.Ended, []string{run1}) {
				t.Fatalf("ended %v", pass.Ended)
			}
			want := []runEvent{{kind: RunProvision, outcome: "started"}}
			if !slices.Equal(*events, want) {
				t.Errorf("reported %+v, want %+v", *events, want)
			}
		})
	})
}

// A Rufio job that failed to power the machine ends the run's watch as
// boot-job-failed; the run the loop started is reported started.
func TestRunEndedBootJobFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []runEvent
		h, _, _ := rufioFails(t, fakes)
		h.cfg.RunStarted = func(k RunKind) { events = append(events, runEvent{kind: k, outcome: "started"}) }
		h.cfg.RunEnded = func(k RunKind, outcome string, took time.Duration) {
			events = append(events, runEvent{k, outcome, took})
		}
		h.restart()
		// rufioFails' passes journaled the failure before the hooks were
		// set: a new run from the loop, and its own failure.
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
		want := []runEvent{{kind: RunProvision, outcome: "started"}, {RunProvision, "boot-job-failed", time.Minute}}
		if !slices.Equal(events, want) {
			t.Errorf("reported %+v, want %+v", events, want)
		}
	})
}
