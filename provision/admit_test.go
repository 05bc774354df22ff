package provision

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/bmc"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fleetkit/fleet/inventory"
)

// Plug a machine in: a planned worker attests from HookOS, and its run
// starts with a rendered config held under a fresh code. On the apiserver,
// the objects of the run pass the real CRDs' schema; on netboxtest, NetBox
// takes what fleetd's client writes.
func TestAdmitWorkerStartsRun(t *testing.T) {
	onClusters(t, func(t *testing.T, c cluster) {
		dev := worker(1, "node-01")
		h := c.harness(t, nil, dev)
		d := h.admitStarts(dev)
		run := d.Run
		if d.Code != "SECRETCODE0001" || d.Refusal != nil {
			t.Fatalf("Admit = %+v, want code SECRETCODE0001, and no refusal", d)
		}
		h.wantJournal(1, journalLine{1, inventory.JournalInfo,
			"started Workflow " + run + "; the machine attested from HookOS at 10.0.0.21"})
		got := h.nb.dev(1)
		if got.LastRun != run || got.DesiredAction != "" || got.MAC.String() != "02:00:00:00:00:01" || got.AttestedSwitchPort != 1 {
			t.Errorf("device after the run started: last_run %q, desired_action %q, MAC %s, port %d", got.LastRun, got.DesiredAction, got.MAC, got.AttestedSwitchPort)
		}

		// The Workflow carries the run's values: the code's SHA-256, never the
		// code or the config URL that carries it.
		wf := h.workflow(run)
		want := map[string]string{
			ValueMAC:               "02:00:00:00:00:01",
			ValueInstallDisk:       "/dev/nvme0n1",
			ValueInstallDiskSerial: "DISK-node-01",
			ValueInstallCodeSHA256: sha256Code1, // sha256sum of SECRETCODE0001
			ValueInstallerImage:    "factory.talos.dev/metal-installer/abc:v1.13.9",
		}
		if !maps.Equal(wf.Spec.HardwareMap, want) {
			t.Errorf("template values = %v, want %v", wf.Spec.HardwareMap, want)
		}
		if wf.Spec.TemplateRef != "fleet-provision" || wf.Spec.HardwareRef != "node-01" || wf.Spec.BootOptions.BootMode != "" {
			t.Errorf("Workflow spec = %+v; want template fleet-provision, hardware node-01, no boot job (the machine is in HookOS)", wf.Spec)
		}
		if wf.Labels[LabelDeviceID] != strconv.FormatInt(h.nb.id(1), 10) || wf.Labels[LabelRunKind] != string(RunProvision) {
			t.Errorf("Workflow labels = %v", wf.Labels)
		}

		// The Hardware holds NetBox's facts, and says the machine boots by
		// UEFI (Tinkerbell's controller takes a netboot Job's efiBoot from
		// dhcp.uefi). (The Rufio Machine: TestRufioMachineAtNodeAddress.)
		var hard tinkerbell.Hardware
		h.get(HardwareResource, "node-01", &hard)
		group := bmc.GroupVersion.Group
		wantHW := tinkerbell.HardwareSpec{
			Interfaces: []tinkerbell.Interface{{
				DHCP: &tinkerbell.DHCP{MAC: "02:00:00:00:00:01", Hostname: "node-01", UEFI: true,
					IP: &tinkerbell.IP{Address: "10.0.0.21", Netmask: "255.255.255.0", Gateway: "10.0.0.1", Family: 4}},
				Netboot: &tinkerbell.Netboot{AllowPXE: new(true), AllowWorkflow: new(true)},
			}},
			Disks:  []tinkerbell.Disk{{Device: "/dev/nvme0n1"}},
			BMCRef: &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "Machine", Name: "node-01"},
		}
		if diff := cmp.Diff(wantHW, hard.Spec); diff != "" {
			t.Errorf("Hardware spec (-want +got):\n%s", diff)
		}

		// The token's Secret expires TTL + 4 h after the render, and the held
		// config carries that token.
		secrets := h.secrets()
		if len(secrets) != 1 {
			t.Fatalf("%d Secrets, want one bootstrap token", len(secrets))
		}
		s := secrets[0]
		id, sec := string(s.Data["token-id"]), string(s.Data["token-secret"])
		if s.Name != "bootstrap-token-"+id || s.Type != "bootstrap.kubernetes.io/token" {
			t.Errorf("Secret %s of type %s", s.Name, s.Type)
		}
		expires := runTime(run).Add(time.Hour + 4*time.Hour).Format(time.RFC3339)
		if exp := string(s.Data["expiration"]); exp != expires {
			t.Errorf("expiration = %s, want render time + 1 h TTL + 4 h: %s", exp, expires)
		}
		for k, v := range map[string]string{"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true", "auth-extra-groups": "system:bootstrappers:nodes"} {
			if string(s.Data[k]) != v {
				t.Errorf("Secret %s = %q, want %q", k, s.Data[k], v)
			}
		}
		held := h.configs.held["SECRETCODE0001"]
		if held.node != "node-01" || held.run != run {
			t.Fatalf("held config: node %q run %q", held.node, held.run)
		}
		cfg, err := configloader.NewFromBytes(held.config)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(cfg, attested(dev), id+"."+sec, want[ValueInstallerImage]); err != nil {
			t.Error(err)
		}

		// The audit line, and no secret in any log or journal line.
		recs := h.audit.records("attest.install")
		if len(recs) != 1 || recs[0].Attrs["outcome"] != "provision" || recs[0].Attrs["run"] != run || recs[0].Attrs["node"] != "node-01" {
			t.Errorf("attest.install lines = %v", recs)
		}
		if r := h.audit.records("fleet.render"); len(r) != 1 || r[0].Attrs["token_expires"] != expires {
			t.Errorf("fleet.render lines = %v", r)
		}
		h.wantNoSecretsLogged()
	}, fakes, apiserver, withNetBox)
}

