package attest_test

import (
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

var banned = []string{
	"k8s.io", "sigs.k8s.io",
	"github.com/siderolabs", "github.com/tinkerbell", "github.com/netbox-community",
	"github.com/fleetkit/fleet/inventory", "github.com/fleetkit/fleet/lldpwait",
	"github.com/fleetkit/fleet/disksafe", "github.com/fleetkit/fleet/configserve",
	"github.com/fleetkit/fleet/provision",
	// The server's crypto is the standard library's and go-tpm's.
	"golang.org/x/crypto",
}

func TestDeps(t *testing.T) {
	// The simulator (cgo) is for tests: attest itself never links it.
	deptest.Check(t, "github.com/fleetkit/fleet/attest", append(banned, "github.com/google/go-tpm-tools"))
	deptest.Check(t, "github.com/fleetkit/fleet/attest/attesttest", banned)
}
