package sim

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/spentlease"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/provision"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// deployDir is examples/deploy, from this package's directory.
const deployDir = "../../../deploy"

// wantRole is the Role of examples/deploy: every rule a Kubernetes call of
// fleetd needs in Tinkerbell's namespace, and no other.
var wantRole = []rbacv1.PolicyRule{
	// listRuns, runsOf; newWorkflow; annotate; deleteWorkflow.
	{APIGroups: []string{"tinkerbell.org"}, Resources: []string{"workflows"}, Verbs: []string{"list", "create", "patch", "delete"}},
	// ensureHardware: read, created when missing, else updated.
	{APIGroups: []string{"tinkerbell.org"}, Resources: []string{"hardware"}, Verbs: []string{"get", "create", "update"}},
	// ensureTemplates reads fleet-provision and fleet-retire, creates one
	// that is missing, and updates one whose images are not the settings'.
	{APIGroups: []string{"tinkerbell.org"}, Resources: []string{"templates"}, Verbs: []string{"get", "create", "update"}},
	// ensureMachine: read, pointed at the node's address, or created.
	{APIGroups: []string{"bmc.tinkerbell.org"}, Resources: []string{"machines"}, Verbs: []string{"get", "create", "patch"}},
	// bootJobMessage reads why Tinkerbell's netboot Job failed: Rufio
	// writes it on the Job's failed Task.
	{APIGroups: []string{"bmc.tinkerbell.org"}, Resources: []string{"jobs", "tasks"}, Verbs: []string{"get"}},
	// Replicas: spentlease's Spend creates, Collect lists and deletes; the
	// leader election creates fleet-provision, and reads and renews it.
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"list", "create", "delete"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"fleet-provision"}, Verbs: []string{"get", "update"}},
}

// wantTokenRole is the Role of examples/deploy/cluster in kube-system of the
// nodes' cluster: a bootstrap token is created for a run, and deleted
// when the run does not start.
var wantTokenRole = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "delete"}},
}

// wantNodesRole is the ClusterRole of examples/deploy/cluster: the loop
// reads a Node by name.
var wantNodesRole = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
}

// kustomize renders the kustomization in dir (tools/kustomize, kustomize's
// Go API in a module of its own) and decodes its objects.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		testenv.Unavailable(t, "needs the go command on PATH to run tools/kustomize")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), goCmd, "-C", filepath.Join("..", "..", "..", "..", "tools", "kustomize"), "run", ".", abs)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go -C tools/kustomize run . %s: %v\n%s", dir, err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decode kustomize %s: %v", dir, err)
		}
		if u.Object != nil {
			objs = append(objs, &u)
		}
	}
	return objs
}

// overlay writes a kustomization that sets the namespace of base's objects
// to ns, and returns its directory.
func overlay(t *testing.T, base, ns string) string {
	t.Helper()
	abs, err := filepath.Abs(base)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, abs) // kustomize refuses an absolute base
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n  - %s\n", ns, filepath.ToSlash(rel))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// applier applies objects with server-side apply.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	dyn := kubetest.Dynamic(t, cfg)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// apply applies u, and returns the object as the server made it (with what
// it defaulted and allocated); dryRun asks the server to validate and admit
// it, and to store nothing.
func (a *applier) apply(ctx context.Context, u *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
	}
	opts := metav1.ApplyOptions{FieldManager: "fleet-deploy-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var r dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = a.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	got, err := r.Apply(ctx, u.GetName(), u, opts)
	if err != nil {
		return nil, fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
	}
	return got, nil
}

// rules reads the rules of the Role or ClusterRole named name among objs.
func rules(t *testing.T, objs []*unstructured.Unstructured, name string) []rbacv1.PolicyRule {
	t.Helper()
	for _, u := range objs {
		if (u.GetKind() == "Role" || u.GetKind() == "ClusterRole") && u.GetName() == name {
			var r rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				t.Fatal(err)
			}
			return r.Rules
		}
	}
	t.Fatalf("no Role %s", name)
	return nil
}

// deployed is fleetd's RBAC of examples/deploy applied to the test
// apiserver, and fleetd's clients that carry only the ServiceAccounts'
// tokens.
type deployed struct {
	env      *kubetest.Env
	ns       string
	base     []*unstructured.Unstructured // examples/deploy in ns
	made     []*unstructured.Unstructured // base as the server-side dry-run made it
	cluster  []*unstructured.Unstructured // examples/deploy/cluster
	tink     dynamic.Interface            // as system:serviceaccount:<ns>:fleetd
	tinkKube kubernetes.Interface         // as system:serviceaccount:<ns>:fleetd
	kube     kubernetes.Interface         // as system:serviceaccount:kube-system:fleetd
}

