package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/fleetkit/fleet/inventory"
)

// planFlags defines the flags of fleetctl plan (apply false) or fleetctl
// apply, and returns its body.
func planFlags(fs *flag.FlagSet, apply bool) func(*call) int {
	nodes := fs.String("nodes", "nodes.yaml", "the nodes `FILE`")
	topology := fs.String("topology", "", "the cluster topology `FILE` (default: cluster-topology.json beside the nodes file or in ../config/)")
	site := fs.String("site", "", "the `SLUG` of the NetBox site new devices go in (default: the topology's CLUSTER_NAME)")
	sw := fs.String("switch", "switch", "the `NAME` of the switch device in the site whose ports the nodes' switch_port numbers name")
	portName := fs.String("port-name", inventory.DefaultPortName, "how the switch names its ports in NetBox: a `FORMAT` with one %d")
	role := fs.String("role", inventory.DefaultRole, "the `SLUG` of the device role of fleet's devices")
	iface := fs.String("interface", inventory.DefaultInterface, "the `NAME` of a node's interface in NetBox")
	timeout := fs.Duration("timeout", 30*time.Second, "how long one NetBox request may take")
	return func(c *call) int {
		url, token, err := netBoxEnv()
		if err != nil {
			return c.fail(2, err)
		}
		// A nodes file with problems is reported as fleetctl check reports
		// it: nothing reaches NetBox.
		inv, topoPath, code := c.loadInventory(*nodes, *topology, c.stdout, "planned")
		if code != 0 {
			return code
		}
		if *site == "" {
			if *site, err = clusterName(topoPath); err != nil {
				return c.fail(2, err)
			}
		}
		var logger *slog.Logger
		if apply {
			logger = slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
		nb, err := inventory.NewNetBox(url, token, &inventory.NetBoxConfig{
			Site: *site, Switch: *sw, PortName: *portName, Role: *role, Interface: *iface, Timeout: *timeout, Logger: logger,
		})
		if err != nil {
			return c.fail(2, err)
		}
		ctx, stop := c.context()
		defer stop()
		p, err := nb.Plan(ctx, inv)
		switch {
		case errors.Is(err, inventory.ErrConflict):
			fmt.Fprintln(c.stdout, err)
			return 1
		case err != nil:
			return c.failNetBox(err)
		}
		fmt.Fprint(c.stdout, p)
		if !apply || p.Empty() {
			return 0
		}
		if err := nb.Apply(ctx, p); err != nil {
			fmt.Fprintf(c.stderr, "fleetctl apply: %v\nWhat was written stays; run fleetctl apply again to finish.\n", shortNetBoxError(url, err))
			return 2
		}
		add, change := p.Counts()
		fmt.Fprintf(c.stdout, "\nApply complete: %d added, %d changed.\n", add, change)
		return 0
	}
}

// clusterName reads CLUSTER_NAME from the cluster topology: the default
// site, since the runbook names a cluster's site after it.
func clusterName(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var topo struct {
		Name string `json:"CLUSTER_NAME"`
	}
	if err := json.Unmarshal(data, &topo); err != nil || topo.Name == "" {
		return "", fmt.Errorf("%s names no CLUSTER_NAME: pass -site SLUG", path)
	}
	return topo.Name, nil
}
