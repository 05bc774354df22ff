//go:build cgo

package attest_test

import (
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
	b := attesttest.Approved(t, d)
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

// trickle hands a TPM's responses over a few bytes at a time, as a TCP
// stream may.
type trickle struct{ *attesttest.Simulator }

func (t trickle) Read(p []byte) (int, error) { return t.Simulator.Read(p[:min(len(p), 3)]) }

func TestDeviceReadsSplitResponses(t *testing.T) {
	want := hashesOf(t, 0)
	d := attest.OpenChannel(trickle{attesttest.StartSimulator(t, 0)})
	defer d.Close()
	if got := attesttest.Approved(t, d); got != want {
		t.Errorf("EKs over a trickling stream: %+v, want %+v", got, want)
	}
	if _, err := d.AK(); err != nil {
		t.Fatal(err)
	}
}

// A TPM with one transient object already loaded (as firmware may leave
// one) still attests: the Device makes room for its AK.
func TestDeviceMakesRoomForAK(t *testing.T) {
	sim := attesttest.StartSimulator(t, 0)
	tpm := transport.FromReadWriter(sim)
	srk := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHOwner, InPublic: tpm2.New2B(tpm2.ECCSRKTemplate)}
	if _, err := srk.Execute(tpm); err != nil {
		t.Fatal(err)
	}
	d := attest.OpenChannel(sim)
	defer d.Close()
	approved := attesttest.Approved(t, d)
	attestsAs(t, newFleet(t, nil), d, nil, verdictCase{binding: &approved, verdict: attest.Attested, console: "attest: PASSED\n"})
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
