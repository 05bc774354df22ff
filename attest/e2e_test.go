//go:build cgo

package attest_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// hashesOf returns the EK hashes of the simulator with seed.
func hashesOf(t *testing.T, seed int64) attest.Binding {
	t.Helper()
	d := attesttest.NewSimulatorDevice(t, seed)
	b := approve(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEKHashVector(t *testing.T) {
	b := hashesOf(t, 0)
	if b.RSA2048 != attesttest.RSASeed0Hash {
		t.Errorf("RSA EK hash of the simulator with seed 0 = %s, want %s", b.RSA2048, attesttest.RSASeed0Hash)
	}
	if !attest.ValidHash(b.ECCP256) {
		t.Errorf("ECC EK hash %q is not 64 lowercase hex", b.ECCP256)
	}
	again := hashesOf(t, 0)
	if again != b {
		t.Errorf("seed 0 gave other EKs the second time: %+v, then %+v", b, again)
	}
}

// Each kind of answer, end to end: the reference TPM simulator, the client,
// the real protocol over HTTPS, the server under a prefix. An attested
// machine is admitted; a refusal, with the refused hash in its audit
// line, is not; a pending-approval claim waits. Which verdict a binding
// and the proven EKs get is Judge's (TestJudge), and which attributes the
// audit line of each verdict has, verdictAttrs' (TestVerdictAttrs).
func TestVerdictsSimulator(t *testing.T) {
	tpmA := hashesOf(t, 0) // the machine's TPM
	tpmB := hashesOf(t, 1) // another TPM
	if tpmA.RSA2048 == tpmB.RSA2048 || tpmA.ECCP256 == tpmB.ECCP256 {
		t.Fatal("seeds 0 and 1 gave the same EKs")
	}
	lldp := &attest.LLDP{ChassisIDSubtype: 4, ChassisID: "74:83:c2:00:00:01", PortIDSubtype: 5, PortID: "Port 7", PortDescription: "node port", SystemName: "usw-pro-24"}
	for _, tc := range []verdictCase{
		{name: "approved both", seed: 0, binding: &tpmA, verdict: attest.Attested, console: "attest: PASSED\n"},
		{name: "swapped TPM", seed: 1, binding: &tpmA, verdict: attest.EKHashMismatch, refused: tpmB.RSA2048,
			console: "attest: FAILED ek-hash-mismatch\nattest: the TPM's RSA-2048 EK is not the one the entry approves\n"},
		{name: "unknown serial", seed: 0, binding: nil, verdict: attest.PendingApproval,
			console: "attest: FAILED pending-approval\nattest: no entry names the serial\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attestsAs(t, newFleet(t, nil), attesttest.NewSimulatorDevice(t, tc.seed), lldp, tc)
		})
	}
}

// verdictCase is a serial's binding and the verdict a TPM gets with it.
type verdictCase struct {
	name    string
	seed    int64           // the simulator's seed (TestVerdictsSimulator)
	binding *attest.Binding // nil: no entry names the serial
	verdict attest.Verdict
	refused string // the EK hash the verdict refuses
	console string
}

// attestsAs has f hold tc's binding of serial FLK-0001, attests tpm as
// that serial with lldp, and checks every effect of the verdict: the
// console, one binding read, one judgement, the audit line with the
// proven hashes and the refused one; an attested claim admitted with the
// proven hashes and an install code, a refused one not admitted, a
// pending one waiting.
func attestsAs(t *testing.T, f *fleet, tpm attest.TPM, lldp *attest.LLDP, tc verdictCase) {
	t.Helper()
	const serial = "FLK-0001"
	if tc.binding != nil {
		f.bindings.Set(serial, *tc.binding)
	}
	res, console, err := f.run(t, tpm, serial, lldp)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, console)
	}
	if res.Verdict != tc.verdict || console != tc.console {
		t.Fatalf("verdict %s (%s), console:\n%s\nwant %s, console:\n%s", res.Verdict, res.Reason, console, tc.verdict, tc.console)
	}
	if got := f.bindings.Calls(); got != 1 {
		t.Errorf("the binding source was asked %d times, want 1", got)
	}
	calls := f.hook.calls()
	if js := f.judgements(); len(js) != 1 || js[0].Verdict != tc.verdict || js[0].RefusedHash != tc.refused {
		t.Errorf("Config.Judged got %+v, want one %s judgement refusing %q", js, tc.verdict, tc.refused)
	}
	audit := f.logs.Lines("attest.verdict")
	if len(audit) != 1 {
		t.Fatalf("audit lines %q, want one", audit)
	}
	for _, want := range []string{"serial=" + serial, "verdict=" + tc.verdict.String(), "peer=127.0.0.1:"} {
		if !strings.Contains(audit[0], want) {
			t.Errorf("audit line %q lacks %q", audit[0], want)
		}
	}
	// The proven hashes are in the line, to compare with evidence.
	proven := approve(t, tpm)
	for kind, h := range map[string]string{"rsa2048": proven.RSA2048, "eccp256": proven.ECCP256} {
		if h != "" && !strings.Contains(audit[0], "ek_"+kind+"="+h) {
			t.Errorf("audit line %q lacks the proven %s hash", audit[0], kind)
		}
	}
	// The refused hash, when the verdict has one; the attribute is
	// absent otherwise.
	if has := strings.Contains(audit[0], "refused_ek_hash="); has != (tc.refused != "") || has && !strings.Contains(audit[0], "refused_ek_hash="+tc.refused) {
		t.Errorf("audit line %q, want the refused hash %q", audit[0], tc.refused)
	}
	if tc.verdict != attest.Attested {
		if len(calls) != 0 {
			t.Errorf("a refusal called the admission hook %d times", len(calls))
		}
		if res.InstallCode != "" {
			t.Error("a refusal answered an install code")
		}
	} else {
		if len(calls) != 1 {
			t.Fatalf("the admission hook was called %d times, want 1", len(calls))
		}
		c := calls[0]
		if c.Serial != serial || !bytes.Equal(c.MAC, testMAC) || !reflect.DeepEqual(c.LLDP, lldp) {
			t.Errorf("the hook got claim %+v", c)
		}
		if c.RSA2048 != proven.RSA2048 || c.ECCP256 != proven.ECCP256 {
			t.Errorf("the hook got proven hashes %s %s, want %s %s", c.RSA2048, c.ECCP256, proven.RSA2048, proven.ECCP256)
		}
		if res.InstallCode != "code-Zq81-secret" {
			t.Errorf("install code %q", res.InstallCode)
		}
	}
	ws := f.srv.Waiting(serial)
	if waiting := len(ws) == 1; waiting != (tc.verdict == attest.PendingApproval) || len(ws) > 1 {
		t.Errorf("Waiting(%s) = %d claims, want %v", serial, len(ws), tc.verdict == attest.PendingApproval)
	}
	if len(ws) == 1 {
		w := ws[0]
		if w.RSA2048 != proven.RSA2048 || w.ECCP256 != proven.ECCP256 || w.Serial != serial || !reflect.DeepEqual(w.LLDP, lldp) {
			t.Errorf("the waiting claim is %+v", w)
		}
	}
}

