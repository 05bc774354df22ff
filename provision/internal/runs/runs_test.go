package runs

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzFrom feeds Workflow objects as the cluster may hold them (any
// JSON) to the code that reads runs: it must return an error or a run whose
// every accessor works, never panic.
func FuzzFrom(f *testing.F) {
	f.Add(`{"apiVersion":"tinkerbell.org/v1alpha1","kind":"Workflow","metadata":{"name":"provision-node-01-1767225600","labels":{"fleet.fleetkit.dev/device-id":"1","fleet.fleetkit.dev/run":"provision"},"annotations":{"fleet.fleetkit.dev/created":"2026-01-01T00:00:00Z"}},"spec":{"hardwareMap":{"install_code_sha256":"2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"}},"status":{"state":"FAILED","globalTimeout":3600,"currentState":{"actionName":"install"},"tasks":[{"name":"t","actions":[{"name":"wipe-disk","state":"SUCCESS"},{"name":"install","state":"FAILED"}]}],"conditions":[{"type":"BootJobFailed","status":"True","message":"no route"}]}}`)
	f.Add(`{"metadata":{"name":"w","labels":{"fleet.fleetkit.dev/device-id":"x"}}}`)
	f.Add(`{"metadata":{"name":"w","labels":{"fleet.fleetkit.dev/device-id":"2"}},"status":{"tasks":[{"actions":null}],"globalExecutionStop":"2026-01-01T00:00:00Z"}}`)
	f.Add(`{"status":"nope"}`)
	f.Fuzz(func(t *testing.T, s string) {
		var obj map[string]any
		if json.Unmarshal([]byte(s), &obj) != nil || obj == nil {
			return
		}
		for _, full := range []bool{false, true} {
			r, err := From(&unstructured.Unstructured{Object: obj}, full)
			if err != nil {
				continue
			}
			_ = r.Name()
			_ = r.HookOS()
			_ = r.Terminal()
			_ = r.Started()
			_ = r.CurrentAction()
			_ = r.CodeSHA256()
			_ = r.Created()
			_, _ = r.BootJobFailure()
			if d := r.GlobalTimeout(time.Hour); d <= 0 {
				t.Errorf("global timeout %v of status.globalTimeout %d is not positive", d, r.WF.Status.GlobalTimeout)
			}
		}
	})
}

// A run has started once an action reported its end, or Tinkerbell set
// its stop: fetched (currentState) or RUNNING is not yet.
func TestStarted(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	act := func(name string, st tinkerbell.WorkflowState) tinkerbell.Action {
		return tinkerbell.Action{Name: name, State: st}
	}
	for _, tc := range []struct {
		name string
		st   tinkerbell.WorkflowStatus
		want bool
	}{
		{"rendered", tinkerbell.WorkflowStatus{State: "PENDING", Tasks: []tinkerbell.Task{{Actions: []tinkerbell.Action{act("wipe-disk", "PENDING")}}}}, false},
		{"fetched", tinkerbell.WorkflowStatus{State: "PENDING", CurrentState: &tinkerbell.CurrentState{ActionName: "wipe-disk", State: "PENDING"},
			Tasks: []tinkerbell.Task{{Actions: []tinkerbell.Action{act("wipe-disk", "PENDING")}}}}, false},
		{"running", tinkerbell.WorkflowStatus{State: "RUNNING", CurrentState: &tinkerbell.CurrentState{ActionName: "wipe-disk", State: "RUNNING"},
			Tasks: []tinkerbell.Task{{Actions: []tinkerbell.Action{act("wipe-disk", "RUNNING"), act("install", "PENDING")}}}}, false},
		{"first ended", tinkerbell.WorkflowStatus{State: "RUNNING", Tasks: []tinkerbell.Task{{Actions: []tinkerbell.Action{act("wipe-disk", "SUCCESS"), act("install", "PENDING")}}}}, true},
		{"first failed", tinkerbell.WorkflowStatus{State: "FAILED", Tasks: []tinkerbell.Task{{Actions: []tinkerbell.Action{act("wipe-disk", "FAILED")}}}}, true},
		{"stop set", tinkerbell.WorkflowStatus{State: "RUNNING", GlobalExecutionStop: &at}, true},
	} {
		r := &Run{WF: tinkerbell.Workflow{Status: tc.st}}
		if got := r.Started(); got != tc.want {
			t.Errorf("%s: Started() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
