package attest_test

import (
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
)

// Through the protocol: another TPM claiming a serial no entry names waits
// beside the first TPM's claim and does not replace it; the first TPM
// claiming again replaces its own claim, which becomes the newest; and
// Config.MaxWaitingPerSerial bounds the serial's claims, its oldest
// staying.
func TestWaitingEveryTPMOfASerial(t *testing.T) {
	f := newFleet(t, &attest.Config{MaxWaitingPerSerial: 2})
	const serial = "FLK-0007"
	var tpms []attest.TPM
	for i := range 4 {
		tpms = append(tpms, quickTPM(t, i))
	}
	machine, other := tpms[0], tpms[1]
	claim := func(tpm attest.TPM) {
		t.Helper()
		res, console, err := f.run(t, tpm, serial, nil)
		if err != nil || res.Verdict != attest.PendingApproval {
			t.Fatalf("verdict %s, %v\n%s", res.Verdict, err, console)
		}
	}
	same := func(c attest.Claim, tpm attest.TPM) bool {
		b := attesttest.Approved(t, tpm)
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

	claim(tpms[2])
	claim(tpms[3])
	if ws := f.srv.Waiting(serial); len(ws) != 2 || !same(ws[0], other) || !same(ws[1], tpms[3]) {
		t.Errorf("with a bound of 2 after two more TPMs: %d claims %+v; want the oldest and the last", len(ws), ws)
	}
}
