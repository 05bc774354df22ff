package wholemachine

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/meta"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/examples/internal/machinetest"
	"github.com/fleetkit/fleet/internal/imagetest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/inventory"
)

// approvePowerCycle is the runbook's "Approve a machine's EKs" (lines
// 85-106), from a machine whose entry approves no EK to its run, and the
// row "FleetNodeBootedHookOSAfterInstall fires" (line 139) with the config
// it leaves unread, which expires (135) and is then missing (136):
//
//   - the machine attests, its TPM's EKs certified by the local CA of its
//     manufacture: attest: FAILED pending-approval, the agent would start
//     at once (exit 1), nothing is written (40, 87, 118);
//   - another TPM sends a claim with the machine's serial (100);
//   - fleetctl approve prints both claims, each with its own lines, and
//     approves nothing (99, 100); the lines of the claim that matches the
//     evidence (the TPM's EKs, read as a receiving scan would) go into the
//     node's entry, and the apply makes the device hold them (101, 103);
//   - the machine is power-cycled: attest: PASSED, install code written,
//     the run starts and succeeds (104-106);
//   - the firmware netboots HookOS again instead of the disk: the journal
//     line, once, and the series FleetNodeBootedHookOSAfterInstall fires
//     from (139);
//   - the config waits unread for FLEET_CONFIG_TTL (here 20 s) and
//     expires; the installed Talos's fetch then gets 404, journaled as a
//     config fleetd holds none of, with the series of
//     FleetInstallConfigMissing (135, 136).
func approvePowerCycle(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{tink: true, unapproved: true, settings: map[string]string{"FLEET_CONFIG_TTL": "20s"}})
	ctx := t.Context()
	pending := w.lldpLine() + "attest: FAILED pending-approval\nattest: the entry approves no EK\n"
	r, rec := w.attestRun(ctx)
	if r.code != 1 || r.stdout != pending {
		t.Fatalf("hookos-attest: %+v; want exit 1 and %q", r, pending)
	}
	if rec.Attested || rec.Code != "" {
		t.Errorf("the boot record: attested %v, with a code %v; want neither", rec.Attested, rec.Code != "")
	}
	w.wantNothingWritten()

	// Another TPM claims the serial, from the machine's port.
	mine, other := w.m.tpm, w.m.newTPM("tpm-other")
	w.m.tpm = other
	if r, _ := w.attestRun(ctx); r.code != 1 || r.stdout != pending {
		t.Fatalf("hookos-attest with another TPM: %+v; want exit 1 and %q", r, pending)
	}
	w.m.tpm = mine

	// mise run attest:approve <serial>
	code, out := w.fleetctl(ctx, "approve", w.m.cfg.serial)
	evidence, stranger := machinetest.EKs(t, mine), machinetest.EKs(t, other)
	lines := inventory.ApprovalLines(evidence.RSA2048, evidence.ECCP256)
	for _, want := range []string{
		"more than one TPM claims serial " + w.m.cfg.serial + ": 2 claims; compare each with your evidence, and approve none you cannot tie to the machine\n",
		"claim 1 of 2:\n", "claim 2 of 2:\n",
		lines,
		inventory.ApprovalLines(stranger.RSA2048, stranger.ECCP256),
		"A waiting claim proves nothing, because another machine can send one with this serial. Compare it with your evidence; never approve it alone.\n",
		"fleetctl approved nothing: compare each hash with your evidence\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fleetctl approve printed no %q", want)
		}
	}
	if code != 1 {
		t.Errorf("fleetctl approve exited %d, want 1 for more than one claim", code)
	}
	if d := w.f.Device(w.t, node); d.ApprovedEKHash != "" || d.ApprovedEKHashECC != "" {
		t.Errorf("fleetctl approve approved: the device holds %q, %q", d.ApprovedEKHash, d.ApprovedEKHashECC)
	}

	// The lines that match the evidence, into the entry, and the apply.
	w.approveFromClaim(ctx, lines)
	if d := w.f.Device(w.t, node); d.ApprovedEKHash != evidence.RSA2048 || d.ApprovedEKHashECC != evidence.ECCP256 {
		t.Fatalf("after the apply the device holds %q, %q; want the evidence's", d.ApprovedEKHash, d.ApprovedEKHashECC)
	}

	// Power-cycle the machine, so that HookOS attests again.
	w.powerCycle()
	rec = w.attest(ctx)
	wf := w.workflow(ctx)
	w.wantJournal("info: started Workflow " + wf.Name + "; the machine attested from HookOS at " + w.m.addr)
	var verdicts []string
	for _, a := range w.f.Audit("attest.verdict", "") {
		verdicts = append(verdicts, fmt.Sprint(a["verdict"]))
	}
	if want := []string{"pending-approval", "pending-approval", "attested"}; !slices.Equal(verdicts, want) {
		t.Errorf("attest.verdict lines %v, want %v", verdicts, want)
	}
	if end := w.run(ctx, wf); end.Status.State != tinkerbell.WorkflowStateSuccess {
		t.Fatalf("Workflow %s ended %s, want SUCCESS: %s", wf.Name, end.Status.State, machinetest.Progress(end))
	}
	w.wantJournal("success: Workflow " + wf.Name + " ended SUCCESS")
	d := w.f.Device(w.t, node)
	if d.AttestVerdict != "attested" || d.MAC.String() != w.m.mac.String() || d.AttestedEKHash != evidence.RSA2048 || d.AttestedEKHashECC != evidence.ECCP256 {
		t.Errorf("NetBox holds %+v", d)
	}

	// Line 139: PXE before the disk: HookOS boots and attests again.
	w.powerCycle()
	r, _ = w.attestRun(ctx)
	if r.code != 0 || !strings.HasPrefix(r.stdout, w.lldpLine()+"attest: PASSED\n") || strings.Contains(r.stdout, "install code written") {
		t.Errorf("hookos-attest after the run: %+v; want attest: PASSED, exit 0, no install code", r)
	}
	booted := "warning: the node booted HookOS and attested after Workflow " + wf.Name + " succeeded: fix its boot order so the disk comes before PXE, then set desired_action to provision"
	w.wantJournal(booted)
	w.wantMetric(`fleet_node_booted_hookos_after_install_timestamp_seconds{node="`+node+`"}`, 86400)
	// Once per run.
	w.attestRun(ctx)
	if n := countLines(w.f.Journal(w.t, node), booted); n != 1 {
		t.Errorf("the journal says %d times that the node booted HookOS after the run, want once", n)
	}

	// Lines 135 and 136: the config waited unread for its TTL.
	w.f.waitJournal(time.Minute, "info: the Talos config of "+wf.Name+" expired unread")
	if status, _ := w.f.FetchConfig(ctx, t, w.m.dial, w.installed().Meta[uint8(meta.DownloadURLCode)]); status != http.StatusNotFound {
		t.Errorf("the installed Talos's fetch after the TTL: %d, want 404", status)
	}
	w.wantJournal("warning: the node asked for its Talos config, and fleetd holds none for it")
	w.wantMetric(`fleet_install_config_missing_last_timestamp_seconds{node="`+node+`"}`, 1800)
	if d := w.f.Device(w.t, node); d.Status != inventory.StatusPlanned {
		t.Errorf("NetBox holds %s %s, want planned: the node never got its config", node, d.Status)
	}
	w.noSecrets(rec.Code)
}

