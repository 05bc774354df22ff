package inventory_test

import (
	"fmt"
	"net/netip"

	"github.com/fleetkit/fleet/inventory"
)

// The class inputs of the next control plane, for the Talos root.
func ExampleRenderClassInputs() {
	devices := []inventory.Device{
		{Name: "cp-01", Class: "controlplane", Status: inventory.StatusActive, Address: netip.MustParsePrefix("10.0.0.11/24")},
		{Name: "cp-02", Class: "controlplane", Status: inventory.StatusPlanned, Address: netip.MustParsePrefix("10.0.0.12/24")},
		{Name: "node-01", Class: "worker", Status: inventory.StatusActive, Address: netip.MustParsePrefix("10.0.0.21/24")},
	}
	classes := map[string]inventory.Class{ // as the nodes file declares them
		"controlplane": {Name: "controlplane", Type: inventory.ControlPlane},
		"worker":       {Name: "worker", Type: inventory.Worker},
	}
	out, err := inventory.RenderClassInputs(devices, classes, []string{"api.folly.example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(out))
	// Output:
	// # fleet render-class-inputs: the class inputs of the next control plane.
	// # Control planes: cp-01 10.0.0.11 (active), cp-02 10.0.0.12 (planned).
	// machine:
	//   certSANs:
	//     - "10.0.0.11"
	//     - "10.0.0.12"
	//     - "api.folly.example"
	// cluster:
	//   apiServer:
	//     certSANs:
	//       - "10.0.0.11"
	//       - "10.0.0.12"
	//       - "api.folly.example"
}