// trickle hands a TPM's responses over a few bytes at a time, as a TCP
// stream may.
type trickle struct{ *attesttest.Simulator }

func (t trickle) Read(p []byte) (int, error) { return t.Simulator.Read(p[:min(len(p), 3)]) }

func TestDeviceReadsSplitResponses(t *testing.T) {
	want := hashesOf(t, 0)
	sim, err := attesttest.OpenSimulator(0)
	if err != nil {
		t.Fatal(err)
	}
	d := attest.OpenChannel(trickle{sim})
	defer d.Close()
	if got := approve(t, d); got != want {
		t.Errorf("EKs over a trickling stream: %+v, want %+v", got, want)
	}
	if _, err := d.AK(); err != nil {
		t.Fatal(err)
	}
}

// A TPM with one transient object already loaded (as firmware may leave
// one) still attests: the Device makes room for its AK.
func TestDeviceMakesRoomForAK(t *testing.T) {
	sim, err := attesttest.OpenSimulator(0)
	if err != nil {
		t.Fatal(err)
	}
	tpm := transport.FromReadWriter(sim)
	srk := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHOwner, InPublic: tpm2.New2B(tpm2.ECCSRKTemplate)}
	if _, err := srk.Execute(tpm); err != nil {
		t.Fatal(err)
	}
	d := attest.OpenChannel(sim)
	defer d.Close()
	f := newFleetFor(t, nil, d)
	res, console, err := f.run(t, d, "S1", nil)
	if err != nil || res.Verdict != attest.Attested {
		t.Fatalf("Run: %+v %v\n%s", res, err, console)
	}
}

func simulatorMeasured(t *testing.T, boot *attesttest.BootLog) quoter {
	return attesttest.NewMeasuredSimulatorDevice(t, 1, boot)
}

// TestQuoteSimulator runs testQuote with the reference TPM simulator,
// its PCR banks allocated as each set of bankSets (the boot log's).
func TestQuoteSimulator(t *testing.T) {
	for _, banks := range bankSets {
		t.Run(bankList(banks), func(t *testing.T) { testQuote(t, banks, simulatorMeasured) })
	}
}
