// Command fleetctl is the operator's tool for a fleet inventory.
//
//	fleetctl check [-topology FILE] NODES_FILE
//
// check validates a nodes file against its cluster topology and prints every
// problem as FILE:LINE:COL: node NAME: problem, exiting 1, or prints a
// one-line summary and exits 0. Without -topology it reads
// cluster-topology.json beside the nodes file, or in ../config/ as the
// runbook's layout has it (clusters/<cluster>/inventory/nodes.yaml and
// clusters/<cluster>/config/cluster-topology.json).
//
// Exit codes: 0 success, 1 the inventory has problems, 2 usage or I/O errors.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  fleetctl check [-topology FILE] NODES_FILE
`

// run runs one fleetctl command and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "check":
		return check(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "fleetctl: unknown command %q\n%s", args[0], usage)
	return 2
}