// replacedTPM is the runbook's line 108 and the row "attest: FAILED with
// ek-hash-mismatch" (line 119): after a board swap the machine's TPM is
// another; its claim is refused with the refused hash in the attest.verdict
// audit line, and nothing is written. The entry then names the new TPM's
// EKs (from the receiving scan), and after the apply and a power cycle the
// machine passes.
func replacedTPM(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{})
	ctx := t.Context()
	old := machinetest.EKs(t, w.m.tpm)
	w.m.tpm = w.m.newTPM("tpm-new")
	swapped := machinetest.EKs(t, w.m.tpm)

	w.wantAttest(ctx, nil, 1, false, w.lldpLine()+"attest: FAILED ek-hash-mismatch\n")
	verdicts := w.f.Audit("attest.verdict", "")
	if len(verdicts) != 1 || verdicts[0]["verdict"] != "ek-hash-mismatch" || verdicts[0]["serial"] != w.m.cfg.serial ||
		(verdicts[0]["refused_ek_hash"] != swapped.RSA2048 && verdicts[0]["refused_ek_hash"] != swapped.ECCP256) {
		t.Errorf("attest.verdict lines %v; want one ek-hash-mismatch refusing a hash of the new TPM (%s, %s)", verdicts, swapped.RSA2048, swapped.ECCP256)
	}
	w.wantNothingWritten()
	if d := w.f.Device(w.t, node); d.ApprovedEKHash != old.RSA2048 {
		t.Errorf("the refusal changed the binding: %q", d.ApprovedEKHash)
	}
	w.wantNoRun()

	// The same change as an approval: the entry names the new EKs.
	w.setApproved(ctx, swapped)
	w.powerCycle()
	w.attest(ctx)
}

