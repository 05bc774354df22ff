package provision

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/bmc"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/inventory"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }

// newRealHarness is newHarness over the test binary's real kube-apiserver
// (internal/kubetest): the Tinkerbell and Rufio objects live in a namespace
// of the test's own, passed as Config.Namespace, and the bootstrap token
// Secrets in kube-system, which every test shares. It deletes the fleet
// token Secrets earlier tests left there, so that h.secrets() holds this
// test's alone: a test that calls it must not run in parallel.
func newRealHarness(t testing.TB, edit func(*Cluster, *Config), devs ...inventory.Device) *harness {
	t.Helper()
	env := kubetest.Start(t)
	return newRealHarnessIn(t, env, env.Namespace(t), edit, devs...)
}

// apiserver is the cluster of newRealHarness.
var apiserver = cluster{"apiserver", newRealHarness}

// newRealHarnessIn is newRealHarness on env, in namespace ns (where a test
// may have started the real Tinkerbell).
func newRealHarnessIn(t testing.TB, env *kubetest.Env, ns string, edit func(*Cluster, *Config), devs ...inventory.Device) *harness {
	t.Helper()
	kube, dyn := kubetest.Clientset(t, env.Config()), kubetest.Dynamic(t, env.Config())
	if err := kube.CoreV1().Secrets("kube-system").DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + managedBy}); err != nil {
		t.Fatal(err)
	}
	return newHarnessOn(t, kube, dyn, ns, edit, devs...)
}

// Runs are found by their labels on the server: a Workflow fleet did not
// make, in the same namespace, and a fleet Workflow of another namespace
// are not fleet's runs.
func TestAPIServerListByLabel(t *testing.T) {
	h, run1, _ := apiserver.startWorker(t, nil)
	ctx := context.Background()
	foreign := tinkerbell.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: h.ns, Labels: map[string]string{LabelDeviceID: "1"}},
		Spec:       tinkerbell.WorkflowSpec{TemplateRef: "debug", HardwareRef: "node-01"},
	}
	h.create(WorkflowResource, tinkerbell.GroupVersion.WithKind("Workflow"), &foreign, nil)
	other := kubetest.Start(t).Namespace(t)
	elsewhere := tinkerbell.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: "provision-node-09-1", Namespace: other,
			Labels: map[string]string{LabelManagedBy: managedBy, LabelDeviceID: "1", LabelRunKind: string(RunProvision)}},
		Spec: tinkerbell.WorkflowSpec{TemplateRef: "fleet-provision", HardwareRef: "node-09"},
	}
	kubetest.Create(ctx, t, h.tinkAPI, WorkflowResource, other, &elsewhere)
	if pass := h.reconcile(); pass.Runs != 1 {
		t.Errorf("pass = %+v, want the one fleet run of the namespace", pass)
	}
	runs, err := h.p.runsOf(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Name() != run1 {
		t.Errorf("runs of device 1 = %v, want only %s", runs, run1)
	}
	// A new run of the device replaces fleet's run, and leaves the rest.
	d := h.rerun(run1)
	if names, want := h.runNames(), []string{"by-hand", d.Run}; !slices.Equal(names, want) {
		t.Errorf("Workflows = %v, want %v", names, want)
	}
}

// hookedConfig is the test kube-apiserver's admin config whose every
// request goes through hook, which sends it on with send or answers in its
// place: a writer that acts between a client's calls (a second fleetd
// replica, an operator), or a client cut off from the API server.
func hookedConfig(t testing.TB, hook func(r *http.Request, send http.RoundTripper) (*http.Response, error)) *rest.Config {
	cfg := kubetest.Start(t).Config()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(r *http.Request) (*http.Response, error) { return hook(r, rt) })
	}
	return cfg
}

