package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/fleetkit/fleet/inventory"
)

// planSettings are the flags plan and apply share: what the plan reads and
// where its devices go.
type planSettings struct {
	Nodes     string `json:"nodes_file"`
	Topology  string `json:"topology_file"`
	Site      string `json:"site"`
	Switch    string `json:"switch"`
	PortName  string `json:"port_name"`
	Role      string `json:"role"`
	Interface string `json:"interface"`
}

// planFlags defines the flags of fleetctl plan (apply false) or fleetctl
// apply, and returns its body.
func planFlags(fs *flag.FlagSet, apply bool) func(*call) int {
	var s planSettings
	fs.StringVar(&s.Nodes, "nodes", "nodes.yaml", "the nodes `FILE`")
	fs.StringVar(&s.Topology, "topology", "", "the cluster topology `FILE` (default: cluster-topology.json beside the nodes file or in ../config/)")
	fs.StringVar(&s.Site, "site", "", "the `SLUG` of the NetBox site new devices go in (default: the topology's CLUSTER_NAME)")
	fs.StringVar(&s.Switch, "switch", "switch", "the `NAME` of the switch device in the site whose ports the nodes' switch_port numbers name")
	fs.StringVar(&s.PortName, "port-name", inventory.DefaultPortName, "how the switch names its ports in NetBox: a `FORMAT` with one %d")
	fs.StringVar(&s.Role, "role", inventory.DefaultRole, "the `SLUG` of the device role of fleet's devices")
	fs.StringVar(&s.Interface, "interface", inventory.DefaultInterface, "the `NAME` of a node's interface in NetBox")
	timeout := fs.Duration("timeout", 30*time.Second, "how long one NetBox request may take")
	if apply {
		return func(c *call) int {
			switch len(c.args) {
			case 0:
				return c.plan(s, *timeout, &planOptions{apply: true})
			case 1:
				return c.applySaved(c.args[0], *timeout)
			}
			return c.usage()
		}
	}
	output := outputFlag(fs)
	detailed := fs.Bool("detailed-exitcode", false, "exit 0 when the plan changes nothing, 2 when it changes something, 1 on any error or problem (as terraform plan -detailed-exitcode)")
	out := fs.String("out", "", "write the plan to `FILE`, for fleetctl apply FILE")
	return func(c *call) int {
		jsonOut, ok := c.jsonOutput(*output)
		if !ok {
			if *detailed {
				return 1
			}
			return 2
		}
		o := planOptions{json: jsonOut, out: *out}
		code := c.plan(s, *timeout, &o)
		switch {
		case !*detailed:
			return code
		case code != 0:
			return 1
		case o.changes:
			return exitChanges
		}
		return 0
	}
}

// exitChanges is plan -detailed-exitcode's exit code for a plan that
// changes something.
const exitChanges = 2

// planOptions say what plan does with the plan it made.
type planOptions struct {
	apply bool   // apply it
	json  bool   // print it as JSON (plan -o json)
	out   string // write it to this file; "" for none

	changes bool // set by plan: the plan it made changes something
}

// plan plans (and, with apply, applies) the nodes file of s against the
// NetBox the environment names.
func (c *call) plan(s planSettings, timeout time.Duration, o *planOptions) int {
	url, token, err := netBoxEnv()
	if err != nil {
		return c.fail(2, err)
	}
	// A nodes file with problems is reported as fleetctl check reports
	// it: nothing reaches NetBox.
	inv, topoPath, problems, code := c.loadInventory(s.Nodes, s.Topology)
	if code != 0 {
		return code
	}
	if inv == nil {
		if o.json {
			doc := newPlanJSON(s.Nodes, nil)
			doc.Problems = problemsJSON(problems)
			writeJSON(c.stdout, doc)
			return 1
		}
		return reportProblems(c.stdout, s.Nodes, problems, "planned")
	}
	s.Topology = topoPath
	if s.Site == "" {
		if s.Site, err = clusterName(topoPath); err != nil {
			return c.fail(2, err)
		}
	}
	var logger *slog.Logger
	if o.apply {
		logger = slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	nb, err := inventory.NewNetBox(url, token, s.netBoxConfig(timeout, logger))
	if err != nil {
		return c.fail(2, err)
	}
	ctx, stop := c.context()
	defer stop()
	p, err := nb.Plan(ctx, inv)
	var conflict *inventory.ConflictError
	switch {
	case errors.As(err, &conflict) && o.json:
		doc := newPlanJSON(s.Nodes, nil)
		doc.Conflicts = append(doc.Conflicts, conflict.Conflicts...)
		writeJSON(c.stdout, doc)
		return 1
	case errors.Is(err, inventory.ErrConflict):
		fmt.Fprintln(c.stdout, err)
		return 1
	case err != nil:
		return c.failNetBox(err)
	}
	if o.out != "" {
		if code := c.savePlan(ctx, nb, o.out, s, url, p); code != 0 {
			return code
		}
	}
	if o.json {
		writeJSON(c.stdout, newPlanJSON(s.Nodes, p))
	} else {
		fmt.Fprint(c.stdout, p)
	}
	if o.out != "" && !o.json {
		fmt.Fprintf(c.stdout, "\nSaved the plan to %s. To write exactly it, run: fleetctl apply %s\n", o.out, o.out)
	}
	o.changes = !p.Empty()
	if !o.apply {
		return 0
	}
	return c.apply(ctx, nb, url, p)
}

// apply writes p and says so.
func (c *call) apply(ctx context.Context, nb *inventory.NetBox, url string, p *inventory.Plan) int {
	if p.Empty() {
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

// netBoxConfig is the NetBox client's Config for s.
func (s planSettings) netBoxConfig(timeout time.Duration, logger *slog.Logger) *inventory.NetBoxConfig {
	return &inventory.NetBoxConfig{
		Site: s.Site, Switch: s.Switch, PortName: s.PortName, Role: s.Role, Interface: s.Interface, Timeout: timeout, Logger: logger,
	}
}

// clusterName reads CLUSTER_NAME from the cluster topology: the default
// site, since the runbook names a cluster's site after it.
func clusterName(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return clusterNameOf(path, data)
}

// clusterNameOf reads CLUSTER_NAME from the topology in data, read from
// path.
func clusterNameOf(path string, data []byte) (string, error) {
	var topo struct {
		Name string `json:"CLUSTER_NAME"`
	}
	if err := json.Unmarshal(data, &topo); err != nil || topo.Name == "" {
		return "", fmt.Errorf("%s names no CLUSTER_NAME: pass -site SLUG", path)
	}
	return topo.Name, nil
}
