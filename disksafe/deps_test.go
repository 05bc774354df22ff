package disksafe

import (
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

// TestDeps keeps disksafe free of network code and of its siblings: the
// code that wipes disks must not reach a network, a TPM or NetBox.
func TestDeps(t *testing.T) {
	deptest.CheckLeaf(t, "github.com/fleetkit/fleet/disksafe", "net", "net/http", "crypto/tls",
		"github.com/google/go-tpm", "github.com/google/go-attestation", "github.com/mdlayher")
}
