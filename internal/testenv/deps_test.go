package testenv

import (
	"slices"
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

// TestDeps keeps testenv usable by the tests of the packages that run on a
// node (attest, lldpwait, disksafe, configserve): it links none of the
// systems fleet talks to, and none of fleet's packages, whose tests use it.
func TestDeps(t *testing.T) {
	fleet := []string{"attest", "configserve", "disksafe", "inventory", "lldpwait", "provision"}
	banned := slices.Clone(deptest.Heavy)
	for _, p := range fleet {
		banned = append(banned, "github.com/fleetkit/fleet/"+p)
	}
	deptest.Check(t, "github.com/fleetkit/fleet/internal/testenv", banned)
}
