package provision

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetkit/fleet/inventory"
)

// The SHA-256 of the harness's first install code, SECRETCODE0001, as
// sha256sum prints it.
const sha256Code1 = "e5b2fe226b0e2473c4b62fe5722319f92ab98b16b2f0abbfbc60033139e67957"

// wantNoCodeInCluster fails when an install code the harness handed out,
// or a config URL with it, is in any object of the Tinkerbell cluster, or
// in any Secret but a bootstrap token or any ConfigMap of the node cluster.
func (h *harness) wantNoCodeInCluster() {
	h.t.Helper()
	h.configs.mu.Lock()
	n := h.configs.n
	h.configs.mu.Unlock()
	if n == 0 {
		h.t.Fatal("no install code was handed out")
	}
	// Every code the harness's Configs handed out: SECRETCODE0001 and on.
	check := func(what string, list any, err error) {
		b, jerr := json.Marshal(list)
		if err = cmp.Or(err, jerr); err != nil {
			h.t.Fatal(err)
		}
		if strings.Contains(string(b), "SECRETCODE") || strings.Contains(string(b), "/config/SECRET") {
			h.t.Errorf("%s of the cluster carry an install code:\n%s", what, b)
		}
	}
	ctx, all := context.Background(), metav1.ListOptions{}
	for _, gvr := range []schema.GroupVersionResource{WorkflowResource, HardwareResource, MachineResource, JobResource} {
		l, err := h.tink.Resource(gvr).Namespace(metav1.NamespaceAll).List(ctx, all)
		check(gvr.Resource, l, err)
	}
	secrets, err := h.kube.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, all)
	if err == nil {
		secrets.Items = slices.DeleteFunc(secrets.Items, func(s corev1.Secret) bool { return s.Type == "bootstrap.kubernetes.io/token" })
	}
	check("Secrets", secrets, err)
	cms, err := h.kube.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, all)
	check("ConfigMaps", cms, err)
}

// waitingRun starts node-01's run from desired_action on c: it waits for
// the machine.
func (c cluster) waitingRun(t *testing.T) (h *harness, dev inventory.Device, run string) {
	t.Helper()
	dev = attested(worker(1, "node-01"))
	dev.DesiredAction = inventory.DesiredActionProvision
	h = c.harness(t, nil, dev)
	return h, dev, h.passStarts("provision-node-01-")
}

// No object in the cluster carries an install code or the config URL with
// it: a worker's run from its attestation, a control plane's run from
// desired_action, and a retirement.
func TestNoCodeInCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := worker(1, "node-01")
		cp := attested(worker(2, "cp-02"))
		cp.Class = ClassControlPlane
		cp.DesiredAction = inventory.DesiredActionProvision
		old := attested(worker(3, "node-03"))
		old.Status, old.LastRun = inventory.StatusDecommissioning, "provision-node-03-1767000000"
		h := newHarness(t, nil, w, cp, old)
		h.admitStarts(w)
		if pass := h.reconcile(); len(pass.Started) != 2 {
			t.Fatalf("pass = %+v, want the control plane's run and the retirement", pass)
		}
		for _, dev := range []inventory.Device{cp, old} {
			d, err := h.p.Admit(context.Background(), claimOf(dev))
			if err != nil || d.Code == "" {
				t.Fatalf("Admit of %s = %+v, %v", dev.Name, d, err)
			}
			wf := h.workflow(d.Run)
			if got := wf.Spec.HardwareMap[ValueInstallCodeSHA256]; got != CodeSHA256(d.Code) {
				t.Errorf("%s: install_code_sha256 = %q, want the SHA-256 of the answered code", d.Run, got)
			}
		}
		if n := len(h.secrets()); n != 2 {
			t.Errorf("%d bootstrap tokens, want 2", n)
		}
		h.wantNoCodeInCluster()
		h.wantNoSecretsLogged()
	})
}

