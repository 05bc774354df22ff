package configserve

import (
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

func TestDeps(t *testing.T) {
	deptest.Check(t, "github.com/fleetkit/fleet/configserve", []string{
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
		"github.com/fleetkit/fleet/disksafe",
		"github.com/fleetkit/fleet/provision",
	})
}
