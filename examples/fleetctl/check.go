package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fleetkit/fleet/inventory"
)

// checkFlags defines fleetctl check's flags and returns its body: it
// validates the nodes file and prints its problems, or a summary and a
// line for a node at API_SERVER_IP, which fleetd never provisions.
func checkFlags(fs *flag.FlagSet) func(*call) int {
	topology := fs.String("topology", "", "the cluster topology `FILE` (default: cluster-topology.json beside NODES_FILE or in ../config/)")
	output := outputFlag(fs)
	return func(c *call) int {
		jsonOut, ok := c.jsonOutput(*output)
		if !ok {
			return 2
		}
		nodesPath := c.args[0]
		inv, _, problems, code := c.loadInventory(nodesPath, *topology)
		if code != 0 {
			return code
		}
		if jsonOut {
			doc := checkJSON{FormatVersion: jsonFormat, File: nodesPath, Valid: inv != nil, Problems: problemsJSON(problems)}
			if inv != nil {
				doc.Summary = newCheckSumJSON(inv)
			}
			writeJSON(c.stdout, doc)
			if inv == nil {
				return 1
			}
			return 0
		}
		if inv == nil {
			return reportProblems(c.stdout, nodesPath, problems, "")
		}
		fmt.Fprintf(c.stdout, "%s: ok: %s\n", nodesPath, summary(inv))
		if n, ok := bootstrapNode(inv); ok {
			fmt.Fprintf(c.stdout, "%s: at %s %s, the cluster's first control plane, which the Talos root bootstraps: fleetd never starts a run of it\n",
				n.Name, inventory.TopologyAPIServerIP, n.Address)
		}
		return 0
	}
}

// bootstrapNode is the node at API_SERVER_IP, if any.
func bootstrapNode(inv *inventory.Inventory) (inventory.Node, bool) {
	for _, n := range inv.Nodes {
		if n.Address == inv.Topology.APIServerIP {
			return n, true
		}
	}
	return inventory.Node{}, false
}

// loadInventory loads the nodes file and its topology (the flag's, or one
// found as topologyPath finds it). A nodes file with problems gives a nil
// inv and its problems; any other error is said on stderr and code is 2.
func (c *call) loadInventory(nodesPath, topology string) (inv *inventory.Inventory, topoPath string, problems inventory.Problems, code int) {
	if _, err := os.Stat(nodesPath); err != nil {
		return nil, "", nil, c.fail(2, noNodesFile(nodesPath, err))
	}
	topoPath, err := topologyPath(topology, nodesPath)
	if err != nil {
		return nil, "", nil, c.fail(2, err)
	}
	inv, err = inventory.Load(nodesPath, topoPath)
	switch {
	case errors.As(err, &problems):
		return nil, topoPath, problems, 0
	case err != nil:
		return nil, "", nil, c.fail(2, err)
	}
	return inv, topoPath, nil, 0
}

// reportProblems prints a nodes file's problems on w as fleetctl check
// does, each a line, then a count followed by "; nothing was <undone>"
// unless undone is empty, and returns 1.
func reportProblems(w io.Writer, nodesPath string, problems inventory.Problems, undone string) int {
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	tail := ""
	if undone != "" {
		tail = "; nothing was " + undone
	}
	fmt.Fprintf(w, "%s: %d %s%s\n", nodesPath, len(problems), plural(len(problems), "problem", "problems"), tail)
	return 1
}

// noNodesFile says that the nodes file at path cannot be read.
func noNodesFile(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no nodes file at %s", path)
	}
	return fmt.Errorf("nodes file %s: %w", path, err)
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

// newCheckSumJSON counts a valid inventory for check -o json.
func newCheckSumJSON(inv *inventory.Inventory) *checkSumJSON {
	cp, w, approved := counts(inv)
	sum := &checkSumJSON{
		Nodes: len(inv.Nodes), ControlPlanes: cp, Workers: w, Approved: approved,
		Models: len(inv.Models), Classes: len(inv.Classes), NodeCIDR: inv.Topology.NodeCIDR.String(),
	}
	if n, ok := bootstrapNode(inv); ok {
		sum.BootstrapNode = &n.Name
	}
	return sum
}

// counts counts a valid inventory's control planes, workers and nodes
// whose entry approves an EK.
func counts(inv *inventory.Inventory) (cp, w, approved int) {
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
	return cp, w, approved
}

// summary describes a valid inventory in one line.
func summary(inv *inventory.Inventory) string {
	cp, w, approved := counts(inv)
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
