package provision

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/bmc"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetkit/fleet/internal/kubetest"
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

// newRealHarnessIn is newRealHarness on env, in namespace ns (where a test
// may have started the real Tinkerbell).
func newRealHarnessIn(t testing.TB, env *kubetest.Env, ns string, edit func(*Cluster, *Config), devs ...inventory.Device) *harness {
	t.Helper()
	kube, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Secrets("kube-system").DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + managedBy}); err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t:       t,
		nb:      newMemNetBox(devs...),
		kubeAPI: kube,
		tinkAPI: dyn,
		ns:      ns,
		configs: &memConfigs{},
		audit:   &auditLog{},
		cluster: testCluster(t),
	}
	h.setConfig(edit)
	return h
}

// startRealWorker is startWorker on the real apiserver: node-01's run
// starts through its attestation, on real time. It returns the run's name
// and its started line.
func startRealWorker(t *testing.T) (h *harness, run string, started journalLine) {
	t.Helper()
	dev := worker(1, "node-01")
	h = newRealHarness(t, nil, dev)
	d, err := h.p.Admit(context.Background(), claimOf(dev))
	if err != nil || !isRunName(d.Run, "provision-node-01-") {
		t.Fatalf("Admit = %+v, %v", d, err)
	}
	return h, d.Run, journalLine{1, inventory.JournalInfo, "started Workflow " + d.Run + "; the machine attested from HookOS at 10.0.0.21"}
}

// runTime is the time a run is named by: its render time, to the second.
func runTime(run string) time.Time {
	secs, _ := strconv.ParseInt(run[strings.LastIndexByte(run, '-')+1:], 10, 64)
	return time.Unix(secs, 0).UTC()
}

// sleepPast sleeps until the second after the one run is named by, so that
// a run started next gets another name.
func sleepPast(run string) {
	time.Sleep(time.Until(runTime(run).Add(time.Second)))
}

// get reads one object of the harness's namespace into obj.
func (h *harness) get(gvr schema.GroupVersionResource, name string, obj any) {
	h.t.Helper()
	u, err := h.tinkAPI.Resource(gvr).Namespace(h.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		h.t.Fatal(err)
	}
}

// heldToken is the bootstrap token of the config held under code, as the
// node reads it.
func (h *harness) heldToken(code string) (id, token string) {
	h.t.Helper()
	h.configs.mu.Lock()
	held := h.configs.held[code]
	h.configs.mu.Unlock()
	cfg, err := configloader.NewFromBytes(held.config)
	if err != nil {
		h.t.Fatal(err)
	}
	tok := cfg.Cluster().Token()
	return tok.ID(), tok.ID() + "." + tok.Secret()
}

// The objects of a run, as provision writes them, pass the real CRDs'
// schema: the Workflow with its template values and labels, the Hardware
// with NetBox's facts, the Rufio Machine, and the bootstrap token Secret.
func TestAPIServerAdmitWorkerStartsRun(t *testing.T) {
	h, run1, started1 := startRealWorker(t)
	var wf tinkerbell.Workflow
	h.get(WorkflowResource, run1, &wf)
	if wf.Spec.TemplateRef != "fleet-provision" || wf.Spec.HardwareRef != "node-01" || wf.Spec.BootOptions.BootMode != "" {
		t.Errorf("Workflow spec = %+v", wf.Spec)
	}
	if wf.Spec.HardwareMap[ValueInstallCodeSHA256] != sha256Code1 || wf.Labels[LabelDeviceID] != "1" || wf.Labels[LabelRunKind] != string(RunProvision) {
		t.Errorf("Workflow values %v, labels %v", wf.Spec.HardwareMap, wf.Labels)
	}
	var hw tinkerbell.Hardware
	h.get(HardwareResource, "node-01", &hw)
	dhcp := hw.Spec.Interfaces[0].DHCP
	if dhcp.MAC != "02:00:00:00:00:01" || dhcp.IP.Address != "10.0.0.21" || dhcp.IP.Netmask != "255.255.255.0" || dhcp.IP.Gateway != "10.0.0.1" || hw.Spec.Disks[0].Device != "/dev/nvme0n1" {
		t.Errorf("Hardware = %+v / %+v", dhcp, dhcp.IP)
	}
	if hw.Spec.BMCRef == nil || hw.Spec.BMCRef.Name != "node-01" {
		t.Errorf("Hardware's BMC ref = %+v", hw.Spec.BMCRef)
	}
	if m := h.machine("node-01"); m.Spec.Connection.Host != "10.0.0.21" {
		t.Errorf("Machine host = %q", m.Spec.Connection.Host)
	}
	secrets := h.secrets()
	if len(secrets) != 1 {
		t.Fatalf("%d token Secrets, want one", len(secrets))
	}
	id, _ := h.heldToken("SECRETCODE0001")
	if s := secrets[0]; s.Name != "bootstrap-token-"+id || s.Type != tokenSecretType || string(s.Data["expiration"]) != runTime(run1).Add(time.Hour+TokenGrace).Format(time.RFC3339) {
		t.Errorf("Secret %s of type %s expires %s", s.Name, s.Type, s.Data["expiration"])
	}
	h.wantJournal(1, started1)
	h.wantNoSecretsLogged()
}

