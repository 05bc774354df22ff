package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/fleetkit/fleet/inventory"
)

// planCmd runs fleetctl plan (apply false) or fleetctl apply.
func planCmd(name string, apply bool, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.String("nodes", "nodes.yaml", "the nodes `FILE`")
	topology := fs.String("topology", "", "the cluster topology `FILE` (default: cluster-topology.json beside the nodes file or in ../config/)")
	site := fs.String("site", "", "the `SLUG` of the NetBox site new devices go in (default: the topology's CLUSTER_NAME)")
	sw := fs.String("switch", "switch", "the `NAME` of the switch device in the site whose ports the nodes' switch_port numbers name")
	portName := fs.String("port-name", inventory.DefaultPortName, "how the switch names its ports in NetBox: a `FORMAT` with one %d")
	role := fs.String("role", inventory.DefaultRole, "the `SLUG` of the device role of fleet's devices")
	iface := fs.String("interface", inventory.DefaultInterface, "the `NAME` of a node's interface in NetBox")
	timeout := fs.Duration("timeout", 30*time.Second, "how long one NetBox request may take")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: fleetctl %s [-nodes FILE] [-topology FILE] [-site SLUG] [-switch NAME] [flags]\n", name)
		fmt.Fprintln(stderr, "NETBOX_URL and NETBOX_TOKEN name the NetBox and its API token.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "fleetctl %s: %s\n", name, fmt.Sprintf(format, args...))
		return 2
	}
	url, token := os.Getenv("NETBOX_URL"), os.Getenv("NETBOX_TOKEN")
	if url == "" || token == "" {
		return fail("set NETBOX_URL to the NetBox (e.g. https://netbox.example) and NETBOX_TOKEN to an API token")
	}
	topoPath, err := topologyPath(*topology, *nodes)
	if err != nil {
		return fail("%v", err)
	}
	inv, err := inventory.Load(*nodes, topoPath)
	var problems inventory.Problems
	switch {
	case errors.As(err, &problems):
		// The same report as fleetctl check: nothing reaches NetBox.
		for _, p := range problems {
			fmt.Fprintln(stdout, p)
		}
		fmt.Fprintf(stdout, "%s: %d %s; nothing was planned\n", *nodes, len(problems), plural(len(problems), "problem", "problems"))
		return 1
	case err != nil:
		return fail("%v", err)
	}
	if *site == "" {
		if *site, err = clusterName(topoPath); err != nil {
			return fail("%v", err)
		}
	}
	var logger *slog.Logger
	if apply {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	nb, err := inventory.NewNetBox(url, token, &inventory.NetBoxConfig{
		Site: *site, Switch: *sw, PortName: *portName, Role: *role, Interface: *iface, Timeout: *timeout, Logger: logger,
	})
	if err != nil {
		return fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	p, err := nb.Plan(ctx, inv)
	switch {
	case errors.Is(err, inventory.ErrConflict):
		fmt.Fprintln(stdout, err)
		return 1
	case err != nil:
		return fail("%v", err)
	}
	fmt.Fprint(stdout, p)
	if !apply || p.Empty() {
		return 0
	}
	if err := nb.Apply(ctx, p); err != nil {
		fmt.Fprintf(stderr, "fleetctl apply: %v\nWhat was written stays; run fleetctl apply again to finish.\n", err)
		return 2
	}
	add, change := p.Counts()
	fmt.Fprintf(stdout, "\nApply complete: %d added, %d changed.\n", add, change)
	return 0
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