// roundTrip is an http.RoundTripper of a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A Hardware that another writer (a second fleetd replica, an operator)
// made first, and then changed (the tink controller toggles allowPXE) or
// deleted just after provision read it: provision's update of what it read
// is answered with a real 409, or finds nothing (NotFound), and provision
// writes NetBox's facts once more, so the run starts.
func TestAPIServerHardwareRaced(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  func(c dynamic.ResourceInterface, hw *unstructured.Unstructured) error
	}{
		{"changed", func(c dynamic.ResourceInterface, hw *unstructured.Unstructured) error {
			ifaces, _, _ := unstructured.NestedSlice(hw.Object, "spec", "interfaces")
			ifaces[0].(map[string]any)["netboot"].(map[string]any)["allowPXE"] = false
			if err := unstructured.SetNestedSlice(hw.Object, ifaces, "spec", "interfaces"); err != nil {
				return err
			}
			_, err := c.Update(context.Background(), hw, metav1.UpdateOptions{})
			return err
		}},
		{"deleted", func(c dynamic.ResourceInterface, _ *unstructured.Unstructured) error {
			return c.Delete(context.Background(), "node-01", metav1.DeleteOptions{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := worker(1, "node-01")
			h := newRealHarness(t, nil, dev)
			other := tinkerbell.Hardware{
				ObjectMeta: metav1.ObjectMeta{Name: "node-01", Namespace: h.ns},
				Spec: tinkerbell.HardwareSpec{Interfaces: []tinkerbell.Interface{{
					DHCP:    &tinkerbell.DHCP{MAC: "02:00:00:00:00:99", Hostname: "node-01"},
					Netboot: &tinkerbell.Netboot{AllowPXE: new(true)},
				}}},
			}
			h.create(HardwareResource, tinkerbell.GroupVersion.WithKind("Hardware"), &other, nil)
			c := h.tinkAPI.Resource(HardwareResource).Namespace(h.ns)
			acted := 0
			var once sync.Once
			// The writer acts once provision has read the Hardware.
			h.tinkAPI = kubetest.Dynamic(t, hookedConfig(t, func(r *http.Request, send http.RoundTripper) (*http.Response, error) {
				rsp, err := send.RoundTrip(r)
				if err != nil || rsp.StatusCode != http.StatusOK || r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/hardware/node-01") {
					return rsp, err
				}
				once.Do(func() {
					hw, err := c.Get(context.Background(), "node-01", metav1.GetOptions{})
					if err == nil {
						err = tc.act(c, hw)
					}
					if err != nil {
						t.Error(err)
						return
					}
					acted++
				})
				return rsp, err
			}))
			h.restart()
			h.admitStarts(dev)
			if acted != 1 {
				t.Fatalf("the concurrent writer acted %d times, want 1", acted)
			}
			var hw tinkerbell.Hardware
			h.get(HardwareResource, "node-01", &hw)
			i := hw.Spec.Interfaces[0]
			if i.DHCP.MAC != "02:00:00:00:00:01" || hw.Labels[LabelDeviceID] != "1" || i.Netboot == nil || i.Netboot.AllowPXE == nil || !*i.Netboot.AllowPXE {
				t.Errorf("Hardware MAC %s, netboot %+v, labels %v; want NetBox's facts (allowPXE) written over the concurrent change", i.DHCP.MAC, i.Netboot, hw.Labels)
			}
		})
	}
}