// A run that waits for its machine, whose code fleetd no longer holds,
// gets no code: the machine's attestation starts a new run, with a new
// code and config, in place of the old one, and its next boot before any
// action gets the same code. The code lives only in memory, so a restart
// loses it; a Workflow whose digest is not the one of the code fleetd
// holds (it was edited) gets no code either.
func TestAdmitAfterRestartReplacesWaitingRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(*harness)
	}{
		{"restart", (*harness).restart},
		{"digest edited", func(h *harness) {
			wf := h.workflow(run1)
			wf.Spec.HardwareMap[ValueInstallCodeSHA256] = CodeSHA256("a code someone else chose")
			if _, err := h.tink.Resource(WorkflowResource).Namespace(h.ns).Update(context.Background(), unstructuredOf(h.t, &wf, tinkerbell.GroupVersion.WithKind("Workflow")), metav1.UpdateOptions{}); err != nil {
				h.t.Fatal(err)
			}
		}},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			h, dev, _ := fakes.waitingRun(t)
			tc.lose(h)
			time.Sleep(time.Minute)
			d := h.admitStarts(dev)
			const run2 = "provision-node-01-946684860"
			if d.Run != run2 || d.Code != "SECRETCODE0002" {
				t.Fatalf("Admit = %+v; want a new run %s with a new code", d, run2)
			}
			if _, err := h.tink.Resource(WorkflowResource).Namespace("tinkerbell").Get(context.Background(), run1, metav1.GetOptions{}); err == nil {
				t.Errorf("the old run %s still exists", run1)
			}
			if wf := h.workflow(run2); wf.Spec.BootOptions.BootMode != "" || wf.Spec.HardwareMap[ValueInstallCodeSHA256] != CodeSHA256("SECRETCODE0002") {
				t.Errorf("the new run's spec = %+v", wf.Spec)
			}
			h.wantLastRun(1, run2)
			h.wantJournal(1,
				journalLine{1, inventory.JournalInfo, "started Workflow provision-node-01-946684800; Rufio power-cycles the machine so that its next attestation from HookOS receives the install code"},
				journalLine{1, inventory.JournalInfo, "started Workflow provision-node-01-946684860; the machine attested from HookOS at 10.0.0.21; it replaces Workflow provision-node-01-946684800, whose install code fleetd no longer holds"})
			// The machine's next boot before any action gets the same code.
			again, err := h.p.Admit(context.Background(), claimOf(dev))
			if err != nil || again.Run != run2 || again.Code != d.Code {
				t.Errorf("a second attestation = %+v, %v; want run %s's code again", again, err, run2)
			}
			h.wantNoCodeInCluster()
			h.wantNoSecretsLogged()
		})
	}
}

// The loop forgets the code of a run once it ended or is deleted.
func TestCodesForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		devA, devB := worker(1, "node-01"), worker(2, "node-02")
		h := newHarness(t, nil, devA, devB)
		for _, d := range []inventory.Device{devA, devB} {
			h.admit(claimOf(d))
		}
		held := func() int {
			h.p.mu.Lock()
			defer h.p.mu.Unlock()
			return len(h.p.codes)
		}
		h.reconcile()
		if n := held(); n != 2 {
			t.Fatalf("%d codes held while the runs wait, want 2", n)
		}
		h.setStatus(run1, succeeded)
		h.reconcile()
		if n := held(); n != 1 {
			t.Errorf("%d codes held after node-01's run ended, want 1", n)
		}
		time.Sleep(3 * time.Hour) // node-02's run never reports: past the 2 h default
		if pass := h.reconcile(); len(pass.Deleted) != 1 {
			t.Fatalf("pass = %+v", pass)
		}
		if n := held(); n != 0 {
			t.Errorf("%d codes held after node-02's run was deleted, want 0", n)
		}
	})
}

// Replicas: a run another replica started waits for its machine, whose
// attestation reaches this one. With PeerCode, the machine gets the run's
// code from the replica that holds it, and the run is not replaced; a code
// the peer answers that is not the run's is never answered.
func TestAdmitGetsPeerCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, dev, _ := fakes.waitingRun(t)
		holder := h.p
		held, ok := holder.HeldCode(run1)
		if !ok {
			t.Fatal("the replica that started the run holds no code")
		}
		answer := func(_ context.Context, run string) (string, bool) { return holder.HeldCode(run) }
		other := h.another(func(_ *Deps, c *Config) {
			c.PeerCode = func(ctx context.Context, run string) (string, bool) { return answer(ctx, run) }
		})
		d, err := other.Admit(context.Background(), claimOf(dev))
		if err != nil || d.Run != run1 || d.Code != held {
			t.Fatalf("Admit at another replica = %+v, %v; want run %s and the holder's code", d, err, run1)
		}
		if n := h.count(WorkflowResource); n != 1 {
			t.Errorf("%d Workflows, want the one run", n)
		}

		answer = func(context.Context, string) (string, bool) { return "SECRETCODE9999", true }
		time.Sleep(time.Minute)
		d, err = other.Admit(context.Background(), claimOf(dev))
		if err != nil || d.Run == run1 || d.Code == "SECRETCODE9999" || d.Code == held {
			t.Errorf("Admit with a peer's code that is not the run's = %+v, %v; want a new run with a new code", d, err)
		}
		h.wantNoSecretsLogged()
	})
}
