package daemon

import (
	"strings"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/inventory"
)

// The boot a TPM quoted, as NetBox records it and provision's Secure Boot
// policy reads it.
func TestProvenBoot(t *testing.T) {
	var pcrs [attest.QuotedPCRs][]byte
	for i := range pcrs {
		pcrs[i] = make([]byte, 32)
	}
	pcrs[7][0] = 0x7e
	pcr7 := "7e" + strings.Repeat("00", 31)
	for _, tc := range []struct {
		name                 string
		boot                 *attest.BootState
		sb, pcr7, unknownWhy string
	}{
		{"no quote", nil, inventory.SecureBootUnquoted, "", ""},
		{"on", &attest.BootState{SecureBoot: attest.SecureBootOn, PCRs: pcrs}, inventory.SecureBootOn, pcr7, ""},
		{"off", &attest.BootState{SecureBoot: attest.SecureBootOff, PCRs: pcrs}, inventory.SecureBootOff, pcr7, ""},
		{"unknown", &attest.BootState{SecureBoot: attest.SecureBootUnknown, Unknown: "the machine sent no event log", PCRs: pcrs},
			inventory.SecureBootUnknown, pcr7, "the machine sent no event log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, p7, why := provenBoot(tc.boot)
			if sb != tc.sb || p7 != tc.pcr7 || why != tc.unknownWhy {
				t.Errorf("provenBoot = %q, %q, %q; want %q, %q, %q", sb, p7, why, tc.sb, tc.pcr7, tc.unknownWhy)
			}
		})
	}
}
