package disksafe

import (
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

// TestDeps keeps disksafe free of network code and of its siblings: the
// code that wipes disks must not reach a network, a TPM or NetBox.
func TestDeps(t *testing.T) {
	deptest.Check(t, "github.com/fleetkit/fleet/disksafe", []string{
		"net",
		"net/http",
		"crypto/tls",
		"k8s.io",
		"sigs.k8s.io",
		"github.com/siderolabs",
		"github.com/tinkerbell",
		"github.com/netbox-community",
		"github.com/google/go-tpm",
		"github.com/google/go-attestation",
		"github.com/mdlayher",
		"github.com/fleetkit/fleet/attest",
		"github.com/fleetkit/fleet/inventory",
		"github.com/fleetkit/fleet/lldpwait",
		"github.com/fleetkit/fleet/configserve",
		"github.com/fleetkit/fleet/provision",
	})
}