// Runs are found by their labels on the server: a Workflow fleet did not
// make, in the same namespace, and a fleet Workflow of another namespace
// are not fleet's runs.
func TestAPIServerListByLabel(t *testing.T) {
	h, run1, _ := startRealWorker(t)
	ctx := context.Background()
	foreign := tinkerbell.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: h.ns, Labels: map[string]string{LabelDeviceID: "1"}},
		Spec:       tinkerbell.WorkflowSpec{TemplateRef: "debug", HardwareRef: "node-01"},
	}
	if _, err := h.tinkAPI.Resource(WorkflowResource).Namespace(h.ns).Create(ctx,
		unstructuredOf(t, &foreign, tinkerbell.GroupVersion.WithKind("Workflow")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := kubetest.Start(t).Namespace(t)
	elsewhere := tinkerbell.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: "provision-node-09-1", Namespace: other,
			Labels: map[string]string{LabelManagedBy: managedBy, LabelDeviceID: "1", LabelRunKind: string(RunProvision)}},
		Spec: tinkerbell.WorkflowSpec{TemplateRef: "fleet-provision", HardwareRef: "node-09"},
	}
	if _, err := h.tinkAPI.Resource(WorkflowResource).Namespace(other).Create(ctx,
		unstructuredOf(t, &elsewhere, tinkerbell.GroupVersion.WithKind("Workflow")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
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
	h.nb.set(1, func(d *inventory.Device) { d.DesiredAction = inventory.DesiredActionProvision })
	sleepPast(run1)
	d, err := h.p.Admit(ctx, claimOf(h.nb.dev(1)))
	if err != nil || d.Run == run1 || !isRunName(d.Run, "provision-node-01-") {
		t.Fatalf("Admit = %+v, %v", d, err)
	}
	var names []string
	for _, wf := range h.workflows() {
		names = append(names, wf.Name)
	}
	if want := []string{"by-hand", d.Run}; !slices.Equal(names, want) {
		t.Errorf("Workflows = %v, want %v", names, want)
	}
}

// Tinkerbell writes a Workflow's status through the status subresource;
// provision reads it there and journals the end once, marking the Workflow
// with a patch that leaves the status as Tinkerbell wrote it.
func TestAPIServerWorkflowStatus(t *testing.T) {
	h, run1, started1 := startRealWorker(t)
	// On the real CRD, an update of the Workflow itself drops a status.
	var wf tinkerbell.Workflow
	h.get(WorkflowResource, run1, &wf)
	wf.Status.State = tinkerbell.WorkflowStateSuccess
	if _, err := h.tinkAPI.Resource(WorkflowResource).Namespace(h.ns).Update(context.Background(),
		unstructuredOf(t, &wf, tinkerbell.GroupVersion.WithKind("Workflow")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if pass := h.reconcile(); len(pass.Ended) != 0 {
		t.Fatalf("ended %v on a status the server dropped", pass.Ended)
	}

	h.setStatus(run1, func(s *tinkerbell.WorkflowStatus) {
		s.State = tinkerbell.WorkflowStateFailed
		s.Tasks = actions(map[string]tinkerbell.WorkflowState{"wipe-disk": "SUCCESS", "install": "FAILED"})
		s.Conditions = []tinkerbell.WorkflowCondition{{Type: "ActionComplete", Status: "True", Message: "action completed"}}
	})
	if pass := h.reconcile(); !slices.Equal(pass.Ended, []string{run1}) {
		t.Errorf("ended %v", pass.Ended)
	}
	h.restart()
	h.reconcile()
	h.wantJournal(1, started1, journalLine{1, inventory.JournalWarning,
		"Workflow " + run1 + " ended FAILED at action install; read its output with journalctl -t hookos HOOKOS_HOST=10.0.0.21"})
	got := h.workflow(run1)
	if got.Status.State != tinkerbell.WorkflowStateFailed || got.Annotations[annReported] != string(tinkerbell.WorkflowStateFailed) {
		t.Errorf("Workflow after the end was journaled: state %s, annotations %v", got.Status.State, got.Annotations)
	}
}

// "never reported its first action within its global timeout": the
// Workflow is deleted from the server, once, and not before the timeout
// (a few seconds, on real time).
func TestAPIServerNeverReportedDeleted(t *testing.T) {
	h, run1, started1 := startRealWorker(t)
	const timeout = 5 * time.Second
	h.setStatus(run1, func(s *tinkerbell.WorkflowStatus) {
		s.State = tinkerbell.WorkflowStatePending
		s.GlobalTimeout = int64(timeout / time.Second)
		s.Tasks = actions(nil)
	})
	if pass := h.reconcile(); len(pass.Deleted) != 0 {
		t.Fatalf("deleted %v before the global timeout", pass.Deleted)
	}
	time.Sleep(time.Until(h.workflowCreated(run1).Add(timeout + time.Second)))
	if pass := h.reconcile(); !slices.Equal(pass.Deleted, []string{run1}) {
		t.Fatalf("deleted %v", pass.Deleted)
	}
	_, err := h.tinkAPI.Resource(WorkflowResource).Namespace(h.ns).Get(context.Background(), run1, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Get of the deleted Workflow: %v, want NotFound", err)
	}
	h.reconcile()
	h.wantJournal(1, started1, journalLine{1, inventory.JournalWarning,
		"Workflow " + run1 + " never reported its first action within its global timeout (5s); fleetd deleted it, no later boot resumes it, and the disk may be partly wiped or still hold the old install: set desired_action to provision"})
}

// A fleetd restart mid-run: a new Provisioner over the same cluster picks
// the runs up from the server, journals an end once, and deletes a run
// that never reported.
func TestAPIServerRestartResumes(t *testing.T) {
	devA, devB := worker(1, "node-01"), worker(2, "node-02")
	const timeout = 3 * time.Second // node-02's run never reports
	h := newRealHarness(t, func(_ *Cluster, c *Config) { c.GlobalTimeout = timeout }, devA, devB)
	var runs []string
	for _, d := range []inventory.Device{devA, devB} {
		got, err := h.p.Admit(context.Background(), claimOf(d))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, got.Run)
	}
	run1, run2 := runs[0], runs[1]
	started1 := journalLine{1, inventory.JournalInfo, "started Workflow " + run1 + "; the machine attested from HookOS at 10.0.0.21"}
	h.setStatus(run1, func(s *tinkerbell.WorkflowStatus) {
		s.State = tinkerbell.WorkflowStateRunning
		s.CurrentState = &tinkerbell.CurrentState{ActionName: "install"}
	})
	h.reconcile()

	h.restart()
	h.setStatus(run1, func(s *tinkerbell.WorkflowStatus) {
		s.State = tinkerbell.WorkflowStateFailed
		s.Tasks = actions(map[string]tinkerbell.WorkflowState{"wipe-disk": "SUCCESS", "install": "FAILED"})
	})
	time.Sleep(time.Until(h.workflowCreated(run2).Add(timeout + time.Second)))
	pass := h.reconcile()
	if !slices.Equal(pass.Ended, []string{run1}) || !slices.Equal(pass.Deleted, []string{run2}) {
		t.Errorf("pass after restart = %+v", pass)
	}
	h.restart()
	if pass := h.reconcile(); pass.Runs != 1 || len(pass.Ended)+len(pass.Deleted)+len(pass.Started) != 0 {
		t.Errorf("pass after a second restart = %+v", pass)
	}
	h.wantJournal(1, started1, journalLine{1, inventory.JournalWarning,
		"Workflow " + run1 + " ended FAILED at action install; read its output with journalctl -t hookos HOOKOS_HOST=10.0.0.21"})
	if n := len(h.nb.lines()); n != 4 {
		t.Errorf("%d journal lines, want 4: %+v", n, h.nb.lines())
	}
}

// interposed is a dynamic client whose Get of one resource runs then with
// the server's error after the server answered: a writer that changes the
// object between provision's read and its write.
type interposed struct {
	dynamic.Interface
	gvr  schema.GroupVersionResource
	then func(getErr error)
}

func (c interposed) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	r := c.Interface.Resource(gvr)
	if gvr != c.gvr {
		return r
	}
	return interposedResource{r, c.then}
}

type interposedResource struct {
	dynamic.NamespaceableResourceInterface
	then func(error)
}

func (r interposedResource) Namespace(ns string) dynamic.ResourceInterface {
	return interposedGet{r.NamespaceableResourceInterface.Namespace(ns), r.then}
}

type interposedGet struct {
	dynamic.ResourceInterface
	then func(error)
}

func (r interposedGet) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	u, err := r.ResourceInterface.Get(ctx, name, opts, sub...)
	r.then(err)
	return u, err
}

