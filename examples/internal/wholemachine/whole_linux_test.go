package wholemachine

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/meta"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/examples/internal/machinetest"
	"github.com/fleetkit/fleet/internal/imagetest"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// The node every world declares: a worker on switch port 7.
const (
	node         = "w-01"
	declaredPort = 7
)

// wholeMachineCases are the runbook's lines and rows that
// TestIntegrationWholeMachine runs, each on a machine of its own, by its
// subtest's name (docs/runbook-coverage.md names them). The numbers are
// the runbook's lines.
var wholeMachineCases = []struct {
	name     string
	run      func(*testing.T, shared)
	parallel bool // it runs no Workflow: it runs beside the others of its kind, after the rest
}{
	{"provision", provisionANode, false},                      // 40, 43, 45, 79, 83, 134, 137, 138
	{"approve-then-power-cycle", approvePowerCycle, false},    // 40, 87, 99-106, 118, 135, 136, 139
	{"replaced-tpm", replacedTPM, true},                       // 108, 118, 119
	{"disk-serial-changed", diskSerialChanged, false},         // 122, 130
	{"disks-swapped", disksSwapped, false},                    // 122
	{"two-disks-report-the-serial", twoDisksOneSerial, false}, // 123
	{"fleetd-does-not-answer", fleetdDoesNotAnswer, false},    // 117, 126
	{"no-lldp-frame", noLLDPFrame, true},                      // 125
	{"binding-unauthored", bindingUnauthored, true},           // 120
	{"never-reported", neverReported, false},                  // 127, 142
	{"resumed-after-wipe-disk", resumedAfterWipe, false},      // 128
	{"installer-met-its-own-writes", installerFailed, false},  // 129
	{"installer-image-missing", installerImageMissing, false}, // 131
	{"passed-global-timeout", passedGlobalTimeout, false},     // 133
	{"auto-provision-off", autoProvisionOff, true},            // 142
	{"control-plane-waits", controlPlaneWaits, true},          // 59, 142
	{"control-planes-off", controlPlanesOff, true},            // 55
	{"first-control-plane", firstControlPlane, true},          // 53
	{"lacks-install-disk-serial", lacksDiskSerial, true},      // 116, 121
	{"serial-no-entry-names", unknownSerial, true},            // 87
}

// TestIntegrationWholeMachine provisions machines of real parts (see the
// package doc) through fleetd and the real Tinkerbell, one per case of
// the runbook: "Plug a machine in" and "Approve a machine's EKs", and the
// machine's rows of "If something goes wrong", each asserting the
// runbook's words on the console, in the journal, in fleetd's audit lines,
// in its metrics and in NetBox. The control plane, the programs and the
// images are built and started once and shared; each case has its own
// machine (network, switch, TPM, disks), NetBox, fleetd, namespace,
// Tinkerbell and container engine.
func TestIntegrationWholeMachine(t *testing.T) {
	tl := needTools(t)
	// 2 to 10.5 min measured (BENCHMARKS.md).
	testenv.Time(t, 12*time.Minute, "./examples/internal/wholemachine")
	env := kubetest.Start(t)
	// The programs a user deploys; the actions are images (see images).
	bins := machinetest.BuildAll(t, machinetest.Build{Module: ".", Args: []string{"./examples/fleetd", "./examples/hookos-attest", "./examples/fleetctl"}})
	img := buildImages(t)
	s := shared{tl: tl, env: env, bins: bins, img: img}
	for _, c := range wholeMachineCases {
		t.Run(c.name, func(t *testing.T) {
			if c.parallel {
				t.Parallel()
			}
			t0 := time.Now()
			c.run(t, s)
			t.Logf("case %s: %v", c.name, time.Since(t0).Round(10*time.Millisecond))
		})
	}
}

