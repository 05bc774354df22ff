// Command demo runs the runbook "Provision a node" end to end in one
// process, on the example inventory (examples/testdata): an in-process
// NetBox, client-go's fake clusters, a simulated Tinkerbell and
// machines with software TPMs, against a real fleetd. It prints a timeline
// and a final table, and exits 0 when every machine ended as expected, 1
// otherwise. Run it from the fleet repository:
//
//	go run ./examples/fleetd/demo
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetkit/fleet/examples/fleetd/internal/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(sim.RunDemo(ctx, os.Stdout, os.Stderr))
}
