package provision

import (
	"testing"
	"testing/synctest"

	"github.com/fleetkit/fleet/inventory"
)

// handedClaim is dev's claim, handed dev as its caller just read it,
// holding the claimed MAC.
func handedClaim(dev inventory.Device) Claim {
	c := claimOf(dev)
	dev.MAC = c.Attestation.MAC
	c.Device = &dev
	return c
}

// Admit, handed the device the caller just read and holding the claimed
// MAC, reads nothing and writes the attestation with the started run's
// last_run in one write: two NetBox calls with the run's journal line, one
// when nothing starts, and two for a refused run that waits for a fix
// (its line, and its desired_action with the fields).
func TestAdmitHandedDeviceWritesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dev := worker(1, "node-01")
		ran := worker(2, "node-02")
		ran.LastRun = "provision-node-02-1767000000"
		lacks := worker(3, "node-03")
		lacks.InstallDiskSerial = ""
		h := newHarness(t, nil, dev, ran, lacks)
		for _, tc := range []struct {
			dev   inventory.Device
			calls int
			run   string
		}{
			{dev, 2, "provision-node-01-946684800"}, // the fields with last_run, the journal line
			{ran, 1, ran.LastRun},                   // the fields alone
			{lacks, 2, ""},                          // the line, the fields with desired_action
		} {
			before := h.mem.callCount()
			h.admit(handedClaim(tc.dev))
			if calls := h.mem.callCount() - before; calls != tc.calls {
				t.Errorf("%s: %d NetBox calls, want %d", tc.dev.Name, calls, tc.calls)
			}
			got := h.nb.dev(tc.dev.ID)
			if got.AttestVerdict != "attested" || !got.AttestedAt.Equal(t0) || got.LastRun != tc.run {
				t.Errorf("%s after Admit: verdict %q, at %v, last_run %q", tc.dev.Name, got.AttestVerdict, got.AttestedAt, got.LastRun)
			}
			if tc.run == "" && got.DesiredAction != inventory.DesiredActionProvision {
				t.Errorf("%s after a refusal that waits: desired_action %q, want provision", tc.dev.Name, got.DesiredAction)
			}
		}

		// A device handed for another serial is not taken: Admit reads the
		// claim's own, whose run waits for the machine.
		c := claimOf(dev)
		other := ran
		c.Device = &other
		before := len(h.nb.lines())
		d := h.admit(c)
		if d.Outcome != Provision || d.Run != "provision-node-01-946684800" {
			t.Errorf("Admit of node-01 handed node-02: %+v, want node-01's waiting run", d)
		}
		if after := len(h.nb.lines()); after != before {
			t.Errorf("%d journal lines written", after-before)
		}
	})
}