// deploy renders examples/deploy into a namespace of its own and
// examples/deploy/cluster, validates every object of both and of
// examples/deploy/crds by server-side dry-run (keeping what it made of the
// base's), applies the ServiceAccounts
// and RBAC objects (with edit changing the base's Role first, when not
// nil), and returns fleetd's clients.
func deploy(t *testing.T, edit func(role *unstructured.Unstructured)) *deployed {
	t.Helper()
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	base := kustomize(t, overlay(t, deployDir, ns))
	cluster := kustomize(t, filepath.Join(deployDir, "cluster"))
	crds := kustomize(t, filepath.Join(deployDir, "crds"))
	a := newApplier(t, env.Config())
	ctx := t.Context()
	var made []*unstructured.Unstructured
	for _, u := range slices.Concat(crds, base, cluster) {
		got, err := a.apply(ctx, u, true)
		if err != nil {
			t.Errorf("server-side dry-run: %v", err)
		} else if slices.Contains(base, u) {
			made = append(made, got)
		}
	}
	for _, u := range slices.Concat(base, cluster) {
		switch u.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			if u.GetKind() == "Role" && u.GetNamespace() == ns && edit != nil {
				edit(u)
			}
			if _, err := a.apply(ctx, u, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	d := &deployed{env: env, ns: ns, base: base, made: made, cluster: cluster}
	tinkConfig := env.ConfigFor(env.ServiceAccountToken(t, ns, "fleetd"))
	d.tink, d.tinkKube = kubetest.Dynamic(t, tinkConfig), kubetest.Clientset(t, tinkConfig)
	d.kube = kubetest.Clientset(t, env.ConfigFor(env.ServiceAccountToken(t, metav1.NamespaceSystem, "fleetd")))
	return d
}

// fleet is a test fleet whose fleetd talks to the apiserver with the
// deployed ServiceAccounts' tokens only; the simulated Tinkerbell and the
// test's checks use the admin's.
func (d *deployed) fleet(t *testing.T, nodes ...testNode) *testFleet {
	t.Helper()
	admin := kubetest.Dynamic(t, d.env.Config())
	key := make([]byte, 32)
	rand.Read(key)
	peers := listen(t)
	// fleetd runs as the StatefulSet runs it, a replica, alone here: its
	// Leases (the leader's, the spent sessions') carry the token too.
	return newFleet(t, worldConfig{
		Validate: t, Edit: func(s *daemon.Settings) {
			s.Namespace, s.Replica, s.SealingKey = d.ns, "fleetd-0", key
			s.Peers = []daemon.Peer{{Name: "fleetd-0", URL: "https://" + peers.Addr().String()}}
		},
		Kube: d.env.Admin(), Tink: admin,
		FleetdKube: d.kube, FleetdTink: d.tink, Leases: d.tinkKube.CoordinationV1(), Peers: peers,
	}, nodes...)
}

// The deploy manifests: every object of examples/deploy, its cluster/ and
// crds/ kustomizations is valid for the real apiserver (server-side
// dry-run, strict about unknown fields); fleetd provisions a worker to
// active with only the tokens of the ServiceAccounts they create; and
// those tokens are refused anything their Roles do not grant. The
// apiserver takes the Services, NetworkPolicies and StatefulSet as they
// are written: it allocates the machines' LoadBalancer a node port and,
// for externalTrafficPolicy Local, the health check node port through
// which a load balancer sends machines to nodes with a ready replica
// alone; it keeps the policies' named ports and selectors, and the
// StatefulSet's probes and topology spread.
func TestIntegrationDeploy(t *testing.T) {
	d := deploy(t, nil)
	want, got := readBase(t, d.base), readBase(t, d.made)
	lb := got.services["fleetd"]
	if lb.Spec.Type != corev1.ServiceTypeLoadBalancer || lb.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		t.Errorf("the API server made Service fleetd of type %q, externalTrafficPolicy %q", lb.Spec.Type, lb.Spec.ExternalTrafficPolicy)
	}
	if lb.Spec.HealthCheckNodePort == 0 || len(lb.Spec.Ports) != 1 || lb.Spec.Ports[0].NodePort == 0 {
		t.Errorf("the API server allocated Service fleetd no node port or health check node port: %+v", lb.Spec)
	}
	for name, p := range want.policies {
		if diff := cmp.Diff(p.Spec, got.policies[name].Spec); diff != "" {
			t.Errorf("NetworkPolicy %s as the API server made it (-manifest +server):\n%s", name, diff)
		}
	}
	wc, gc := want.sts.Spec.Template.Spec.Containers[0], got.sts.Spec.Template.Spec.Containers[0]
	for _, p := range []struct {
		what      string
		want, got *corev1.Probe
	}{{"readinessProbe", wc.ReadinessProbe, gc.ReadinessProbe}, {"livenessProbe", wc.LivenessProbe, gc.LivenessProbe}} {
		if p.got == nil || p.got.HTTPGet == nil || p.got.HTTPGet.Path != p.want.HTTPGet.Path || p.got.HTTPGet.Port != p.want.HTTPGet.Port {
			t.Errorf("%s as the API server made it: %+v, want %+v", p.what, p.got, p.want)
		}
	}
	if diff := cmp.Diff(want.sts.Spec.Template.Spec.TopologySpreadConstraints, got.sts.Spec.Template.Spec.TopologySpreadConstraints); diff != "" {
		t.Errorf("topologySpreadConstraints as the API server made them (-manifest +server):\n%s", diff)
	}
	for name, want := range map[string][]rbacv1.PolicyRule{"fleetd": wantRole, "fleetd-bootstrap-tokens": wantTokenRole, "fleetd-nodes": wantNodesRole} {
		if diff := cmp.Diff(want, rules(t, slices.Concat(d.base, d.cluster), name)); diff != "" {
			t.Errorf("Role or ClusterRole %s (-want +examples/deploy and its cluster/):\n%s", name, diff)
		}
	}
	// The nodes' cluster's token reads a Node by name (and lists neither
	// Nodes nor Secrets: refused, below).
	if _, err := d.kube.CoreV1().Nodes().Get(t.Context(), "w-01", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get a Node with the nodes' cluster's token: %v, want NotFound (allowed)", err)
	}

	f := d.fleet(t, testNode{name: "w-01", class: "worker", approve: true})
	f.startTinkerbell()
	f.powerOn("w-01")
	if res := f.attested("w-01"); res.Verdict != attest.Attested || res.InstallCode == "" {
		t.Fatalf("attestation = %+v, want attested with a code", res)
	}
	f.provisioned("w-01", nodeAddr(0))
	// The loop that saw the run end ran under the Lease, and the session
	// was spent as a Lease: both with the ServiceAccount's token.
	lease, err := d.env.Admin().CoordinationV1().Leases(d.ns).Get(t.Context(), provision.DefaultLeaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "fleetd-0" {
		t.Errorf("Lease %s: %v, %v; want it held by fleetd-0", provision.DefaultLeaseName, lease, err)
	}
	if l, err := d.env.Admin().CoordinationV1().Leases(d.ns).List(t.Context(), metav1.ListOptions{LabelSelector: spentlease.LabelSpent + "=true"}); err != nil || len(l.Items) == 0 {
		t.Errorf("spent session Leases: %v, %v; want w-01's", l, err)
	}

	ctx := t.Context()
	other := d.env.Namespace(t)
	refused := map[string]error{}
	_, refused["list secrets in Tinkerbell's namespace"] = d.tinkKube.CoreV1().Secrets(d.ns).List(ctx, metav1.ListOptions{})
	_, refused["create a ConfigMap in Tinkerbell's namespace"] = d.tinkKube.CoreV1().ConfigMaps(d.ns).Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-fleetds"}}, metav1.CreateOptions{})
	refused["delete Hardware"] = d.tink.Resource(provision.HardwareResource).Namespace(d.ns).Delete(ctx, "w-01", metav1.DeleteOptions{})
	_, refused["list Workflows in another namespace"] = d.tink.Resource(provision.WorkflowResource).Namespace(other).List(ctx, metav1.ListOptions{})
	_, refused["list Workflows in every namespace"] = d.tink.Resource(provision.WorkflowResource).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	_, refused["update a Lease other than fleet-provision"] = d.tinkKube.CoordinationV1().Leases(d.ns).Update(ctx,
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "not-fleetds"}}, metav1.UpdateOptions{})
	_, refused["list Nodes with the nodes' cluster's token"] = d.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	_, refused["list Secrets of kube-system in the nodes' cluster"] = d.kube.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	_, refused["create a Secret outside kube-system in the nodes' cluster"] = d.kube.CoreV1().Secrets(d.ns).Create(ctx,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-fleetds"}}, metav1.CreateOptions{})
	for what, err := range refused {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	f.wantNoSecrets()
}

// Each rule of the Role is needed: without workflows create, fleetd cannot
// start the run (the apiserver answers Forbidden), and no Workflow exists.
func TestIntegrationDeployRoleWithoutWorkflowCreate(t *testing.T) {
	d := deploy(t, func(role *unstructured.Unstructured) {
		for _, r := range role.Object["rules"].([]any) {
			if r := r.(map[string]any); slices.Contains(r["resources"].([]any), "workflows") {
				r["verbs"] = slices.DeleteFunc(r["verbs"].([]any), func(v any) bool { return v == "create" })
			}
		}
	})
	f := d.fleet(t, testNode{name: "w-01", class: "worker", approve: true})
	f.startTinkerbell()
	f.powerOn("w-01")
	f.wait("fleetd's create of the Workflow refused", func() bool {
		return strings.Contains(f.audit.String(), `cannot create resource \"workflows\" in API group \"tinkerbell.org\"`)
	})
	if wfs := f.list(provision.WorkflowResource); len(wfs) != 0 {
		t.Errorf("%d Workflows exist, want none", len(wfs))
	}
	if res, ok, _, _, _ := f.machines["w-01"].state(); ok && res.InstallCode != "" {
		t.Errorf("w-01 received an install code without a Workflow")
	}
	if s := f.status("w-01"); s == inventory.StatusActive {
		t.Errorf("w-01 is %s", s)
	}
}

// koConfig is the part of .ko.yaml the test reads.
type koConfig struct {
	BaseImageOverrides map[string]string `yaml:"baseImageOverrides"`
	Builds             []struct {
		ID   string   `yaml:"id"`
		Main string   `yaml:"main"`
		Env  []string `yaml:"env"`
	} `yaml:"builds"`
}

// .ko.yaml builds fleetd and the actions: every package it names is a
// main package of this module that builds without cgo, as ko builds it, and
// the StatefulSet of examples/deploy runs the image ko builds of fleetd.
func TestKoConfig(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", ".ko.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c koConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf(".ko.yaml: %v", err)
	}
	const module = "github.com/fleetkit/fleet/"
	var pkgs []string
	for _, b := range c.Builds {
		if !slices.Contains(b.Env, "CGO_ENABLED=0") {
			t.Errorf("build %s does not set CGO_ENABLED=0", b.ID)
		}
		pkgs = append(pkgs, module+strings.TrimPrefix(b.Main, "./"))
	}
	for p := range c.BaseImageOverrides {
		if !slices.Contains(pkgs, p) {
			t.Errorf("baseImageOverrides names %s, which no build builds", p)
		}
	}
	var want []string
	for _, b := range []string{"fleetd", "hookos-attest", "wipe-disk", "install", "next-boot"} {
		want = append(want, module+"examples/"+b)
	}
	if !slices.Equal(pkgs, want) {
		t.Errorf(".ko.yaml builds %q, want %q", pkgs, want)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		testenv.Unavailable(t, "needs the go command on PATH to list the packages .ko.yaml builds")
	}
	cmd := exec.CommandContext(t.Context(), goCmd, append([]string{"list", "-f", "{{.ImportPath}} {{.Name}}"}, pkgs...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	for _, p := range pkgs {
		if !strings.Contains(string(out), p+" main\n") {
			t.Errorf("%s is not a main package: go list says\n%s", p, out)
		}
	}
	sts, err := os.ReadFile(filepath.Join(deployDir, "statefulset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sts), "image: ko://"+module+"examples/fleetd\n") {
		t.Errorf("%s/statefulset.yaml does not run ko://%sexamples/fleetd", deployDir, module)
	}
}

// crds/kustomization.yml names every CRD file beside it, and nothing else.
func TestCRDKustomizationIsCurrent(t *testing.T) {
	dir := filepath.Join(deployDir, "crds")
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		want = append(want, filepath.Base(f))
	}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(k.Resources))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s/kustomization.yml resources (-CRD files +listed):\n%s", dir, diff)
	}
}