// A Hardware that another writer changed after provision read it (the tink
// controller toggles allowPXE on it): the server answers provision's stale
// update with a real 409, and provision reads it again and writes NetBox's
// facts, so the run starts.
func TestAPIServerHardwareConflict(t *testing.T) {
	h, run1, _ := startRealWorker(t)
	ctx := context.Background()
	real := h.tinkAPI
	var writes int
	var once sync.Once
	h.tinkAPI = interposed{Interface: real, gvr: HardwareResource, then: func(error) {
		once.Do(func() {
			c := real.Resource(HardwareResource).Namespace(h.ns)
			u, err := c.Get(ctx, "node-01", metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			ifaces, _, _ := unstructured.NestedSlice(u.Object, "spec", "interfaces")
			ifaces[0].(map[string]any)["netboot"].(map[string]any)["allowPXE"] = false
			if err := unstructured.SetNestedSlice(u.Object, ifaces, "spec", "interfaces"); err != nil {
				t.Error(err)
				return
			}
			if _, err := c.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
				return
			}
			writes++
		})
	}}
	h.restart()
	h.nb.set(1, func(d *inventory.Device) { d.DesiredAction = inventory.DesiredActionProvision })
	sleepPast(run1)
	d, err := h.p.Admit(ctx, claimOf(h.nb.dev(1)))
	if err != nil || d.Run == run1 || !isRunName(d.Run, "provision-node-01-") {
		t.Fatalf("Admit after a concurrent write of the Hardware = %+v, %v", d, err)
	}
	if writes != 1 {
		t.Fatalf("the concurrent writer wrote %d times, want 1", writes)
	}
	var hw tinkerbell.Hardware
	h.get(HardwareResource, "node-01", &hw)
	if nb := hw.Spec.Interfaces[0].Netboot; nb == nil || nb.AllowPXE == nil || !*nb.AllowPXE {
		t.Errorf("Hardware netboot = %+v, want NetBox's facts (allowPXE) written over the concurrent change", nb)
	}
}