// provisionANode is the runbook's "Plug a machine in" and "Watch the run"
// (lines 40-45, 79, 83) for a worker, to its node active in NetBox, with
// the rows of its config on the way: a fetch while NetBox does not answer
// gets 503 and the config stays (134), a fetch whose answer the node never
// acknowledges is journaled with the peer's address and the config stays
// (138), and a second fetch of the spent code is journaled and counted for
// FleetInstallConfigRefetched (137).
func provisionANode(t *testing.T, s shared) {
	t0 := time.Now()
	w := newWorld(t, s, worldConfig{tink: true, settings: map[string]string{"FLEET_CONFIG_WRITE_TIMEOUT": "2s"}})
	ctx := t.Context()
	decoy := machinetest.Digest(t, w.m.decoy.path)
	before := s.img.pulls()

	// Line 33: the planned device, before the machine's first boot.
	d := w.f.Device(w.t, node)
	if d.Status != inventory.StatusPlanned || d.Serial != w.m.cfg.serial || d.InstallDiskSerial != w.m.cfg.diskSerial ||
		d.ApprovedEKHash == "" || d.ApprovedEKHashECC == "" || len(d.MAC) != 0 || d.SwitchPort != declaredPort {
		t.Errorf("before the first boot NetBox holds %+v, want a planned device with the serial, install disk serial, approved EKs and cable, and no MAC", d)
	}

	rec := w.attest(ctx)
	wf := w.workflow(ctx)
	end := w.run(ctx, wf)
	if end.Status.State != tinkerbell.WorkflowStateSuccess {
		t.Fatalf("Workflow %s ended %s, want SUCCESS: %s", wf.Name, end.Status.State, machinetest.Progress(end))
	}
	// tink-controller took the global timeout from the Template: the
	// figure fleetd's watch reads for a run that never reports.
	if end.Status.GlobalTimeout != 3600 {
		t.Errorf("the Workflow's globalTimeout is %d, want the Template's 3600", end.Status.GlobalTimeout)
	}
	disk := w.m.install.path
	want := map[string]string{
		"wipe-disk": "wipe: " + disk + " reports the serial " + w.m.cfg.diskSerial,
		"install":   "install: installed Talos to " + disk,
		// The machine has no UEFI firmware (see the package doc).
		"next-boot": "next-boot: this machine booted by legacy BIOS, which has no BootNext; its boot order decides what boots next, and nothing was changed",
		"reboot":    `waitdaemon: a stand-in: would run "reboot" in alpine after 10 s; the test reboots the machine instead`,
	}
	acts := actions(t, end)
	var names []string
	for _, a := range acts {
		names = append(names, a.Name)
		if a.State != tinkerbell.WorkflowStateSuccess {
			t.Errorf("action %s: %s %q, want SUCCESS", a.Name, a.State, a.Message)
		}
		if line, ok := want[a.Name]; ok {
			printed(t, w.d, a, line, nil)
		}
	}
	if !slices.Equal(names, []string{"wipe-disk", "install", "next-boot", "reboot"}) {
		t.Fatalf("the Workflow's actions are %v, want wipe-disk, install, next-boot and reboot", names)
	}
	// Each image was pulled from the registry by the machine's dockerd:
	// the actions' by the agent, the installer's once, by wipe-disk
	// (install runs it from the machine's cache).
	after := s.img.pulls()
	for _, repo := range repos {
		if after[repo] == before[repo] {
			t.Errorf("the registry served no pull of %s", repo)
		}
	}
	if n := after[imagetest.InstallerRepo] - before[imagetest.InstallerRepo]; n != 1 {
		t.Errorf("the registry served %d pulls of the installer, want 1", n)
	}

	// The machine reboots into the installed Talos (the stand-in's
	// layout): its code is the one its META holds, as the install action
	// gave it to the installer.
	in := w.installed()
	if in.Image != s.img.installer {
		t.Errorf("the install disk holds image %q, want %s", in.Image, s.img.installer)
	}
	code := in.Meta[uint8(meta.DownloadURLCode)]
	if code == "" || code != rec.Code {
		t.Fatalf("META's install code is not the one this boot received (META holds %d values)", len(in.Meta))
	}

	// Line 134: NetBox does not answer fleetd: the node's fetch gets 503,
	// and the config stays for its next try.
	w.f.NB.Inject(netboxtest.Fault{Kind: netboxtest.Failing, User: machinetest.UserFleetd})
	status, _ := w.f.FetchConfig(ctx, t, w.m.dial, code)
	w.f.NB.Inject(netboxtest.Fault{})
	if status != http.StatusServiceUnavailable {
		t.Errorf("the fetch while NetBox does not answer: %d, want 503", status)
	}

	// Line 138: the node's fetch whose answer it never takes whole: once
	// FLEET_CONFIG_WRITE_TIMEOUT (2 s here) has passed, the journal names
	// the run and the node's address and port, and the config stays.
	peer := w.fetchUnread(ctx, code)
	if !strings.HasPrefix(peer, w.m.addr+":") {
		t.Errorf("the unread fetch went from %s, want the node's address %s", peer, w.m.addr)
	}
	w.wantJournal("warning: the peer did not acknowledge all of it: the config of " + wf.Name + " went to " + peer + "; it stays for the next fetch")
	if s := w.f.Device(w.t, node).Status; s != inventory.StatusPlanned {
		t.Errorf("NetBox holds %s %s after the unread fetch, want planned", node, s)
	}

	status, body := w.f.FetchConfig(ctx, t, w.m.dial, code)
	if status != http.StatusOK || !strings.Contains(body, "machine:") {
		t.Fatalf("the node's fetch of the config: %d, %d bytes; want 200 and a machine config", status, len(body))
	}
	// Line 43: the config sets the node's address statically, and its
	// install disk by serial.
	if !strings.Contains(body, w.m.addr) || !strings.Contains(body, w.m.cfg.diskSerial) {
		t.Errorf("the config does not set the node's address %s and install disk serial %s", w.m.addr, w.m.cfg.diskSerial)
	}
	if err := testenv.Until(ctx, time.Minute, func() bool { return w.f.Device(w.t, node).Status == inventory.StatusActive }); err != nil {
		t.Errorf("NetBox holds %s %s, want active", node, w.f.Device(w.t, node).Status)
	}
	t.Logf("the whole machine: from its parts' start to its node active, %v", time.Since(t0).Round(10*time.Millisecond))
	// Line 137: the node asks again for the config it was served.
	if status, _ := w.f.FetchConfig(ctx, t, w.m.dial, code); status != http.StatusGone {
		t.Errorf("the second fetch of the config: %d, want 410", status)
	}

	// The journal of the runbook's happy path: the run started, with the
	// note that the machine attested from HookOS, then the config served
	// (and, for the second fetch, the runbook's
	// FleetInstallConfigRefetched line) and the run's end, which fleetd
	// journals as it learns them.
	refetched := "warning: the node asked again for the Talos config fleetd served it"
	journal := w.f.waitJournal(2*time.Minute, "success: Workflow "+wf.Name+" ended SUCCESS", "success: fleetd served the config of "+wf.Name, refetched)
	started := "info: started Workflow " + wf.Name + "; the machine attested from HookOS at " + w.m.addr
	for _, want := range [][]string{
		{started, "success: fleetd served the config of " + wf.Name, refetched},
		{started, "success: Workflow " + wf.Name + " ended SUCCESS"},
	} {
		if !machinetest.InOrder(journal, want) {
			t.Errorf("journal of %s:\n%s\nwant lines beginning, in order:\n%s", node, strings.Join(journal, "\n"), strings.Join(want, "\n"))
		}
	}
	t.Logf("journal of %s:\n%s", node, strings.Join(journal, "\n"))
	d = w.f.Device(w.t, node)
	if d.MAC.String() != w.m.mac.String() || d.AttestVerdict != "attested" || d.AttestedSwitchPort != declaredPort || d.LastRun != wf.Name {
		t.Errorf("NetBox holds %+v", d)
	}
	// FleetInstallConfigRefetched fires from this series, and the unread
	// answer is counted.
	w.wantMetric(`fleet_install_config_refetched_last_timestamp_seconds{node="`+node+`"}`, 1800)
	if m := w.f.scrape(); !strings.Contains(m, `fleet_install_config_events_total{event="not-acknowledged"} 1`) {
		t.Errorf("fleetd counts no unacknowledged answer:\n%s", grep(m, "fleet_install_config_events_total"))
	}
	if machinetest.Digest(t, w.m.decoy.path) != decoy {
		t.Error("the decoy disk changed")
	}
	w.noSecrets(code)
}

// diskSerialChanged is the runbook's row "wipe: no disk reports the
// serial" (line 122), and "a Workflow ended FAILED" (line 130): another
// disk takes the install disk's slot after the attestation, and wipe-disk
// refuses before it pulls or wipes anything.
func diskSerialChanged(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{tink: true})
	// Another disk in the install disk's slot: it reports another serial.
	refusedWipe(t, w, func() { w.m.setSerial(w.m.install, "S3Z9NB0K999999X") },
		"wipe: no disk reports the serial "+w.m.cfg.diskSerial, nil)
}
