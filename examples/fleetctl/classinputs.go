package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/provision"
)

// classInputsCmd runs fleetctl render-class-inputs: the class inputs of the
// next control plane, rendered from the control planes NetBox holds. The
// nodes file says which classes are control plane classes.
func classInputsCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("render-class-inputs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sans []string
	fs.Func("san", "an extra API server certificate `SAN` (an IP address or DNS name, e.g. API_SERVER_IP's name); repeat for more", func(s string) error {
		sans = append(sans, s)
		return nil
	})
	nodes := fs.String("nodes", "nodes.yaml", "the nodes `FILE`, whose classes say which devices are control planes")
	topology := fs.String("topology", "", "the cluster topology `FILE` (default: cluster-topology.json beside the nodes file or in ../config/)")
	role := fs.String("role", inventory.DefaultRole, "the `SLUG` of the device role of fleet's devices")
	timeout := fs.Duration("timeout", 30*time.Second, "how long one NetBox request may take")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fleetctl render-class-inputs [-nodes FILE] [-topology FILE] [-san SAN]... [-role SLUG] [-timeout DURATION]")
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
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "fleetctl render-class-inputs: %v\n", err)
		return code
	}
	topoPath, err := topologyPath(*topology, *nodes)
	if err != nil {
		return fail(2, err)
	}
	inv, err := inventory.Load(*nodes, topoPath)
	var problems inventory.Problems
	switch {
	case errors.As(err, &problems):
		// The same report as fleetctl check, on stderr: stdout is the
		// class inputs.
		for _, p := range problems {
			fmt.Fprintln(stderr, p)
		}
		fmt.Fprintf(stderr, "%s: %d %s; nothing was rendered\n", *nodes, len(problems), plural(len(problems), "problem", "problems"))
		return 1
	case err != nil:
		return fail(2, err)
	}
	nb, err := netBoxFromEnv(&inventory.NetBoxConfig{Role: *role, Timeout: *timeout})
	if err != nil {
		return fail(2, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	devs, err := nb.Devices(ctx)
	if err != nil {
		return fail(2, err)
	}
	out, err := provision.RenderClassInputs(devs, inv.Classes, sans)
	switch {
	case errors.Is(err, provision.ErrNoControlPlanes):
		return fail(1, fmt.Errorf("%w: apply the nodes file's control planes first", err))
	case err != nil:
		return fail(2, err)
	}
	if _, err := stdout.Write(out); err != nil {
		return fail(2, err)
	}
	return 0
}
