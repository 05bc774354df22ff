package provision

import (
	"strings"
	"testing"

	"github.com/fleetkit/fleet/inventory"
)

// pcr7 is a quoted PCR 7 digest, as the glue hands it over.
var pcr7 = strings.Repeat("7e", 32)

// requireSecureBoot makes the worker class require Secure Boot.
func requireSecureBoot(c *Cluster, _ *Config) {
	w := c.Classes[ClassWorker]
	w.RequireSecureBoot = true
	c.Classes = map[string]inventory.Class{ClassWorker: w, ClassControlPlane: c.Classes[ClassControlPlane]}
}

// bootClaim is dev's claim with the proven boot sb, its PCR 7 quoted.
func bootClaim(dev inventory.Device, sb string) Claim {
	c := claimOf(dev)
	c.Attestation.SecureBoot, c.Attestation.PCR7 = sb, pcr7
	return c
}

// A class with secure_boot: required: a machine whose quoted boot is not
// Secure Boot on is attested, and recorded, but gets no install code, and
// nothing is rendered; one whose boot is on starts its run. The boot is
// recorded either way. (Each boot, with the policy and without it, and a
// waiting run that keeps waiting for a boot that passes: TestPlan.)
func TestAdmitSecureBootRequired(t *testing.T) {
	for _, tc := range []struct {
		name, sb string
		reason   string // "": the run starts
	}{
		{"on", inventory.SecureBootOn, ""},
		{"off", inventory.SecureBootOff, "Secure Boot is off"},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			dev := worker(1, "node-01")
			h := newHarness(t, requireSecureBoot, dev)
			d := h.admit(bootClaim(dev, tc.sb))
			got := h.nb.dev(1)
			if got.AttestVerdict != "attested" || got.AttestedSecureBoot != tc.sb || got.AttestedPCR7 != pcr7 {
				t.Errorf("device: verdict %q, attested_secure_boot %q, attested_pcr7 %q; want the attestation recorded", got.AttestVerdict, got.AttestedSecureBoot, got.AttestedPCR7)
			}
			r := h.audit.records("attest.install")
			if tc.reason == "" {
				if d.Outcome != Provision || d.Code == "" {
					t.Fatalf("Admit = %+v, want a provision run with a code", d)
				}
				h.wantJournal(1, started1)
				if len(r) != 1 || r[0].Attrs["outcome"] != "provision" {
					t.Errorf("attest.install = %v", r)
				}
				return
			}
			if d.Outcome != NoProvision || d.Reason != tc.reason || d.Code != "" || d.Run != "" {
				t.Errorf("Admit = %+v, want no provision: %s", d, tc.reason)
			}
			h.wantJournal(1, journalLine{1, inventory.JournalWarning, "no provision: " + tc.reason})
			h.wantNothingCreated()
			if len(r) != 1 || r[0].Attrs["outcome"] != "no provision" || r[0].Attrs["reason"] != tc.reason {
				t.Errorf("attest.install = %v", r)
			}
			if got.LastRun != "" {
				t.Errorf("last_run = %q, want none", got.LastRun)
			}

			// Each refused attestation is journaled; a later boot with
			// Secure Boot on starts the run.
			h.admit(bootClaim(dev, tc.sb))
			if d := h.admit(bootClaim(dev, inventory.SecureBootOn)); d.Outcome != Provision || d.Code == "" {
				t.Fatalf("Admit with Secure Boot on = %+v; want the run", d)
			}
			line := journalLine{1, inventory.JournalWarning, "no provision: " + tc.reason}
			h.wantJournal(1, line, line, started1)
		})
	}
}