// An attestation that starts no run: the attestation itself is recorded
// (the claimed port, the proven boot), nothing is created, the
// attest.install audit line gives the outcome and the reason, and the
// journal carries the run's line, if any. "The journal says on port N,
// expected M": the run is refused before anything is rendered, and the
// journal carries the check's text; a claim without a switch-port check
// never starts a run either. "The audit line says no provision": a last
// run the owner has not repeated, and nothing journaled. A class with
// secure_boot: required, and a boot that is not Secure Boot on: no
// install code, and each such attestation journaled; a later boot with
// Secure Boot on starts the run. The runbook's spore failure mode ("wipes
// the disk and installs nothing") cannot happen: a control plane is
// refused before any run exists when control-plane support is off (or
// the bundle's CA keys are missing), and the loop does not start it
// either, nor journal it twice. (Each reason, each boot with the policy
// and without it, and the typed refusals: TestPlan.)
func TestAdmitStartsNoRun(t *testing.T) {
	portCheck := func(claimed int, portErr string) func(*Claim) {
		return func(c *Claim) {
			c.Attestation.SwitchPort = claimed
			c.CheckPort = nil
			if portErr != "" {
				c.CheckPort = func(int) error { return errors.New(portErr) }
			}
		}
	}
	cp := func(d *inventory.Device) {
		d.Name, d.Serial, d.InstallDiskSerial = "cp-01", "SER-cp-01", "DISK-cp-01"
		d.Class, d.DesiredAction = ClassControlPlane, inventory.DesiredActionProvision
	}
	cpLine := func(why string) string {
		return "cp-01 is a control plane, and fleetd " + why + ": no run starts, nothing is wiped, and desired_action stays provision"
	}
	// cpWaits checks that the loop does not start the control plane's run.
	cpWaits := func(t *testing.T, h *harness, _ Claim, line *journalLine) {
		h.reconcile()
		h.wantJournal(1, *line)
		h.wantNothingCreated()
		h.wantDesired(1)
	}
	for _, tc := range []struct {
		name    string
		edit    func(*Cluster, *Config)
		dev     func(*inventory.Device)
		claim   func(*Claim)
		outcome Outcome
		reason  string
		line    string // "": none; else a warning, refused lines with the prefix of such
		cause   error  // errors.Is finds it in the refusal
		then    func(t *testing.T, h *harness, c Claim, line *journalLine)
	}{
		{name: "on port 7, expected 1", claim: portCheck(7, "on port 7, expected 1"),
			outcome: Refused, reason: "on port 7, expected 1", line: "refused a run before rendering anything: on port 7, expected 1"},
		{name: "attested no switch port", claim: portCheck(1, "attested no switch port"),
			outcome: Refused, reason: "attested no switch port", line: "refused a run before rendering anything: attested no switch port"},
		{name: "no switch-port check", claim: portCheck(1, ""), outcome: Refused, reason: "no switch-port check was given for the claim",
			line: "refused a run before rendering anything: no switch-port check was given for the claim"},
		{name: "a last run not repeated", dev: func(d *inventory.Device) { d.LastRun = "provision-node-01-1767000000" },
			outcome: NoProvision, reason: "last run provision-node-01-1767000000 is not repeated; set desired_action to provision"},
		{name: "Secure Boot off, the class requires it", edit: requireSecureBoot,
			claim:   func(c *Claim) { c.Attestation.SecureBoot, c.Attestation.PCR7 = inventory.SecureBootOff, pcr7 },
			outcome: NoProvision, reason: "Secure Boot is off", line: "no provision: Secure Boot is off",
			then: func(t *testing.T, h *harness, c Claim, line *journalLine) {
				h.admit(c)
				c.Attestation.SecureBoot = inventory.SecureBootOn
				d := h.admit(c)
				if d.Outcome != Provision || d.Code == "" {
					t.Fatalf("Admit with Secure Boot on = %+v; want the run", d)
				}
				h.wantJournal(1, *line, *line, journalLine{1, inventory.JournalInfo, "started Workflow " + d.Run + "; the machine attested from HookOS at 10.0.0.21"})
				if got := h.nb.dev(1); got.AttestedSecureBoot != inventory.SecureBootOn || got.AttestedPCR7 != pcr7 {
					t.Errorf("attested_secure_boot %q, attested_pcr7 %q after the boot with Secure Boot on", got.AttestedSecureBoot, got.AttestedPCR7)
				}
			}},
		// "The journal says the device lacks a field" and "desired_action
		// stays set": the run waits for the field, once journaled, and starts
		// when NetBox holds it.
		{name: "lacks a field", dev: func(d *inventory.Device) { d.InstallDiskSerial = "" },
			outcome: Refused, reason: "node-01 lacks install_disk_serial", cause: ErrLacks,
			line: "node-01 lacks install_disk_serial: the run waits for install_disk_serial, and desired_action stays provision",
			then: func(t *testing.T, h *harness, _ Claim, line *journalLine) {
				h.wantDesired(1)
				// The loop sees desired_action, still lacking the field: no new line.
				h.reconcile()
				h.wantJournal(1, *line)
				h.wantNothingCreated()
				// terraform applies the entry; the loop starts the run through Rufio.
				h.nb.set(1, func(d *inventory.Device) { d.InstallDiskSerial = "DISK-node-01" })
				h.wantLastRun(1, h.passStarts("provision-node-01-"))
			}},
		{name: "control-plane support off", edit: func(c *Cluster, _ *Config) { c.ControlPlanes = false }, dev: cp,
			outcome: Refused, reason: cpLine("runs without control-plane support (homelab.fleetd.controlPlanes)"),
			line: cpLine("runs without control-plane support (homelab.fleetd.controlPlanes)"), cause: ErrControlPlanesOff, then: cpWaits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onClusters(t, func(t *testing.T, cl cluster) {
				dev := worker(1, "node-01")
				if tc.dev != nil {
					tc.dev(&dev)
				}
				h := cl.harness(t, tc.edit, dev)
				c := claimOf(dev)
				if tc.claim != nil {
					tc.claim(&c)
				}
				d := h.admit(c)
				if d.Outcome != tc.outcome || d.Reason != tc.reason || d.Code != "" || d.Run != "" {
					t.Errorf("Admit = %+v, want %v: %s, with no run and no code", d, tc.outcome, tc.reason)
				}
				if ref := d.Refusal; tc.cause != nil && (!errors.Is(ref, tc.cause) || ref.Node != dev.Name || ref.Error() != d.Reason || ref.Journal() != tc.line) {
					t.Errorf("Refusal = %#v, want cause %v, node %s, its line %q", ref, tc.cause, dev.Name, tc.line)
				}
				var line *journalLine
				if tc.line != "" {
					line = &journalLine{1, inventory.JournalWarning, tc.line}
					h.wantJournal(1, *line)
				} else {
					h.wantJournal(1)
				}
				h.wantNothingCreated()
				outcome := map[Outcome]string{Refused: "refused", NoProvision: "no provision"}[tc.outcome]
				if r := h.audit.records("attest.install"); len(r) != 1 || r[0].Attrs["outcome"] != outcome || r[0].Attrs["reason"] != tc.reason {
					t.Errorf("attest.install = %v", r)
				}
				// The attestation itself is recorded, with the claimed port and
				// the proven boot; no run is.
				a := c.Attestation
				if got := h.nb.dev(1); got.AttestVerdict != "attested" || len(got.MAC) == 0 || got.AttestedSwitchPort != a.SwitchPort ||
					got.AttestedSecureBoot != a.SecureBoot || got.AttestedPCR7 != a.PCR7 || got.LastRun != dev.LastRun {
					t.Errorf("device after Admit: %+v; want the attestation %+v recorded, last_run %q", got, a, dev.LastRun)
				}
				if tc.then != nil {
					tc.then(t, h, c, line)
				}
			}, fakes, withNetBox)
		})
	}
}