// disksSwapped is the runbook's row "<disk> is <name>, but the disk that
// reports <serial> is <other>" (line 122): the slots swapped, so the disk
// at install_disk reports another serial and the other disk the declared
// one. Nothing is wiped.
func disksSwapped(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{tink: true})
	refusedWipe(t, w, func() {
		w.m.setSerial(w.m.install, "DECOY-"+w.m.cfg.diskSerial)
		w.m.setSerial(w.m.decoy, w.m.cfg.diskSerial)
	}, "wipe: "+w.m.install.path+" is "+w.m.install.name()+", but the disk that reports "+w.m.cfg.diskSerial+" is "+w.m.decoy.name(), nil)
}

// twoDisksOneSerial is the runbook's row "more than one disk reports the
// serial" (line 123): the other disk reports the declared serial too.
// Nothing is wiped.
func twoDisksOneSerial(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{tink: true})
	refusedWipe(t, w, func() { w.m.setSerial(w.m.decoy, w.m.cfg.diskSerial) },
		"wipe: more than one disk reports the serial "+w.m.cfg.diskSerial, nil)
}

// installerImageMissing is the runbook's row "wipe: the installer image
// <image> cannot be pulled" (line 131): the class's installer_image names
// an image the registry does not hold. wipe-disk pulls it before it wipes,
// so the disk is unchanged and the run is FAILED at wipe-disk.
func installerImageMissing(t *testing.T, s shared) {
	image := s.img.reg.Ref(imagetest.InstallerRepo, "v0.0.0-missing")
	w := newWorld(t, s, worldConfig{tink: true, installer: image})
	prefix := "wipe: the installer image " + image + " cannot be pulled ("
	refusedWipe(t, w, nil, prefix+"<reason>); nothing wiped", func(l string) bool {
		return strings.HasPrefix(l, prefix) && strings.HasSuffix(l, "); nothing wiped")
	})
}

// fleetdDoesNotAnswer is the runbook's rows "attest: try 5 failed" (line
// 117) and "wipe: this boot did not pass attestation" (line 126): the
// machine got its run's code, reset before its run began, and in its next
// boot fleetd does not answer (nothing listens at its address): after five
// tries HookOS records this boot as not attested and starts the agent,
// and wipe-disk refuses the boot. Nothing is wiped.
func fleetdDoesNotAnswer(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{tink: true})
	refusedWipe(t, w, func() {
		w.powerCycle()
		env := w.hookosEnv()
		env["FLEETD_URL"] = "https://" + net.JoinHostPort(w.m.uplink, strconv.Itoa(machinetest.FreePort(t, w.m.uplink))) + "/attest"
		w.wantAttest(t.Context(), env, 3, false, w.lldpLine()+"attest: try 1 failed\n", "attest: try 5 failed\n")
	}, "wipe: this boot did not pass attestation", nil)
}