// A Hardware that another writer made first (a second fleetd replica, or
// an operator) and then deleted just after provision read it: provision's
// create is refused as AlreadyExists, its update of what it read finds
// nothing (NotFound), and it creates once more with NetBox's facts, so the
// run starts.
func TestAPIServerHardwareDeletedMeanwhile(t *testing.T) {
	dev := worker(1, "node-01")
	h := newRealHarness(t, nil, dev)
	ctx := context.Background()
	real := h.tinkAPI
	other := tinkerbell.Hardware{
		ObjectMeta: metav1.ObjectMeta{Name: "node-01", Namespace: h.ns},
		Spec: tinkerbell.HardwareSpec{Interfaces: []tinkerbell.Interface{{
			DHCP: &tinkerbell.DHCP{MAC: "02:00:00:00:00:99", Hostname: "node-01"},
		}}},
	}
	c := real.Resource(HardwareResource).Namespace(h.ns)
	if _, err := c.Create(ctx, unstructuredOf(t, &other, tinkerbell.GroupVersion.WithKind("Hardware")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var deleted int
	var once sync.Once
	h.tinkAPI = interposed{Interface: real, gvr: HardwareResource, then: func(getErr error) {
		if getErr != nil {
			return
		}
		once.Do(func() {
			if err := c.Delete(ctx, "node-01", metav1.DeleteOptions{}); err != nil {
				t.Error(err)
				return
			}
			deleted++
		})
	}}
	h.restart()
	if d, err := h.p.Admit(ctx, claimOf(dev)); err != nil || !isRunName(d.Run, "provision-node-01-") {
		t.Fatalf("Admit after a concurrent delete of the Hardware = %+v, %v", d, err)
	}
	if deleted != 1 {
		t.Fatalf("the concurrent writer deleted %d Hardware objects, want 1", deleted)
	}
	var hw tinkerbell.Hardware
	h.get(HardwareResource, "node-01", &hw)
	if mac := hw.Spec.Interfaces[0].DHCP.MAC; mac != "02:00:00:00:00:01" || hw.Labels[LabelDeviceID] != "1" {
		t.Errorf("Hardware MAC %s, labels %v; want NetBox's facts", mac, hw.Labels)
	}
}

// A Workflow that Tinkerbell reports ended after fleet read it, and before
// fleet replaces the run: the stale read does not delete it (the server
// answers the delete's preconditions with a conflict), the runs are read
// again, and the ended run stays for the loop to record.
func TestAPIServerEndedRunNotDeleted(t *testing.T) {
	h, run1, _ := startRealWorker(t)
	ctx := context.Background()
	runs, err := h.p.runsOf(ctx, 1)
	if err != nil || len(runs) != 1 || runs[0].Name() != run1 {
		t.Fatalf("runsOf = %v, %v", runs, err)
	}
	c := h.tinkAPI.Resource(WorkflowResource).Namespace(h.ns)
	u, err := c.Get(ctx, run1, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, string(tinkerbell.WorkflowStateSuccess), "status", "state"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.p.endRuns(ctx, 1, &runs); err != nil {
		t.Fatalf("endRuns on a stale read: %v", err)
	}
	if _, err := c.Get(ctx, run1, metav1.GetOptions{}); err != nil {
		t.Errorf("the run that ended after the read: %v; want it kept", err)
	}
	// Read afresh, a run that has not ended is deleted.
	sleepPast(run1)
	h.nb.set(1, func(d *inventory.Device) { d.DesiredAction = inventory.DesiredActionProvision })
	d, err := h.p.Admit(ctx, claimOf(h.nb.dev(1)))
	if err != nil || d.Run == run1 {
		t.Fatalf("Admit = %+v, %v", d, err)
	}
	if _, err := h.p.endRuns(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, d.Run, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("run %s (not ended) after endRuns: %v; want it deleted", d.Run, err)
	}
	if _, err := c.Get(ctx, run1, metav1.GetOptions{}); err != nil {
		t.Errorf("the ended run %s after endRuns: %v; want it kept", run1, err)
	}
}

// A retirement on the server: its Workflow boots the machine through
// Rufio (boot mode netboot), and its end is journaled as a danger line
// when it fails and a success when it wipes.
func TestAPIServerRetirement(t *testing.T) {
	for _, state := range []tinkerbell.WorkflowState{tinkerbell.WorkflowStateFailed, tinkerbell.WorkflowStateSuccess} {
		t.Run(string(state), func(t *testing.T) {
			dev := attested(worker(1, "node-01"))
			dev.Status = inventory.StatusDecommissioning
			h := newRealHarness(t, nil, dev)
			pass := h.reconcile()
			if len(pass.Started) != 1 || !isRunName(pass.Started[0], "retire-node-01-") {
				t.Fatalf("pass = %+v", pass)
			}
			run := pass.Started[0]
			var wf tinkerbell.Workflow
			h.get(WorkflowResource, run, &wf)
			if wf.Spec.TemplateRef != "fleet-retire" || wf.Spec.BootOptions.BootMode != tinkerbell.BootModeNetboot || wf.Labels[LabelRunKind] != string(RunRetire) {
				t.Errorf("Workflow spec %+v, labels %v", wf.Spec, wf.Labels)
			}
			if n := len(h.secrets()); n != 0 {
				t.Errorf("%d bootstrap tokens for a retirement, want none", n)
			}
			h.setStatus(run, func(s *tinkerbell.WorkflowStatus) {
				s.State = state
				s.Tasks = []tinkerbell.Task{{Name: "retire", Actions: []tinkerbell.Action{{Name: "wipe-disk", State: state}}}}
			})
			h.reconcile()
			h.reconcile()
			ended := journalLine{1, inventory.JournalSuccess, "Workflow " + run + " ended SUCCESS: the install disk is wiped"}
			if state == tinkerbell.WorkflowStateFailed {
				ended = journalLine{1, inventory.JournalDanger, "Workflow " + run + " ended FAILED at action wipe-disk; read its output with journalctl -t hookos HOOKOS_HOST=10.0.0.21; the disk may not be wiped, so the node may still hold its data and its identity, and the device stays decommissioning"}
			}
			h.wantJournal(1,
				journalLine{1, inventory.JournalInfo, "started Workflow " + run + "; Rufio power-cycles the machine so that its next attestation from HookOS receives the install code, and the run wipes its install disk"},
				ended)
		})
	}
}

// TestRufioMachineAtNodeAddress and TestRufioMachineHostCorrected on the
// server: the Machine a run creates passes Rufio's schema and names the
// node's address; an existing Machine at another host is patched to it and
// keeps its credentials.
func TestAPIServerRufioMachine(t *testing.T) {
	dev := attested(worker(1, "node-01"))
	dev.DesiredAction = inventory.DesiredActionProvision
	t.Run("created", func(t *testing.T) {
		h := newRealHarness(t, nil, dev)
		if pass := h.reconcile(); len(pass.Started) != 1 {
			t.Fatalf("pass = %+v", pass)
		}
		m := h.machine("node-01")
		if m.Spec.Connection.Host != "10.0.0.21" || m.Spec.Connection.AuthSecretRef != (corev1.SecretReference{Name: "bmc-auth", Namespace: h.ns}) {
			t.Errorf("Machine connection = %+v", m.Spec.Connection)
		}
		if o := m.Spec.Connection.ProviderOptions; o == nil || o.IntelAMT == nil || o.IntelAMT.HostScheme != "http" {
			t.Errorf("Machine provider options = %+v, want Intel AMT over http", o)
		}
	})
	t.Run("host corrected", func(t *testing.T) {
		h := newRealHarness(t, nil, dev)
		old := bmc.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: "node-01", Namespace: h.ns},
			Spec: bmc.MachineSpec{Connection: bmc.Connection{
				Host:          "192.0.2.77",
				AuthSecretRef: corev1.SecretReference{Name: "amt-node-01", Namespace: h.ns},
			}},
		}
		if _, err := h.tinkAPI.Resource(MachineResource).Namespace(h.ns).Create(context.Background(),
			unstructuredOf(t, &old, bmc.GroupVersion.WithKind("Machine")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if pass := h.reconcile(); len(pass.Started) != 1 {
			t.Fatalf("pass = %+v", pass)
		}
		m := h.machine("node-01")
		if m.Spec.Connection.Host != "10.0.0.21" || m.Spec.Connection.AuthSecretRef.Name != "amt-node-01" {
			t.Errorf("Machine connection = %+v, want the node's address and the operator's credentials", m.Spec.Connection)
		}
	})
}

// "The Workflow's Rufio job fails to power the machine": provision reads
// the Job's Failed condition, which names the failed Task, and the Task's
// message, both of which Rufio writes through their status subresources.
func TestAPIServerRufioJobFails(t *testing.T) {
	dev := attested(worker(1, "node-01"))
	dev.DesiredAction = inventory.DesiredActionProvision
	h := newRealHarness(t, nil, dev)
	pass := h.reconcile()
	if len(pass.Started) != 1 {
		t.Fatalf("pass = %+v", pass)
	}
	run1 := pass.Started[0]
	ctx := context.Background()
	on := bmc.PowerOn
	job := bmc.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "netboot-" + run1, Namespace: h.ns},
		Spec: bmc.JobSpec{
			MachineRef: bmc.MachineRef{Name: "node-01", Namespace: h.ns},
			Tasks:      []bmc.Action{{PowerAction: &on}},
		},
	}
	jobs := h.tinkAPI.Resource(JobResource).Namespace(h.ns)
	u, err := jobs.Create(ctx, unstructuredOf(t, &job, bmc.GroupVersion.WithKind("Job")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &job); err != nil {
		t.Fatal(err)
	}
	task := bmc.Task{ObjectMeta: metav1.ObjectMeta{Name: bmc.FormatTaskName(job, 0), Namespace: h.ns},
		Spec: bmc.TaskSpec{Task: job.Spec.Tasks[0], Connection: bmc.Connection{Host: "10.0.0.21", Port: 16992,
			AuthSecretRef: corev1.SecretReference{Name: "amt-node-01", Namespace: h.ns}}}}
	tasks := h.tinkAPI.Resource(TaskResource).Namespace(h.ns)
	if u, err = tasks.Create(ctx, unstructuredOf(t, &task, bmc.GroupVersion.WithKind("Task")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &task); err != nil {
		t.Fatal(err)
	}
	task.Status.Conditions = []bmc.TaskCondition{{Type: bmc.TaskFailed, Status: bmc.ConditionTrue,
		Message: "dial tcp 10.0.0.21:16992: connect: no route to host"}}
	if _, err := tasks.UpdateStatus(ctx, unstructuredOf(t, &task, bmc.GroupVersion.WithKind("Task")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	job.Status.Conditions = []bmc.JobCondition{{Type: bmc.JobFailed, Status: bmc.ConditionTrue,
		Message: "task " + h.ns + "/" + task.Name + " failed"}}
	if _, err := jobs.UpdateStatus(ctx, unstructuredOf(t, &job, bmc.GroupVersion.WithKind("Job")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.setStatus(run1, func(s *tinkerbell.WorkflowStatus) {
		s.State = tinkerbell.WorkflowStatePreparing
		s.Conditions = []tinkerbell.WorkflowCondition{{Type: tinkerbell.BootJobFailed, Status: "True", Message: "job failed"}}
	})
	if pass := h.reconcile(); !slices.Equal(pass.Ended, []string{run1}) || len(pass.Started) != 0 {
		t.Errorf("pass = %+v", pass)
	}
	h.wantJournal(1,
		journalLine{1, inventory.JournalInfo, "started Workflow " + run1 + "; Rufio power-cycles the machine so that its next attestation from HookOS receives the install code"},
		journalLine{1, inventory.JournalWarning, "the Rufio job netboot-" + run1 + " of Workflow " + run1 + " failed to power the machine: dial tcp 10.0.0.21:16992: connect: no route to host; set AMT's address to 10.0.0.21, or power the machine on by hand"})
	if got := h.nb.dev(1); got.DesiredAction != inventory.DesiredActionProvision {
		t.Errorf("desired_action = %q, want provision again", got.DesiredAction)
	}
}

// A fleetd whose RBAC does not let it create Secrets in kube-system: the
// server refuses the bootstrap token, Admit returns ErrBootstrapToken with
// the runbook's "create <node>'s bootstrap token" line, and nothing else is
// created.
func TestAPIServerBootstrapTokenForbidden(t *testing.T) {
	dev := worker(1, "node-01")
	h := newRealHarness(t, nil, dev)
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
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.kubeAPI, h.tinkAPI = kube, dyn
	h.restart()

	d, err := h.p.Admit(ctx, claimOf(dev))
	if !errors.Is(err, ErrBootstrapToken) || !apierrors.IsForbidden(err) {
		t.Fatalf("Admit = %+v, %v; want ErrBootstrapToken wrapping the server's Forbidden", d, err)
	}
	if want := "create node-01's bootstrap token: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start %q", err, want)
	}
	if d.Code != "" {
		t.Errorf("a code was answered: %+v", d)
	}
	h.kubeAPI, h.tinkAPI = admin, dynamic.NewForConfigOrDie(env.Config())
	h.wantNoRun()
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
	id, token := h.heldToken(code)
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

	node, err := kubernetes.NewForConfig(kubetest.Start(t).ConfigFor(token))
	if err != nil {
		t.Fatal(err)
	}
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