// "The attest.install or fleet.render audit line says create <node>'s
// bootstrap token": no code is answered and nothing is created that could
// wipe; the next attestation, once the API answers, starts the run. On the
// fakes the API answers Unauthorized; on the apiserver fleetd's RBAC does
// not let it create Secrets in kube-system, and the server refuses.
func TestAdmitBootstrapTokenFails(t *testing.T) {
	onClusters(t, func(t *testing.T, c cluster) {
		dev := worker(1, "node-01")
		h := c.harness(t, nil, dev)
		refused := func(err error) bool { return err.Error() == "create node-01's bootstrap token: Unauthorized" }
		allow := func() { h.kube.ReactionChain = h.kube.ReactionChain[1:] }
		if c.apiserver() {
			refused, allow = apierrors.IsForbidden, forbidSecrets(t, h)
		} else {
			h.kube.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New(`Unauthorized`)
			})
		}
		d, err := h.p.Admit(context.Background(), claimOf(dev))
		if !errors.Is(err, ErrBootstrapToken) || !refused(err) || d.Code != "" {
			t.Fatalf("Admit = %+v, %v; want ErrBootstrapToken wrapping the API's refusal, and no code", d, err)
		}
		if want := "create node-01's bootstrap token: "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %q, want it to start %q", err, want)
		}
		r := h.audit.records("fleet.render")
		if len(r) != 1 || r[0].Attrs["error"] != err.Error() {
			t.Errorf("fleet.render = %v", r)
		}
		a := h.audit.records("attest.install")
		if len(a) != 1 || a[0].Attrs["error"] != err.Error() || a[0].Attrs["outcome"] != "refused" {
			t.Errorf("attest.install = %v", a)
		}
		allow()
		h.wantNoRun()
		if got := h.nb.dev(1); got.LastRun != "" {
			t.Errorf("last_run = %q after a failed render", got.LastRun)
		}
		if d := h.admit(claimOf(dev)); d.Outcome != Provision {
			t.Fatalf("Admit once the API answers = %+v", d)
		}
	})
}