// noLLDPFrame is the runbook's row "The journal says attested no switch
// port" (line 125): the switch sends no LLDP frame, so the claim carries
// no port, and fleetd refuses the run.
func noLLDPFrame(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{noLLDP: true})
	w.wantAttest(t.Context(), nil, 0, true, "lldp: ", "\nattest: PASSED\nattest: no provision: refused: attested no switch port\n")
	w.wantJournal("warning: refused a run before rendering anything: attested no switch port")
	w.wantNoRun()
}

// bindingUnauthored is the runbook's row "attest: FAILED with
// ek-binding-unauthored" (line 120): another NetBox user than Terraform's
// edited the binding (in NetBox's UI, say); the machine is refused, the device's journal says
// why, and nothing is written.
func bindingUnauthored(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{})
	d := w.f.Device(w.t, node)
	if err := w.f.NB.EditCustomField(machinetest.UserOperator, d.ID, "approved_ek_hash", strings.Repeat("ab", 32)); err != nil {
		t.Fatal(err)
	}
	w.wantAttest(t.Context(), nil, 1, false, w.lldpLine()+"attest: FAILED ek-binding-unauthored\n")
	w.f.waitJournal(time.Minute, "warning: attest: FAILED ek-binding-unauthored")
	w.wantNothingWritten()
}

// neverReported is the runbook's row "The journal says a Workflow never
// reported its first action within its global timeout" (line 127), and
// "The audit line says no provision" for a last run not repeated (line
// 142): the machine attests and gets its run, and no agent reports (the
// power fails, or the agent dies). The Template's global_timeout is 10 s
// here (fleet's is 3600): fleetd deletes the Workflow once it passed, and
// the machine's next boot starts no run.
func neverReported(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{tink: true})
	ctx := t.Context()
	install := machinetest.Digest(t, w.m.install.path)
	w.setGlobalTimeout(ctx, 10)
	w.attest(ctx)
	wf := w.workflow(ctx)
	w.wantJournal("warning: Workflow " + wf.Name + " never reported its first action within its global timeout (10s); fleetd deleted it, no later boot resumes it, and the disk may be partly wiped or still hold the old install: set desired_action to provision")
	if err := testenv.Until(ctx, time.Minute, func() bool { return len(machinetest.Workflows(ctx, t, w.tink, w.f.NS)) == 0 }); err != nil {
		t.Errorf("Workflow %s is not deleted", wf.Name)
	}

	// The next boot starts no run.
	w.powerCycle()
	noProvision(t, w, "last run "+wf.Name+" is not repeated; set desired_action to provision")
	if machinetest.Digest(t, w.m.install.path) != install {
		t.Error("the install disk changed")
	}
}

// resumedAfterWipe is the runbook's row "install: this run resumed in a new
// boot after wipe-disk" (line 128): the machine resets while the installer
// writes (the slow stand-in, stopped by the reset); the next boot's
// attestation passes without a code (the run is in flight at install), a
// new container engine starts with an empty cache, tink-server serves the
// agent install again, and install refuses: that boot did not wipe the
// disk, which holds the partial install.
func resumedAfterWipe(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{tink: true, installer: s.img.slowInstaller})
	ctx := t.Context()
	w.attest(ctx)
	wf := w.workflow(ctx)
	w.d.StartAgent(t, w.m.mac.String(), w.tb.GRPC())
	w.waitPartial(ctx)

	w.powerCycle()
	w.attest(ctx, "run "+wf.Name+" is in flight at action install")
	end := w.follow(ctx, wf, w.d.StartAgent(t, w.m.mac.String(), w.tb.GRPC()))
	acts := actions(t, end)
	if end.Status.State != tinkerbell.WorkflowStateFailed || acts[0].State != tinkerbell.WorkflowStateSuccess || acts[1].Name != "install" || acts[1].State != tinkerbell.WorkflowStateFailed {
		t.Fatalf("Workflow %s: %s; want FAILED at install after wipe-disk's SUCCESS", wf.Name, machinetest.Progress(end))
	}
	printed(t, w.d, acts[1], "install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision", nil)
	if !w.partial() {
		t.Error("the install disk does not hold the partial install")
	}
	w.wantJournal("warning: Workflow " + wf.Name + " ended FAILED at action install; read its output with journalctl -t hookos HOOKOS_HOST=" + w.m.addr)
}

