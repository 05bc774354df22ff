package machinetest

import (
	"context"
	"slices"
	"testing"

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