// Provision a control plane: it waits in HookOS until its owner sets
// desired_action=provision, which makes the loop start a run whose Rufio
// job power-cycles the machine, and the machine's next attestation
// receives the run's code. The rendered SANs, and the class inputs,
// include every control plane.
func TestControlPlaneRunFromDesiredAction(t *testing.T) {
	onClusters(t, func(t *testing.T, c cluster) {
		cp1 := attested(worker(1, "cp-01"))
		cp1.Class, cp1.Status = ClassControlPlane, inventory.StatusActive
		cp1.LastRun = "provision-cp-01-1767000000"
		cp2 := attested(worker(2, "cp-02"))
		cp2.Class = ClassControlPlane
		h := c.harness(t, nil, cp1, cp2)
		if d, err := h.p.Admit(context.Background(), claimOf(cp2)); err != nil || d.Outcome != NoProvision || d.Reason != reasonControlPlane {
			t.Fatalf("Admit before desired_action = %+v, %v", d, err)
		}
		h.nb.set(2, func(d *inventory.Device) { d.DesiredAction = inventory.DesiredActionProvision })
		run := h.passStarts("provision-cp-02-")
		wf := h.workflow(run)
		if wf.Spec.BootOptions.BootMode != tinkerbell.BootModeNetboot {
			t.Errorf("boot mode = %q, want netboot (Tinkerbell's Rufio job power-cycles the machine)", wf.Spec.BootOptions.BootMode)
		}
		if n := h.count(MachineResource); n != 1 {
			t.Errorf("%d Rufio Machines, want one for cp-02", n)
		}
		h.wantJournal(2, journalLine{2, inventory.JournalInfo,
			"started Workflow " + run + "; Rufio power-cycles the machine so that its next attestation from HookOS receives the install code"})
		h.wantLastRun(2, run)
		cfg, err := configloader.NewFromBytes(h.configs.held["SECRETCODE0001"].config)
		if err != nil {
			t.Fatal(err)
		}
		sans := cfg.RawV1Alpha1().ClusterConfig.APIServerConfig.CertSANs
		for _, want := range []string{"10.0.0.21", "10.0.0.22", "api.folly.example"} {
			if !slices.Contains(sans, want) {
				t.Errorf("API server SANs %v lack %s", sans, want)
			}
		}
		out, err := h.p.ClassInputs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if want := "# Control planes: cp-01 10.0.0.21 (active), cp-02 10.0.0.22 (planned)."; !slices.Contains(strings.Split(string(out), "\n"), want) {
			t.Errorf("class inputs:\n%s", out)
		}
		// Another pass starts nothing more.
		if pass := h.reconcile(); len(pass.Started) != 0 {
			t.Errorf("second pass started %v", pass.Started)
		}

		// Rufio booted it into HookOS: the attestation gets the run's code.
		cl := claimOf(cp2)
		cl.From = netip.MustParseAddr("10.0.0.99")
		d := h.admit(cl)
		if d.Outcome != Provision || d.Run != run || d.Code != "SECRETCODE0001" {
			t.Errorf("Admit = %+v, want the waiting run's code", d)
		}
		if got := h.workflow(run).Annotations[annHookOS]; got != "10.0.0.99" {
			t.Errorf("HookOS address = %q", got)
		}
		if n := len(h.secrets()); n != 1 {
			t.Errorf("%d tokens, want one (no second render)", n)
		}
		h.wantNoSecretsLogged()
	}, fakes, withNetBox)
}

