package tinktest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/repotest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/tinktest"
	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// controllerGenVersion is the annotation controller-gen writes on each CRD:
// the version that generated it (fleet's tools/crd and Tinkerbell's
// release use different ones).
const controllerGenVersion = "controller-gen.kubebuilder.io/version"

// Fleet's generated CRDs (examples/deploy/crds) equal the ones Tinkerbell
// applies itself, but for the controller-gen version annotation. On a
// control plane of its own, the test reads back fleet's CRDs as kubetest
// created them from those files, then Tinkerbell's as its migration leaves
// them, and compares the two in everything the API server does not write
// itself; both are as the server stores them, its defaults (such as
// spec.conversion) applied to both alike. Tinkerbell's migration runs
// twice: over fleet's CRDs, as on the shared control plane, where its
// apply conflicts on the annotation and its update replaces each CRD
// whole; and, after they were deleted, where its apply creates them.
func TestIntegrationCRDsEqualTinkerbells(t *testing.T) {
	env := kubetest.StartOwn(t)
	ctx := testenv.Context(t, 2*time.Minute)
	dyn := kubetest.Dynamic(t, env.Config())
	client := dyn.Resource(kubetest.CRDResource)
	root, err := repotest.Root()
	if err != nil {
		t.Fatal(err)
	}
	files := kubetest.ReadCRDs(t, filepath.Join(root, filepath.FromSlash(kubetest.CRDDir)))
	if len(files) != 7 {
		t.Fatalf("%s holds %d CRDs, want Tinkerbell's 7 v1alpha1 ones", kubetest.CRDDir, len(files))
	}
	fleet := map[string]*unstructured.Unstructured{}
	for name := range files {
		crd, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("fleet's CRD %s, as kubetest applied it: %v", name, err)
		}
		fleet[name] = crd
	}

	t.Run("updated over fleet's", func(t *testing.T) {
		tinktest.Start(t, env, env.Namespace(t), nil)
		compareCRDs(ctx, t, client, fleet)
	})
	t.Run("created", func(t *testing.T) {
		for _, crd := range fleet {
			awaitStorage(ctx, t, dyn, crd)
			if err := client.Delete(ctx, crd.GetName(), metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete CRD %s: %v", crd.GetName(), err)
			}
		}
		for name := range fleet {
			if err := kubetest.WaitGone(ctx, client, name); err != nil {
				t.Fatalf("CRD %s not deleted: %v", name, err)
			}
		}
		tinktest.Start(t, env, env.Namespace(t), nil)
		compareCRDs(ctx, t, client, fleet)
	})
}

// compareCRDs fails t when a CRD of fleet differs from the one of that name
// on the control plane, which Tinkerbell applied, but in what comparable
// leaves out, or when Tinkerbell's does not carry its own controller-gen
// version.
func compareCRDs(ctx context.Context, t *testing.T, client dynamic.NamespaceableResourceInterface, fleet map[string]*unstructured.Unstructured) {
	t.Helper()
	for name, want := range fleet {
		got, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("Tinkerbell applied no CRD %s: %v", name, err)
			continue
		}
		if v := got.GetAnnotations()[controllerGenVersion]; v == want.GetAnnotations()[controllerGenVersion] {
			t.Errorf("CRD %s: the annotation %s is %q in fleet's and Tinkerbell's: did Tinkerbell's migration not apply it?", name, controllerGenVersion, v)
		}
		if diff := cmp.Diff(comparable(want), comparable(got)); diff != "" {
			t.Errorf("CRD %s differs between %s and Tinkerbell's (-fleet +Tinkerbell):\n%s", name, kubetest.CRDDir, diff)
		}
	}
}

// awaitStorage returns once crd's custom resources can be watched: their
// watch cache is ready. kube-apiserver's CRD finalizer fails on a CRD
// deleted before then ("storage is (re)initializing") and retries only
// after a back-off that has been seen to last minutes.
func awaitStorage(ctx context.Context, t *testing.T, dyn dynamic.Interface, crd *unstructured.Unstructured) {
	t.Helper()
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		name, _, _ := unstructured.NestedString(v.(map[string]any), "name")
		w, err := dyn.Resource(schema.GroupVersionResource{Group: group, Version: name, Resource: plural}).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("watch %s.%s/%s: %v", plural, group, name, err)
		}
		w.Stop()
	}
}

// comparable returns crd without what the API server writes (status,
// managedFields, resourceVersion, uid, creationTimestamp, generation) and
// without the controller-gen version annotation.
func comparable(crd *unstructured.Unstructured) map[string]any {
	c := crd.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "status")
	for _, f := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "metadata", "annotations", controllerGenVersion)
	if a, ok, _ := unstructured.NestedMap(c.Object, "metadata", "annotations"); ok && len(a) == 0 {
		unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
	}
	return c.Object
}

// clusterAdmin is a binding of ns's ServiceAccount ServiceAccount to
// cluster-admin: what the grant must not let it write.
func clusterAdmin(ns string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tinktest-escalate-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: tinktest.ServiceAccount, Namespace: ns}},
	}
}
