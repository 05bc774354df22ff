package kubetest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/google/go-cmp/cmp"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

// The shared control plane, over one namespace of its subtests.
func TestIntegrationControlPlane(t *testing.T) {
	env := Start(t)
	ctx := testenv.Context(t, 5*time.Minute)
	ns := env.Namespace(t)

	// Every CRD of examples/deploy/crds is served and Established: the seven
	// kinds of Tinkerbell's v1alpha1 API.
	t.Run("CRDs established", func(t *testing.T) {
		list, err := Dynamic(t, env.Config()).Resource(CRDResource).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, crd := range list.Items {
			if _, ok := establishedAt(&crd); !ok {
				t.Errorf("CRD %s is not Established", crd.GetName())
			}
			got = append(got, crd.GetName())
		}
		want := []string{
			"hardware.tinkerbell.org", "jobs.bmc.tinkerbell.org", "machines.bmc.tinkerbell.org",
			"tasks.bmc.tinkerbell.org", "templates.tinkerbell.org", "workflowrulesets.tinkerbell.org",
			"workflows.tinkerbell.org",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("CRDs (-want +got):\n%s", diff)
		}

		// Start waited out the delay kube-apiserver puts on creates of a
		// just-established CRD's resources (2 s).
		t0 := time.Now()
		Create(ctx, t, Dynamic(t, env.Config()), TemplateResource, ns, &tinkerbell.Template{
			ObjectMeta: metav1.ObjectMeta{Name: "fleet-provision"},
			Spec:       tinkerbell.TemplateSpec{Data: new("version: \"0.1\"\n")},
		})
		if d := time.Since(t0); d > crdSettle/2 {
			t.Errorf("the first create of a Template took %v: kube-apiserver still delayed it as just established", d)
		}
	})

	// A Workflow made from tinkerbell's Go type, created through the dynamic
	// client, reads back the same: the CRD's schema keeps every field fleet
	// sets.
	t.Run("Workflow round trip", func(t *testing.T) {
		wf := &tinkerbell.Workflow{
			ObjectMeta: metav1.ObjectMeta{Name: "provision-node-1-1700000000", Namespace: ns, Labels: map[string]string{"fleet.example/node": "node-1"}},
			Spec: tinkerbell.WorkflowSpec{
				TemplateRef: "fleet-provision",
				HardwareRef: "node-1",
				HardwareMap: map[string]string{"device_1": "3c:ec:ef:00:00:01"},
				BootOptions: tinkerbell.BootOptions{ToggleAllowNetboot: true, BootMode: "netboot"},
			},
		}
		dyn := Dynamic(t, env.Config())
		Create(ctx, t, dyn, WorkflowResource, ns, wf)
		var got tinkerbell.Workflow
		WaitFor(ctx, t, dyn, WorkflowResource, ns, wf.Name, &got, func() bool { return true })
		if diff := cmp.Diff(wf.Spec, got.Spec); diff != "" {
			t.Errorf("Workflow spec read back (-created +read):\n%s", diff)
		}
		if diff := cmp.Diff(wf.Labels, got.Labels); diff != "" {
			t.Errorf("Workflow labels read back (-created +read):\n%s", diff)
		}
		if got.UID == "" || got.ResourceVersion == "" {
			t.Errorf("Workflow read back without uid or resourceVersion: %+v", got.ObjectMeta)
		}
	})

	// The CRD's OpenAPI schema is enforced: a bmc Job with no task is refused
	// with 422 Invalid, naming spec.tasks.
	t.Run("schema enforced", func(t *testing.T) {
		job := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "bmc.tinkerbell.org/v1alpha1",
			"kind":       "Job",
			"metadata":   map[string]any{"name": "power-off-node-1", "namespace": ns},
			"spec": map[string]any{
				"machineRef": map[string]any{"name": "node-1", "namespace": ns},
				"tasks":      []any{},
			},
		}}
		_, err := Dynamic(t, env.Config()).Resource(JobResource).Namespace(ns).Create(ctx, job, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("create a bmc Job with tasks: []: got %v, want 422 Invalid", err)
		}
		if code := apierrors.ReasonForError(err); code != metav1.StatusReasonInvalid || !strings.Contains(err.Error(), "spec.tasks") {
			t.Errorf("refusal %q (reason %s) does not name spec.tasks", err, code)
		}
		var status apierrors.APIStatus
		if !errors.As(err, &status) || status.Status().Code != http.StatusUnprocessableEntity {
			t.Errorf("refusal %v: want HTTP 422", err)
		}
	})

	// An update that carries a resourceVersion another update replaced is
	// refused with 409 Conflict.
	t.Run("stale update conflicts", func(t *testing.T) {
		client := Dynamic(t, env.Config()).Resource(WorkflowResource).Namespace(ns)
		created, err := client.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "tinkerbell.org/v1alpha1",
			"kind":       "Workflow",
			"metadata":   map[string]any{"name": "wf"},
			"spec":       map[string]any{"templateRef": "fleet-provision", "hardwareRef": "node-1"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		first := created.DeepCopy()
		first.SetLabels(map[string]string{"step": "first"})
		if _, err := client.Update(ctx, first, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("first update: %v", err)
		}
		stale := created.DeepCopy()
		stale.SetLabels(map[string]string{"step": "stale"})
		_, err = client.Update(ctx, stale, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			t.Fatalf("update with resourceVersion %s after another update: got %v, want 409 Conflict", created.GetResourceVersion(), err)
		}
		now, err := client.Get(ctx, "wf", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := now.GetLabels()["step"]; got != "first" {
			t.Errorf("label step = %q after the refused update, want first", got)
		}
	})

	// A ServiceAccount that no Role names authenticates, but RBAC refuses it
	// with 403 Forbidden; bound to a Role that allows listing Workflows, the
	// same token lists them.
	t.Run("ServiceAccount without Role forbidden", func(t *testing.T) {
		token := env.ServiceAccountToken(t, ns, "no-role")
		cfg := env.ConfigFor(token)

		review, err := Clientset(t, cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the ServiceAccount's token does not authenticate: %v", err)
		}
		if got, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":no-role"; got != want {
			t.Errorf("the token authenticates as %q, want %q", got, want)
		}

		wfs := Dynamic(t, cfg).Resource(WorkflowResource).Namespace(ns)
		_, err = wfs.List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("list Workflows as a ServiceAccount with no Role: got %v, want 403 Forbidden", err)
		}

		admin := env.Admin()
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "list-workflows"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"tinkerbell.org"}, Resources: []string{"workflows"}, Verbs: []string{"list"}}},
		}
		if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "list-workflows"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "list-workflows"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "no-role", Namespace: ns}},
		}
		if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The authorizer learns of the binding through a watch: moments.
		if testenv.Until(ctx, 10*time.Second, func() bool {
			_, err = wfs.List(ctx, metav1.ListOptions{})
			return !apierrors.IsForbidden(err)
		}) != nil || err != nil {
			t.Fatalf("list Workflows once a Role allows it: %v", err)
		}
	})

	// Each test's namespace is its own.
	t.Run("namespaces are separate", func(t *testing.T) {
		a, b := env.Namespace(t), env.Namespace(t)
		if a == b {
			t.Fatalf("two calls of Namespace gave %s twice", a)
		}
		if !strings.HasPrefix(a, "testintegrationcontrolplane-namespaces-") {
			t.Errorf("namespace %q is not named after the test", a)
		}
	})
}