// installerFailed is the runbook's row "install: failed to perform disk
// operations: disk <install_disk> is not empty, skipping install" (line
// 129): the agent restarts (SIGTERM, as its service manager restarts it)
// while the installer writes; the action is stopped, nothing is reported,
// and the restarted agent, in the same boot, runs install again: the
// installer meets the disk it had started writing and fails as Talos's
// does, and install says so after its last lines.
func installerFailed(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{tink: true, installer: s.img.slowInstaller})
	ctx := t.Context()
	w.attest(ctx)
	wf := w.workflow(ctx)
	first := w.d.StartAgent(t, w.m.mac.String(), w.tb.GRPC())
	w.waitPartial(ctx)
	if err := first.Stop(); err != nil {
		t.Errorf("the agent's restart: %v", err)
	}
	end := w.follow(ctx, wf, w.d.StartAgent(t, w.m.mac.String(), w.tb.GRPC()))
	acts := actions(t, end)
	if end.Status.State != tinkerbell.WorkflowStateFailed || acts[1].Name != "install" || acts[1].State != tinkerbell.WorkflowStateFailed {
		t.Fatalf("Workflow %s: %s; want FAILED at install", wf.Name, machinetest.Progress(end))
	}
	failed := "install: the installer failed; the lines above are its last output"
	lines := printed(t, w.d, acts[1], failed, nil)
	notEmpty := "install: failed to perform disk operations: disk " + w.m.install.path + " is not empty, skipping install"
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, notEmpty) })
	if i < 0 || !slices.Contains(lines[i:], failed) {
		t.Errorf("install printed no %q then %q; it printed:\n%s", notEmpty, failed, indent(strings.Join(lines, "\n")))
	}
	if !w.partial() {
		t.Error("the install disk does not hold the partial install")
	}
	w.wantJournal("warning: Workflow " + wf.Name + " ended FAILED at action install; read its output with journalctl -t hookos HOOKOS_HOST=" + w.m.addr)
}

// globalTimeout is the Template's global_timeout in passedGlobalTimeout:
// longer than wipe-disk and install take on loaded cores, which must end
// within it.
const globalTimeout = 45

