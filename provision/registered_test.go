package provision

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetkit/fleet/inventory"
)

// A node that has its config while NetBox still shows it planned (the
// fleetd that served it stopped before it took the device active) registers in the
// cluster: a minute after its run ended SUCCESS, the loop finds its Node,
// takes the device active and journals why. A Node older than the run (an
// earlier install) proves nothing; no Node, nothing is done.
func TestRegisteredNodeTakenActive(t *testing.T) {
	for _, tc := range []struct {
		name   string
		node   time.Duration // when the Node registered, after the run started; <0: before it; 0: none
		active bool
	}{
		{"registered after the run", 3 * time.Minute, true},
		{"an earlier install's Node", -time.Hour, false},
		{"no Node", 0, false},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			h, _, _ := fakes.startWorker(t, nil)
			time.Sleep(2 * time.Minute)
			h.setStatus(run1, succeeded)
			h.reconcile() // journals the end, and first sees it
			if tc.node != 0 {
				if _, err := h.kube.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{
					Name: "node-01", CreationTimestamp: metav1.NewTime(t0.Add(tc.node)),
				}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			h.reconcile()
			if got := h.nb.dev(1).Status; got != inventory.StatusPlanned {
				t.Fatalf("status %s before a minute passed, want planned", got)
			}
			time.Sleep(registeredAfter)
			h.reconcile()
			h.reconcile()
			want := []journalLine{started1, {1, inventory.JournalSuccess, "Workflow provision-node-01-946684800 ended SUCCESS"}}
			status := inventory.StatusPlanned
			if tc.active {
				status = inventory.StatusActive
				want = append(want, journalLine{1, inventory.JournalSuccess, fmt.Sprintf(registeredText, "node-01", run1)})
			}
			if got := h.nb.dev(1).Status; got != status {
				t.Errorf("status %s, want %s", got, status)
			}
			h.wantJournal(1, want...)
		})
	}
}
