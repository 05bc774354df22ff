package main

import (
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

// fleetctl reads the nodes file and NetBox, asks fleetd, and with
// -kubeconfig reads Workflows as unstructured objects through client-go's
// dynamic client: it links no typed Kubernetes clientset, Talos or
// Tinkerbell code.
func TestDeps(t *testing.T) {
	deptest.Check(t, "github.com/fleetkit/fleet/examples/fleetctl", []string{
		"k8s.io/client-go/kubernetes", "github.com/siderolabs", "github.com/tinkerbell",
		"github.com/fleetkit/fleet/provision",
	})
}