// A Workflow that Tinkerbell reports ended after fleet read it, and before
// fleet replaces the run: the stale read does not delete it (the server
// answers the delete's preconditions with a conflict), the runs are read
// again, and the ended run stays for the loop to record.
func TestAPIServerEndedRunNotDeleted(t *testing.T) {
	h, run1, _ := apiserver.startWorker(t, nil)
	ctx := context.Background()
	runs, err := h.p.runsOf(ctx, 1)
	if err != nil || len(runs) != 1 || runs[0].Name() != run1 {
		t.Fatalf("runsOf = %v, %v", runs, err)
	}
	h.setStatus(run1, func(s *tinkerbell.WorkflowStatus) { s.State = tinkerbell.WorkflowStateSuccess })
	if _, err := h.p.endRuns(ctx, 1, &runs); err != nil {
		t.Fatalf("endRuns on a stale read: %v", err)
	}
	if names := h.runNames(); !slices.Equal(names, []string{run1}) {
		t.Errorf("Workflows %v; want the run that ended after the read kept", names)
	}
	// Read afresh, a run that has not ended is deleted.
	d := h.rerun(run1)
	if _, err := h.p.endRuns(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if names := h.runNames(); !slices.Equal(names, []string{run1}) {
		t.Errorf("Workflows %v after endRuns; want %s (not ended) deleted, and the ended %s kept", names, d.Run, run1)
	}
}

// forbidSecrets makes h's Provisioner a fleetd whose RBAC does not let it
// create Secrets in kube-system, only Tinkerbell's and Rufio's objects in
// h's namespace; allow makes it the admin again.
func forbidSecrets(t *testing.T, h *harness) (allow func()) {
	env := kubetest.Start(t)
	ctx := context.Background()
	admin := env.Admin()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "fleetd", Namespace: h.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{tinkerbell.GroupVersion.Group, bmc.GroupVersion.Group},
			Resources: []string{"*"}, Verbs: []string{"*"}}},
	}
	if _, err := admin.RbacV1().Roles(h.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "fleetd", Namespace: h.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "fleetd"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "fleetd", Namespace: h.ns}},
	}
	if _, err := admin.RbacV1().RoleBindings(h.ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := env.ConfigFor(env.ServiceAccountToken(t, h.ns, "fleetd"))
	kube, dyn := kubetest.Clientset(t, cfg), kubetest.Dynamic(t, cfg)
	// RBAC's authorizer reads Roles and RoleBindings from caches: wait
	// until they let the ServiceAccount list Workflows, as fleetd does.
	testenv.WaitFor(t, time.Minute, "fleetd's Role in force", func() bool {
		_, err := dyn.Resource(WorkflowResource).Namespace(h.ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil
	})
	h.kubeAPI, h.tinkAPI = kube, dyn
	h.restart()
	return func() {
		h.kubeAPI, h.tinkAPI = admin, kubetest.Dynamic(t, env.Config())
		h.restart()
	}
}

// A bootstrap token fleet creates authenticates against the real
// kube-apiserver (--enable-bootstrap-token-auth) as system:bootstrap:<id>,
// in the groups a kubelet's first certificate request needs, and stops
// authenticating at its expiration: the runbook's kubelet Unauthorized
// row. The test renders as if ConfigTTL + TokenGrace minus a few seconds
// had passed since, so the Secret it writes expires within seconds.
func TestAPIServerBootstrapTokenAuthenticates(t *testing.T) {
	t.Parallel() // it waits for the expiry; it lists no Secrets of other tests
	const ahead = 6 * time.Second
	dev := attested(worker(1, "node-01"))
	h := newRealHarness(t, nil, dev)
	ctx := context.Background()
	const code = "SECRETCODE0001"
	rendered := time.Now().Add(-h.cfg.ConfigTTL - TokenGrace + ahead)
	tok, err := newBootToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.p.render(ctx, dev, "provision-node-01-1", code, tok, rendered); err != nil {
		t.Fatalf("render: %v", err)
	}
	// The token as the node reads it from its config.
	cfg, err := configloader.NewFromBytes(h.configs.held[code].config)
	if err != nil {
		t.Fatal(err)
	}
	held := cfg.Cluster().Token()
	id, token := held.ID(), held.ID()+"."+held.Secret()
	s, err := h.kubeAPI.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expires, err := time.Parse(time.RFC3339, string(s.Data["expiration"]))
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(expires); left <= 0 || left > ahead {
		t.Fatalf("the token expires in %v, want within %v", left, ahead)
	}

	node := kubetest.Clientset(t, kubetest.Start(t).ConfigFor(token))
	review := func() (*authenticationv1.SelfSubjectReview, error) {
		return node.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	}
	r, err := review()
	if err != nil {
		t.Fatalf("the token before its expiry: %v", err)
	}
	if u := r.Status.UserInfo; u.Username != "system:bootstrap:"+id ||
		!slices.Contains(u.Groups, "system:bootstrappers") || !slices.Contains(u.Groups, tokenExtraGroups) {
		t.Errorf("the token authenticates as %q in %v, want system:bootstrap:%s in system:bootstrappers and %s", u.Username, u.Groups, id, tokenExtraGroups)
	}

	// kube-apiserver caches a successful token check for 10 s.
	deadline := expires.Add(10*time.Second + 5*time.Second)
	for {
		_, err := review()
		if apierrors.IsUnauthorized(err) {
			if now := time.Now(); now.Before(expires) {
				t.Errorf("the token was refused at %v, before its expiration %v", now, expires)
			}
			break
		}
		if err != nil {
			t.Fatalf("the token after its expiry: %v, want Unauthorized", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the token still authenticates at %v, past its expiration %v and the 10 s cache", time.Now(), expires)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// workflowCreated is when provision created the Workflow name, as its
// annotation says (to the second): what a run's timeouts count from.
func (h *harness) workflowCreated(name string) time.Time {
	h.t.Helper()
	at, err := time.Parse(time.RFC3339, h.workflow(name).Annotations[annCreated])
	if err != nil {
		h.t.Fatal(err)
	}
	return at
}