// passedGlobalTimeout is the runbook's row "The node is active, and the
// journal says its Workflow passed its global timeout while install,
// next-boot or reboot was current" (line 133): the power fails after the
// install, as the agent pulls next-boot's image (the registry holds the
// pull), so the run's last reports are lost; the node boots its install,
// fetches its config and is active; once the run's global timeout
// (globalTimeout, from the Template) has passed, tink-controller ends it
// TIMEOUT, and fleetd says there is nothing to do.
func passedGlobalTimeout(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{tink: true})
	ctx := t.Context()
	w.setGlobalTimeout(ctx, globalTimeout)
	release := s.img.reg.Hold(t, "fleet/next-boot")
	w.attest(ctx)
	wf := w.workflow(ctx)
	agent := w.d.StartAgent(t, w.m.mac.String(), w.tb.GRPC())
	now := w.waitCurrent(ctx, "next-boot", tinkerbell.WorkflowStatePending, tinkerbell.WorkflowStateRunning)
	if acts := actions(t, now); acts[1].State != tinkerbell.WorkflowStateSuccess {
		t.Fatalf("next-boot is current before install succeeded: %s", machinetest.Progress(now))
	}
	if err := agent.Kill(); err != nil {
		t.Fatal(err)
	}
	release()
	w.d.Stop(t)

	// The node boots its install and fetches its config.
	if status, _ := w.f.FetchConfig(ctx, t, w.m.dial, w.installed().Meta[uint8(meta.DownloadURLCode)]); status != http.StatusOK {
		t.Fatalf("the installed Talos's fetch: %d, want 200", status)
	}
	if err := testenv.Until(ctx, time.Minute, func() bool { return w.f.Device(w.t, node).Status == inventory.StatusActive }); err != nil {
		t.Fatalf("NetBox holds %s %s, want active", node, w.f.Device(w.t, node).Status)
	}
	line := "info: Workflow " + wf.Name + " passed its global timeout while next-boot was current; the node is active, so it has its config, and nothing else is done"
	w.f.waitJournal(2*globalTimeout*time.Second+time.Minute, "info: Workflow "+wf.Name+" passed its global timeout")
	w.wantJournal(line)
	// fleetd ends the run at the stop Tinkerbell set (or would have set);
	// tink-controller sets TIMEOUT at its next reconcile of the
	// Workflow, which may come later on a loaded machine.
	var end tinkerbell.Workflow
	var err error
	_ = testenv.Until(ctx, 2*time.Minute, func() bool {
		end, err = machinetest.GetWorkflow(ctx, w.tink, w.f.NS, wf.Name)
		return err != nil || end.Status.State == tinkerbell.WorkflowStateTimeout || end.Status.GlobalExecutionStop == nil
	})
	switch {
	case err != nil || end.Status.GlobalTimeout != globalTimeout:
		t.Errorf("Workflow %s: %s, globalTimeout %d (%v); want %d s", wf.Name, machinetest.Progress(end), end.Status.GlobalTimeout, err, globalTimeout)
	case end.Status.GlobalExecutionStop == nil && end.Status.State == tinkerbell.WorkflowStateRunning:
		// tink-controller sets the stop only while the first action is
		// current; an agent that fetched install before the controller
		// saw wipe-disk's end leaves a run it never times out, which
		// fleetd ended itself at the same stop (the line above).
		t.Logf("Workflow %s: Tinkerbell set no globalExecutionStop and keeps it RUNNING; fleetd ended it at its first action's start plus %d s", wf.Name, globalTimeout)
	case end.Status.State != tinkerbell.WorkflowStateTimeout:
		t.Errorf("Workflow %s: %s; want TIMEOUT after %d s", wf.Name, machinetest.Progress(end), globalTimeout)
	}
}

// refusedWipe runs a Workflow whose wipe-disk refuses: the machine
// attests, change (when not nil) changes it, and the agent runs the
// Workflow to FAILED at wipe-disk with Tinkerbell's message "action
// completed" and every later action PENDING, wipe-disk having printed
// line and the installer not pulled, or, with match, a line match accepts
// (line describes it: the installer's pull failed), and both disks
// unchanged; the journal names the action and where its output is (line
// 130), and the device stays planned.
func refusedWipe(t *testing.T, w *world, change func(), line string, match func(string) bool) {
	t.Helper()
	ctx := t.Context()
	install, decoy := machinetest.Digest(t, w.m.install.path), machinetest.Digest(t, w.m.decoy.path)
	before := w.s.img.pulls()
	w.attest(ctx)
	wf := w.workflow(ctx)
	if change != nil {
		change()
	}
	end := w.run(ctx, wf)
	if end.Status.State != tinkerbell.WorkflowStateFailed {
		t.Fatalf("Workflow %s ended %s, want FAILED: %s", wf.Name, end.Status.State, machinetest.Progress(end))
	}
	acts := actions(t, end)
	// Tinkerbell's message for a failed action says only that it
	// completed; the reason is the action's output (the runbook's row for
	// a Workflow that ended FAILED).
	if a := acts[0]; a.Name != "wipe-disk" || a.State != tinkerbell.WorkflowStateFailed || a.Message != "action completed" {
		t.Errorf("the first action: %s %s %q, want wipe-disk FAILED \"action completed\"", a.Name, a.State, a.Message)
	} else {
		printed(t, w.d, a, line, match)
	}
	for _, a := range acts[1:] {
		if a.State != tinkerbell.WorkflowStatePending {
			t.Errorf("action %s: %s, want PENDING: it follows a failed action", a.Name, a.State)
		}
	}
	if match == nil {
		if n := w.s.img.pulls()[imagetest.InstallerRepo] - before[imagetest.InstallerRepo]; n != 0 {
			t.Errorf("the registry served %d pulls of the installer, want none: wipe-disk judges the machine before it pulls", n)
		}
	}
	if machinetest.Digest(t, w.m.install.path) != install || machinetest.Digest(t, w.m.decoy.path) != decoy {
		t.Error("a disk changed")
	}
	w.wantJournal("warning: Workflow " + wf.Name + " ended FAILED at action wipe-disk; read its output with journalctl -t hookos HOOKOS_HOST=" + w.m.addr)
	if s := w.f.Device(w.t, node).Status; s != inventory.StatusPlanned {
		t.Errorf("NetBox holds %s %s, want planned", node, s)
	}
}

