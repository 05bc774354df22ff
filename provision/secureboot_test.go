package provision

import (
	"strings"
	"testing"
	"testing/synctest"

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

// bootClaim is dev's claim with the proven boot sb ("" for none).
func bootClaim(dev inventory.Device, sb, unknown string) Claim {
	c := claimOf(dev)
	c.Attestation.SecureBoot = sb
	if sb != "" && sb != inventory.SecureBootUnquoted {
		c.Attestation.PCR7 = pcr7
	}
	c.SecureBootUnknown = unknown
	return c
}

// A class with secure_boot: required: a machine whose quoted boot is not
// Secure Boot on is attested, and recorded, but gets no install code, and
// nothing is rendered; one whose boot is on starts its run. A class
// without the policy admits a machine whatever its boot, as before; the
// boot is recorded.
func TestAdmitSecureBootRequired(t *testing.T) {
	for _, tc := range []struct {
		name, sb, unknown string
		reason            string // "": the run starts
		optional          bool   // the class does not require Secure Boot
	}{
		{"on", inventory.SecureBootOn, "", "", false},
		{"off", inventory.SecureBootOff, "", "Secure Boot is off", false},
		{"unknown", inventory.SecureBootUnknown, "the machine sent no event log", "Secure Boot is unknown: the machine sent no event log", false},
		{"unknown without why", inventory.SecureBootUnknown, "", "Secure Boot is unknown", false},
		{"unquoted", inventory.SecureBootUnquoted, "", "the TPM sent no quote of its boot", false},
		{"not told", "", "", "the TPM sent no quote of its boot", false},
		{"optional, off", inventory.SecureBootOff, "why", "", true},
		{"optional, unknown", inventory.SecureBootUnknown, "why", "", true},
		{"optional, unquoted", inventory.SecureBootUnquoted, "why", "", true},
		{"optional, not told", "", "why", "", true},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			dev := worker(1, "node-01")
			policy := requireSecureBoot
			if tc.optional {
				policy = nil
			}
			h := newHarness(t, policy, dev)
			d := h.admit(bootClaim(dev, tc.sb, tc.unknown))
			got := h.nb.dev(1)
			if got.AttestVerdict != "attested" || got.AttestedSecureBoot != tc.sb || got.AttestedPCR7 != bootClaim(dev, tc.sb, "").Attestation.PCR7 {
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
			h.admit(bootClaim(dev, tc.sb, tc.unknown))
			if d := h.admit(bootClaim(dev, inventory.SecureBootOn, "")); d.Outcome != Provision || d.Code == "" {
				t.Fatalf("Admit with Secure Boot on = %+v; want the run", d)
			}
			line := journalLine{1, inventory.JournalWarning, "no provision: " + tc.reason}
			h.wantJournal(1, line, line, started1)
		})
	}
}

// A run started from desired_action waits for its machine: an attestation
// whose boot fails the policy gets no code and leaves the run waiting; the
// next boot with Secure Boot on gets the run's code.
func TestAdmitSecureBootWaitingRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, dev := waitingRun(t, requireSecureBoot)
		d := h.admit(bootClaim(dev, inventory.SecureBootOff, ""))
		if d.Outcome != NoProvision || d.Code != "" || d.Reason != "Secure Boot is off" {
			t.Errorf("Admit with Secure Boot off = %+v, want no provision and no code", d)
		}
		if n := h.count(WorkflowResource); n != 1 {
			t.Errorf("%d Workflows, want the waiting run alone", n)
		}
		d = h.admit(bootClaim(dev, inventory.SecureBootOn, ""))
		if d.Outcome != Provision || d.Run != run1 || d.Code != "SECRETCODE0001" {
			t.Errorf("Admit with Secure Boot on = %+v, want the waiting run's code", d)
		}
		h.wantNoSecretsLogged()
	})
}