func TestNamespacePrefix(t *testing.T) {
	for name, want := range map[string]string{
		"TestA/sub_case#01":              "testa-sub-case-01-",
		"Test" + strings.Repeat("X", 60): "test" + strings.Repeat("x", 35) + "-",
		"///":                            "test-",
		"TestAB/" + strings.Repeat("y", 31) + "/z": "testab-" + strings.Repeat("y", 31) + "-",
	} {
		got := namespacePrefix(name)
		if got != want {
			t.Errorf("namespacePrefix(%q) = %q, want %q", name, got, want)
		}
		if len(got) > 40 {
			t.Errorf("namespacePrefix(%q) is %d characters, want at most 40", name, len(got))
		}
	}
}

// A control plane of a test's own is killed and restarted, etcd and then
// kube-apiserver, with its data: what was stored before is there after,
// and the same clients work again. The shared one refuses both.
func TestOwnControlPlaneRestarts(t *testing.T) {
	env := StartOwn(t)
	ns := env.Namespace(t)
	ctx := t.Context()
	for _, c := range []Component{Etcd, APIServer} {
		if err := env.Kill(c); err != nil {
			t.Fatalf("kill %v: %v", c, err)
		}
		dead, cancel := context.WithTimeout(ctx, 3*time.Second)
		if _, err := env.Admin().CoreV1().Namespaces().Get(dead, ns, metav1.GetOptions{}); err == nil {
			t.Errorf("a read while %v is dead answered", c)
		}
		cancel()
		t0 := time.Now()
		if err := env.Restart(ctx, c); err != nil {
			t.Fatalf("restart %v: %v", c, err)
		}
		t.Logf("%v ready again %v after its restart", c, time.Since(t0).Round(time.Millisecond))
		var err error
		if testenv.Until(ctx, 30*time.Second, func() bool {
			_, err = env.Admin().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err == nil
		}) != nil {
			t.Errorf("namespace %s after %v restarted: %v", ns, c, err)
		}
	}
	if err := Start(t).Kill(Etcd); err == nil {
		t.Error("the shared control plane was killed")
	}
}
