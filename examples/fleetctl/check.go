package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fleetkit/fleet/inventory"
)

func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	topology := fs.String("topology", "", "the cluster topology `FILE` (default: cluster-topology.json beside NODES_FILE or in ../config/)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fleetctl check [-topology FILE] NODES_FILE")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	nodesPath := fs.Arg(0)
	topoPath, err := topologyPath(*topology, nodesPath)
	if err != nil {
		fmt.Fprintf(stderr, "fleetctl check: %v\n", err)
		return 2
	}
	inv, err := inventory.Load(nodesPath, topoPath)
	var problems inventory.Problems
	switch {
	case errors.As(err, &problems):
		for _, p := range problems {
			fmt.Fprintln(stdout, p)
		}
		fmt.Fprintf(stdout, "%s: %d %s\n", nodesPath, len(problems), plural(len(problems), "problem", "problems"))
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "fleetctl check: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "%s: ok: %s\n", nodesPath, summary(inv))
	return 0
}

// topologyPath returns the topology file to read: the flag's, or the one
// beside the nodes file, or the one in ../config/.
func topologyPath(flagValue, nodesPath string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	dir := filepath.Dir(nodesPath)
	candidates := []string{
		filepath.Join(dir, "cluster-topology.json"),
		filepath.Join(dir, "..", "config", "cluster-topology.json"),
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("no cluster topology at %s or %s: pass -topology FILE", candidates[0], candidates[1])
}

// summary describes a valid inventory in one line.
func summary(inv *inventory.Inventory) string {
	var cp, w, approved int
	for _, n := range inv.Nodes {
		if inv.Classes[n.Class].Type == inventory.ControlPlane {
			cp++
		} else {
			w++
		}
		if n.ApprovedEKRSA2048 != "" || n.ApprovedEKECCP256 != "" {
			approved++
		}
	}
	return fmt.Sprintf("%d %s (%d %s, %d %s), %d with an approved EK binding; %d %s, %d %s; %s %s",
		len(inv.Nodes), plural(len(inv.Nodes), "node", "nodes"),
		cp, plural(cp, "control plane", "control planes"),
		w, plural(w, "worker", "workers"),
		approved,
		len(inv.Models), plural(len(inv.Models), "model", "models"),
		len(inv.Classes), plural(len(inv.Classes), "class", "classes"),
		inventory.TopologyNodeCIDR, inv.Topology.NodeCIDR)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
