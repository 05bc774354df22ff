package main

import (
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

// fleetctl reads the nodes file and NetBox, and asks fleetd: it links no
// Kubernetes, Talos or Tinkerbell code.
func TestDeps(t *testing.T) {
	deptest.Check(t, "github.com/fleetkit/fleet/examples/fleetctl", []string{
		"k8s.io", "sigs.k8s.io", "github.com/siderolabs", "github.com/tinkerbell",
		"github.com/fleetkit/fleet/provision",
	})
}
