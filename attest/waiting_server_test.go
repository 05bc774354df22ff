package attest_test

import (
	"testing"

	"github.com/fleetkit/fleet/attest"
)

// Through the protocol: another TPM claiming a serial no entry names waits
// beside the first TPM's claim and does not replace it; the first TPM
// claiming again replaces its own claim, which becomes the newest.
func TestWaitingEveryTPMOfASerial(t *testing.T) {
	f := newFleet(t, nil)
	const serial = "FLK-0007"
	machine, other := quickTPM(t, 0), quickTPM(t, 1)
	hashes := func(tpm attest.TPM) attest.Binding { return approve(t, tpm) }
	claim := func(tpm attest.TPM) {
		t.Helper()
		res, console, err := f.run(t, tpm, serial, nil)
		if err != nil || res.Verdict != attest.PendingApproval {
			t.Fatalf("verdict %s, %v\n%s", res.Verdict, err, console)
		}
	}
	same := func(c attest.Claim, tpm attest.TPM) bool {
		b := hashes(tpm)
		return c.Serial == serial && c.RSA2048 == b.RSA2048 && c.ECCP256 == b.ECCP256
	}

	claim(machine)
	claim(other)
	ws := f.srv.Waiting(serial)
	if len(ws) != 2 || !same(ws[0], machine) || !same(ws[1], other) {
		t.Fatalf("after two TPMs claimed %s: %+v; want the machine's claim, then the other's", serial, ws)
	}
	first := ws[0].Proven

	claim(machine)
	ws = f.srv.Waiting(serial)
	if len(ws) != 2 || !same(ws[0], other) || !same(ws[1], machine) || !ws[1].Proven.After(first) {
		t.Fatalf("after the machine claimed again: %+v; want the other's claim, then the machine's renewed", ws)
	}
	if ws := f.srv.Waiting("FLK-0008"); ws != nil {
		t.Errorf("a serial nobody claimed: %+v", ws)
	}
}

// Config.MaxWaitingPerSerial bounds a serial's claims; the serial's oldest
// stays.
func TestWaitingPerSerialConfig(t *testing.T) {
	f := newFleet(t, &attest.Config{MaxWaitingPerSerial: 2})
	const serial = "FLK-0009"
	var tpms []attest.TPM
	for i := range 4 {
		tpm := quickTPM(t, i)
		tpms = append(tpms, tpm)
		if res, console, err := f.run(t, tpm, serial, nil); err != nil || res.Verdict != attest.PendingApproval {
			t.Fatalf("verdict %s, %v\n%s", res.Verdict, err, console)
		}
	}
	ws := f.srv.Waiting(serial)
	if len(ws) != 2 || ws[0].RSA2048 != approve(t, tpms[0]).RSA2048 || ws[1].RSA2048 != approve(t, tpms[3]).RSA2048 {
		t.Errorf("with a bound of 2 after 4 TPMs: %d claims %+v; want the first TPM's and the last's", len(ws), ws)
	}
}
