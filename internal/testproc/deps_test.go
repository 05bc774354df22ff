package testproc

import (
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

// TestDeps keeps testproc usable by every harness: it links none of the
// systems they start.
func TestDeps(t *testing.T) {
	deptest.Check(t, "github.com/fleetkit/fleet/internal/testproc", deptest.Heavy)
}
