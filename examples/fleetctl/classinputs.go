package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/fleetkit/fleet/inventory"
)

// classInputsFlags defines the flags of fleetctl render-class-inputs and
// returns its body: the class inputs of the next control plane, rendered
// from the control planes NetBox holds. The nodes file says which classes
// are control plane classes.
func classInputsFlags(fs *flag.FlagSet) func(*call) int {
	var sans []string
	fs.Func("san", "an extra API server certificate `SAN` (an IP address or DNS name, e.g. API_SERVER_IP's name); repeat for more", func(s string) error {
		sans = append(sans, s)
		return nil
	})
	nodes := fs.String("nodes", "nodes.yaml", "the nodes `FILE`, whose classes say which devices are control planes")
	topology := fs.String("topology", "", "the cluster topology `FILE` (default: cluster-topology.json beside the nodes file or in ../config/)")
	role := fs.String("role", inventory.DefaultRole, "the `SLUG` of the device role of fleet's devices")
	timeout := fs.Duration("timeout", 30*time.Second, "how long one NetBox request may take")
	return func(c *call) int {
		// A nodes file with problems is reported as fleetctl check reports
		// it, on stderr: stdout is the class inputs.
		inv, _, problems, code := c.loadInventory(*nodes, *topology)
		if code != 0 {
			return code
		}
		if inv == nil {
			return reportProblems(c.stderr, *nodes, problems, "rendered")
		}
		devs, code := c.devices(*role, *timeout)
		if code != 0 {
			return code
		}
		out, err := inventory.RenderClassInputs(devs, inv.Classes, sans)
		switch {
		case errors.Is(err, inventory.ErrNoControlPlanes):
			return c.fail(1, fmt.Errorf("%w: apply the nodes file's control planes first", err))
		case err != nil:
			return c.fail(2, err)
		}
		if _, err := c.stdout.Write(out); err != nil {
			return c.fail(2, err)
		}
		return 0
	}
}
