package machinetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/fleetkit/fleet/provision"
)

// Workflows returns the Workflows of the namespace.
func Workflows(ctx context.Context, t testing.TB, tink dynamic.Interface, ns string) []tinkerbell.Workflow {
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

// GetWorkflow reads Workflow name of ns.
func GetWorkflow(ctx context.Context, tink dynamic.Interface, ns, name string) (tinkerbell.Workflow, error) {
	var wf tinkerbell.Workflow
	u, err := tink.Resource(provision.WorkflowResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return wf, err
	}
	err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &wf)
	return wf, err
}

// Ended reports whether the Workflow reached an end: SUCCESS, FAILED or
// TIMEOUT.
func Ended(wf tinkerbell.Workflow) bool {
	return slices.Contains([]tinkerbell.WorkflowState{
		tinkerbell.WorkflowStateSuccess, tinkerbell.WorkflowStateFailed, tinkerbell.WorkflowStateTimeout,
	}, wf.Status.State)
}

// InOrder reports whether lines hold, in this order, a line beginning
// with each of want: the console's, or a journal's "kind: text".
func InOrder(lines, want []string) bool {
	i := 0
	for _, l := range lines {
		if i < len(want) && strings.HasPrefix(l, want[i]) {
			i++
		}
	}
	return i == len(want)
}

// Progress is what a Workflow's status shows of its run: its state, its
// current action and each action's state.
func Progress(wf tinkerbell.Workflow) string {
	var b strings.Builder
	b.WriteString(string(wf.Status.State))
	if cs := wf.Status.CurrentState; cs != nil {
		fmt.Fprintf(&b, " current %s %s", cs.ActionName, cs.State)
	}
	for _, task := range wf.Status.Tasks {
		for _, a := range task.Actions {
			fmt.Fprintf(&b, ", %s %s", a.Name, a.State)
		}
	}
	return b.String()
}

// Follow reads Workflow name of ns until done holds of it, and returns it
// then, logging each change of its Progress with the time it was seen from
// since. Its waits are sized by the Workflow's progress: it fails t when
// the Workflow stands still for stall, or runs past limit from since in
// all (0: no limit).
func Follow(ctx context.Context, t testing.TB, tink dynamic.Interface, ns, name string, since time.Time, stall, limit time.Duration, done func(tinkerbell.Workflow) bool) tinkerbell.Workflow {
	t.Helper()
	var (
		last    string
		moved   = time.Now()
		changes []string
	)
	for {
		wf, err := GetWorkflow(ctx, tink, ns, name)
		now := time.Now()
		if err == nil {
			if p := Progress(wf); p != last {
				last, moved = p, now
				changes = append(changes, fmt.Sprintf("  %6.2fs %s", now.Sub(since).Seconds(), p))
			}
			if done(wf) {
				t.Logf("Workflow %s, from %s:\n%s", name, since.Format(time.TimeOnly), strings.Join(changes, "\n"))
				return wf
			}
		}
		if now.Sub(moved) > stall || limit > 0 && now.Sub(since) > limit {
			t.Fatalf("Workflow %s stood still for %v (or ran past %v; last read error %v):\n%s", name, now.Sub(moved).Round(time.Second), limit, err, strings.Join(changes, "\n"))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Workflow %s: %v:\n%s", name, ctx.Err(), strings.Join(changes, "\n"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