func TestNewRefusesMissingInputs(t *testing.T) {
	h := newHarness(t, nil)
	for name, edit := range map[string]func(*Cluster, *Deps){
		"name":     func(c *Cluster, _ *Deps) { c.Name = "" },
		"endpoint": func(c *Cluster, _ *Deps) { c.Endpoint = "" },
		"bundle":   func(c *Cluster, _ *Deps) { c.Bundle = nil },
		"NetBox":   func(_ *Cluster, d *Deps) { d.NetBox = nil },
	} {
		c, d := testCluster(t), h.deps()
		edit(&c, &d)
		if _, err := New(d, c, nil); err == nil {
			t.Errorf("New without %s gave no error", name)
		}
	}
}

// NetBox down: Admit answers an error that matches inventory.ErrUnavailable
// (so that fleetd answers 503) and starts nothing.
func TestAdmitNetBoxDown(t *testing.T) {
	onClusters(t, func(t *testing.T, c cluster) {
		dev := worker(1, "node-01")
		h := c.harness(t, nil, dev)
		h.nb.fail()
		_, err := h.p.Admit(context.Background(), claimOf(dev))
		if !errors.Is(err, inventory.ErrUnavailable) {
			t.Fatalf("Admit error = %v, want ErrUnavailable", err)
		}
		h.wantNothingCreated()
		if _, err := h.p.Reconcile(context.Background()); !errors.Is(err, inventory.ErrUnavailable) {
			t.Errorf("Reconcile error = %v", err)
		}
	}, fakes, withNetBox)
}