// waitPartial waits until the slow stand-in installer has written its
// partition table to the install disk, and install is the current action.
func (w *world) waitPartial(ctx context.Context) {
	w.t.Helper()
	w.waitCurrent(ctx, "install", tinkerbell.WorkflowStateRunning)
	if err := testenv.Until(ctx, stall, w.partial); err != nil {
		w.t.Fatalf("the installer wrote no partition table to the install disk within %v", stall)
	}
}

// setApproved writes binding as the node's approved EKs in the nodes file
// and applies it, as the runbook's change of a node's entry does.
func (w *world) setApproved(ctx context.Context, b attest.Binding) {
	w.t.Helper()
	nodes, err := os.ReadFile(w.nodes)
	if err != nil {
		w.t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^    approved_ek_(rsa2048|eccp256): .*\n`)
	w.t.Logf("the entry's approved EKs become %s, %s", b.RSA2048, b.ECCP256)
	if err := os.WriteFile(w.nodes, re.ReplaceAll(nodes, nil), 0o644); err != nil {
		w.t.Fatal(err)
	}
	w.approveFromClaim(ctx, inventory.ApprovalLines(b.RSA2048, b.ECCP256))
}

// wantMetric wants fleetd to export series, a timestamp within window
// seconds of now: the alert of fleet.rules.yaml on it fires.
func (w *world) wantMetric(series string, window float64) {
	w.t.Helper()
	var v float64
	err := testenv.Until(w.t.Context(), time.Minute, func() bool {
		for l := range strings.Lines(w.f.scrape()) {
			if rest, ok := strings.CutPrefix(l, series+" "); ok {
				var err error
				v, err = strconv.ParseFloat(strings.TrimSpace(rest), 64)
				return err == nil
			}
		}
		return false
	})
	if err != nil {
		w.t.Errorf("fleetd exports no %s", series)
		return
	}
	if age := float64(time.Now().Unix()) - v; age < -5 || age >= window {
		w.t.Errorf("%s is %v, %v s ago; its alert fires within %v s", series, v, age, window)
	}
}

// countLines returns how many of lines equal line.
func countLines(lines []string, line string) int {
	n := 0
	for _, l := range lines {
		if l == line {
			n++
		}
	}
	return n
}

// grep returns the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, strings.TrimSuffix(l, "\n"))
		}
	}
	return strings.Join(out, "\n")
}

// noProvision attests the world's machine and wants attest: PASSED and
// fleetd's answer "no provision: <why>" on the console, no install code,
// the attest.install audit line of the same reason, and no run.
func noProvision(t *testing.T, w *world, why string) {
	t.Helper()
	w.attest(t.Context(), why)
	if !slices.ContainsFunc(w.f.Audit("attest.install", ""), func(a map[string]any) bool {
		return a["outcome"] == "no provision" && a["reason"] == why
	}) {
		t.Errorf("no attest.install audit line says no provision: %s", why)
	}
	w.wantNoRun()
}

// autoProvisionOff is the runbook's row "The audit line says no
// provision" (line 142) for auto-provision off (FLEET_AUTO_PROVISION=false).
func autoProvisionOff(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{settings: map[string]string{"FLEET_AUTO_PROVISION": "false"}})
	noProvision(t, w, "auto-provision is off")
}

// controlPlaneWaits is the runbook's line 59, "An admitted control plane
// waits in HookOS after attestation", and the row "no provision" for a
// control plane (line 142), with fleetd's control-plane support on.
func controlPlaneWaits(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{class: "controlplane", settings: map[string]string{"FLEET_CONTROL_PLANES": "true"}})
	noProvision(t, w, "a control plane waits for desired_action=provision")
}

// controlPlanesOff is the runbook's line 55, where fleet is safer than the
// runbook says: without homelab.fleetd.controlPlanes (FLEET_CONTROL_PLANES
// unset) a control plane gets no run at all, and nothing is wiped.
func controlPlanesOff(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{class: "controlplane"})
	noProvision(t, w, "a control plane waits, and fleetd runs without control-plane support (homelab.fleetd.controlPlanes): no run starts, nothing is wiped, even with desired_action=provision")
}

// firstControlPlane is the runbook's line 53: the cluster's first control
// plane, at API_SERVER_IP, never installs this way: even with
// desired_action=provision, as the control-plane steps set it, fleetd
// refuses its run before rendering anything.
func firstControlPlane(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{class: "controlplane", firstCP: true, settings: map[string]string{"FLEET_CONTROL_PLANES": "true"}})
	op, err := inventory.NewNetBox(w.f.NB.URL, w.f.NB.Token(machinetest.UserOperator), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.SetDesiredAction(t.Context(), w.f.Device(w.t, node).ID, inventory.DesiredActionProvision); err != nil {
		t.Fatal(err)
	}
	why := "refused a run before rendering anything: " + node + " is at API_SERVER_IP " + w.m.addr + ": the cluster's first control plane, which the Talos root bootstraps, never installs this way; no run starts, nothing is wiped"
	w.attest(t.Context(), "refused: "+why)
	w.wantJournal("warning: " + why)
	if n := countLines(w.f.Journal(w.t, node), "warning: "+why); n != 1 {
		t.Errorf("the refusal is journaled %d times, want once", n)
	}
	w.wantNoRun()
}

// lacksDiskSerial is the runbook's rows "The journal says the device lacks
// a field" (line 116) and "desired_action stays set ... the run waits for
// install_disk_serial" (line 121): the device holds no install_disk_serial,
// as before an apply of an entry with disk_serial.
func lacksDiskSerial(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{})
	if err := w.f.NB.EditCustomField(machinetest.UserTerraform, w.f.Device(w.t, node).ID, "install_disk_serial", nil); err != nil {
		t.Fatal(err)
	}
	w.wantAttest(t.Context(), nil, 0, true, w.lldpLine()+"attest: PASSED\n")
	w.wantJournal("warning: " + node + " lacks install_disk_serial: the run waits for install_disk_serial, and desired_action stays provision")
	w.wantNoRun()
}

// unknownSerial is the runbook's line 87, "So does a serial no entry
// names": the machine's SMBIOS serial is one no node's entry names, so its
// claim waits as pending-approval, and nothing is written.
func unknownSerial(t *testing.T, s shared) {
	w := newWorld(t, s, worldConfig{})
	w.m.cfg.serial = "SN-NO-ENTRY-" + strings.ToUpper(rand.Text()[:6])
	w.m.smbios()
	w.wantAttest(t.Context(), nil, 1, false, w.lldpLine()+"attest: FAILED pending-approval\n")
	if v := w.f.Audit("attest.verdict", ""); len(v) != 1 || v[0]["verdict"] != "pending-approval" || v[0]["serial"] != w.m.cfg.serial {
		t.Errorf("attest.verdict lines %v, want one pending-approval of %s", v, w.m.cfg.serial)
	}
	w.wantNothingWritten()
}
