package sim

import (
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/provision"
)

// measuredTPM is a SoftTPM whose PCRs hold a UEFI boot with Secure Boot on
// or off, and the event log of that boot, which HookOS sends.
func measuredTPM(t *testing.T, secureBoot bool) (*attesttest.SoftTPM, *attesttest.BootLog) {
	t.Helper()
	tpm, err := attesttest.NewSoftTPM(nil)
	if err != nil {
		t.Fatal(err)
	}
	log, err := attesttest.SecureBootLog(&attesttest.SecureBootConfig{Enabled: secureBoot})
	if err != nil {
		t.Fatal(err)
	}
	tpm.Measure(log)
	return tpm, log
}

// A class with secure_boot: required: a machine whose quoted boot has
// Secure Boot off attests, and NetBox records its boot, but it gets no
// install code; the console, the device's journal and the attest.install
// audit line say why, and nothing is rendered. A machine of the class
// whose boot has Secure Boot on provisions.
func TestSecureBootRequired(t *testing.T) {
	offTPM, offLog := measuredTPM(t, false)
	onTPM, onLog := measuredTPM(t, true)
	f := newTestFleet(t, nil,
		testNode{name: "w-01", class: "secure-worker", approve: true, tpm: offTPM},
		testNode{name: "w-02", class: "secure-worker", approve: true, tpm: onTPM})
	f.machines["w-01"].eventLog = offLog.Bytes()
	f.machines["w-02"].eventLog = onLog.Bytes()
	f.startTinkerbell()
	f.powerOn("w-01", "w-02")

	res, console := f.attestation("w-01", 1)
	if res.Verdict != attest.Attested || res.InstallCode != "" || res.Reason != "no provision: Secure Boot is off" {
		t.Fatalf("w-01's attestation = %+v, want attested with no code: no provision: Secure Boot is off", res)
	}
	if want := []string{"attest: PASSED", "attest: no provision: Secure Boot is off"}; !slices.Equal(console, want) {
		t.Errorf("w-01's console = %q, want %q", console, want)
	}
	f.waitJournal("w-01", "warning: no provision: Secure Boot is off")
	var install map[string]any
	for _, l := range f.auditLines("attest.install") {
		if l["serial"] == "SN-w-01" {
			install = l
		}
	}
	if install["outcome"] != "no provision" || install["reason"] != "Secure Boot is off" || install["node"] != "w-01" {
		t.Errorf("w-01's attest.install = %v", install)
	}
	for _, l := range f.auditLines("attest.verdict") {
		if l["serial"] == "SN-w-01" && (l["secure_boot"] != "off" || l["pcr7"] != hex.EncodeToString(offLog.PCRs()[7])) {
			t.Errorf("w-01's attest.verdict = %v", l)
		}
	}
	d := f.readDevice("w-01")
	if d.AttestVerdict != "attested" || d.AttestedSecureBoot != inventory.SecureBootOff || d.AttestedPCR7 != hex.EncodeToString(offLog.PCRs()[7]) || d.LastRun != "" {
		t.Errorf("NetBox holds w-01 with verdict %q, attested_secure_boot %q, attested_pcr7 %q, last_run %q", d.AttestVerdict, d.AttestedSecureBoot, d.AttestedPCR7, d.LastRun)
	}

	// The machine with Secure Boot on provisions.
	if res := f.attested("w-02"); res.Verdict != attest.Attested || res.InstallCode == "" {
		t.Fatalf("w-02's attestation = %+v, want attested with a code", res)
	}
	d2 := f.provisioned("w-02", nodeAddr(1))
	if d2.AttestedSecureBoot != inventory.SecureBootOn || d2.AttestedPCR7 != hex.EncodeToString(onLog.PCRs()[7]) {
		t.Errorf("NetBox holds w-02 with attested_secure_boot %q, attested_pcr7 %q", d2.AttestedSecureBoot, d2.AttestedPCR7)
	}

	// Nothing was rendered for w-01: no Workflow, no bootstrap token.
	for _, wf := range f.list(provision.WorkflowResource) {
		if strings.HasPrefix(wf.GetName(), "provision-w-01-") {
			t.Errorf("Workflow %s exists for w-01", wf.GetName())
		}
	}
	if renders := slices.DeleteFunc(f.auditLines("fleet.render"), func(l map[string]any) bool { return l["node"] != "w-01" }); len(renders) != 0 {
		t.Errorf("%d renders for w-01, want none", len(renders))
	}
	if lines := f.journalOf("w-01"); len(lines) != 1 {
		t.Errorf("w-01's journal = %q, want the one line", lines)
	}
	f.wantNoSecrets()
}