// A run that cannot start leaves nothing behind: no code, no Workflow, no
// token, no last_run: a config that cannot be held, a Workflow the
// Kubernetes API refuses after the render, or NetBox failing to take the
// run's start (the Workflow is deleted again, so no run exists that NetBox
// does not know). A bootstrap token whose create the API server carried
// out, while its answer never came (the request's deadline passed), is
// deleted with the run that did not start: no token is left that no
// Workflow names.
//
// A run whose start NetBox takes only in part still starts: its Workflow
// stays, its code is answered, and its last_run is written, and the
// failure is logged once (fleet.journal). NetBox takes the write of a
// run's last_run, but its answer does not come back (the attestation's
// context ended, or the answer was lost): its started line is written,
// rather than a Workflow deleted that NetBox names as last_run, which
// would leave the machine refused ("last run ... is not repeated"). A
// started line written at once that NetBox does not take goes to
// Config.JournalUnwritten, once; without JournalUnwritten the failure is
// logged alone.
func TestAdmitStartFails(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      func(*harness)
		wantErr   func(error) bool // nil: the run starts
		hooked    bool             // Config.JournalUnwritten is set
		journal   []journalLine    // NetBox's
		unwritten []journalLine    // JournalUnwritten's
	}{
		{name: "hold fails", fail: func(h *harness) { h.configs.fail = errors.New("configserve closed") },
			wantErr: func(err error) bool { return err != nil && strings.Contains(err.Error(), "configserve closed") }},
		{name: "Workflow create fails", fail: func(h *harness) {
			h.tink.PrependReactor("create", "workflows", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("the server is currently unable to handle the request")
			})
		}, wantErr: func(err error) bool { return err != nil }},
		{name: "NetBox fails to take the start", fail: func(h *harness) {
			h.tink.PrependReactor("create", "workflows", func(k8stesting.Action) (bool, runtime.Object, error) {
				h.nb.fail() // NetBox goes away right after the Workflow is created
				return false, nil, nil
			})
		}, wantErr: func(err error) bool { return errors.Is(err, inventory.ErrUnavailable) }},
		{name: "token create's answer lost", fail: func(h *harness) {
			h.kube.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if err := h.kube.Tracker().Create(a.GetResource(), a.(k8stesting.CreateAction).GetObject(), a.GetNamespace()); err != nil {
					h.t.Fatal(err)
				}
				return true, nil, context.DeadlineExceeded
			})
		}, wantErr: func(err error) bool { return errors.Is(err, ErrBootstrapToken) }},
		{name: "last_run written, its answer lost", fail: func(h *harness) { h.mem.lostAnswers = 1 }, hooked: true, journal: []journalLine{started1}},
		{name: "started line not taken", fail: func(h *harness) { h.mem.journalDown = 1 }, hooked: true, unwritten: []journalLine{started1}},
		{name: "started line not taken, JournalUnwritten unset", fail: func(h *harness) { h.mem.journalDown = 1 }},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			dev := worker(1, "node-01")
			var unwritten []journalLine
			h := newHarness(t, func(_ *Cluster, c *Config) {
				if tc.hooked {
					c.JournalUnwritten = func(id int64, kind inventory.JournalKind, text string) {
						unwritten = append(unwritten, journalLine{id, kind, text})
					}
				}
			}, dev)
			tc.fail(h)
			d, err := h.p.Admit(context.Background(), claimOf(dev))
			logged := 1 // fleet.journal lines
			switch {
			case tc.wantErr != nil && (!tc.wantErr(err) || d.Code != ""):
				t.Fatalf("Admit = %+v, %v; want the failure and no code", d, err)
			case tc.wantErr != nil:
				h.wantNoRun()
				logged = 0
			case err != nil || d.Run != run1 || d.Code == "":
				t.Fatalf("Admit = %+v, %v; want run %s with its code", d, err, run1)
			case h.count(WorkflowResource) != 1:
				t.Errorf("%d Workflows, want the run's", h.count(WorkflowResource))
			}
			if got := h.nb.dev(1); got.LastRun != d.Run {
				t.Errorf("last_run = %q, want %q", got.LastRun, d.Run)
			}
			h.wantJournal(1, tc.journal...)
			if !slices.Equal(unwritten, tc.unwritten) {
				t.Errorf("JournalUnwritten got %v, want %v", unwritten, tc.unwritten)
			}
			if got := h.audit.records("fleet.journal"); len(got) != logged {
				t.Errorf("fleet.journal lines: %v, want %d", got, logged)
			}
		})
	}
}
