package configserve

import (
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

func TestDeps(t *testing.T) {
	deptest.CheckLeaf(t, "github.com/fleetkit/fleet/configserve",
		"github.com/google/go-tpm", "github.com/google/go-attestation", "github.com/mdlayher")
}
