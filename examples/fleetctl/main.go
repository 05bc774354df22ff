// Command fleetctl is the operator's tool for a fleet inventory.
//
//	fleetctl check [-topology FILE] NODES_FILE
//	fleetctl plan  [-nodes FILE] [-topology FILE] [-site SLUG] [-switch NAME] [flags]
//	fleetctl apply [-nodes FILE] [-topology FILE] [-site SLUG] [-switch NAME] [flags]
//	fleetctl status [-role SLUG]
//	fleetctl approve SERIAL
//	fleetctl render-class-inputs [-nodes FILE] [-topology FILE] [-san SAN]...
//
// check validates a nodes file against its cluster topology and prints every
// problem as FILE:LINE:COL: node NAME: problem, exiting 1, or prints a
// one-line summary and exits 0. Without -topology it reads
// cluster-topology.json beside the nodes file, or in ../config/ as the
// runbook's layout has it (clusters/<cluster>/inventory/nodes.yaml and
// clusters/<cluster>/config/cluster-topology.json).
//
// plan compares the nodes file (-nodes, default nodes.yaml; its topology
// found as check finds it) with NetBox and prints what apply would write,
// as terraform plan does: "+" for a device (or custom field, role,
// manufacturer, device type) to create, "~" for one to update with each
// field's old -> new value, and a summary line such as "Plan: 2 to add, 1
// to change.". It writes nothing. apply prints the same plan and writes
// it: planned devices with their serial, class, install disk, approved EK
// binding, address and cable to the switch port, and no MAC. Neither ever
// deletes a device or touches what fleetd records. A nodes file with
// problems is reported as check reports it, and nothing reaches NetBox.
//
// NETBOX_URL names the NetBox and NETBOX_TOKEN its API token; the token's
// user is the binding author fleetd's bindingAuthor must name. -site
// defaults to the topology's CLUSTER_NAME; -switch (default "switch") names
// the switch device whose ports, named "Port N" (-port-name), the nodes'
// switch_port numbers name. Run fleetctl plan -h for every flag.
//
// status prints a table of fleet's devices in NetBox, sorted by host name:
// each one's serial, status, attest_verdict, last_run (its current or last
// Workflow) and desired_action, "-" for a field that is unset, then a count
// by status.
//
// approve fetches the claims that wait for SERIAL from fleetd's approver
// API (GET $FLEETD_URL/v1/claims/SERIAL over HTTPS, one claim per TPM that
// claimed the serial, oldest first). For one claim it prints the claim,
// then the lines approved_ek_rsa2048: <hash> and approved_ek_eccp256:
// <hash> for the node's entry in the nodes file. For more than one it
// first says "more than one TPM claims serial SERIAL: N claims; compare
// each with your evidence, and approve none you cannot tie to the
// machine", then prints each claim followed by its own lines. It approves
// nothing: a waiting claim proves nothing, because another machine can
// send one with this serial, so compare each hash with your evidence
// before the lines go in the entry.
// FLEETD_URL names fleetd (https only); FLEET_APPROVER_TOKEN is an approver
// token, or FLEETD_CERT and FLEETD_KEY name an approver's client
// certificate and key (PEM), or both; FLEETD_CA names the PEM file of the
// CA that signed fleetd's certificate (default: the system's roots). One
// claim with its lines exits 0; no claim waiting for SERIAL, a claim that
// proved no EK, or more than one claim exits 1; a refused token or
// certificate exits 2.
//
// render-class-inputs prints the class inputs of the next control plane: a
// Talos machine config patch whose API server and machine certificate SANs
// hold every control plane's address in NetBox, then each -san, in the
// stable form provision.RenderClassInputs documents, to be committed for
// the Talos root. The nodes file (-nodes, its topology found as check finds
// it) says which classes are control planes. No control plane with an
// address in NetBox exits 1.
//
// status, render-class-inputs, plan and apply read NETBOX_URL and
// NETBOX_TOKEN.
//
// Exit codes: 0 success, 1 a problem to act on (the inventory has problems
// or conflicts with NetBox, no claim waits, no control plane), 2 usage, I/O,
// NetBox or fleetd errors (not answering, a refused token). An apply that
// stops midway leaves nothing a second apply does not finish.
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
  fleetctl plan  [-nodes FILE] [-topology FILE] [-site SLUG] [-switch NAME] [flags]
  fleetctl apply [-nodes FILE] [-topology FILE] [-site SLUG] [-switch NAME] [flags]
  fleetctl status [-role SLUG]
  fleetctl approve SERIAL
  fleetctl render-class-inputs [-nodes FILE] [-topology FILE] [-san SAN]...
Run fleetctl COMMAND -h for a command's flags and environment.
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
	case "plan":
		return planCmd("plan", false, args[1:], stdout, stderr)
	case "apply":
		return planCmd("apply", true, args[1:], stdout, stderr)
	case "status":
		return statusCmd(args[1:], stdout, stderr)
	case "approve":
		return approveCmd(args[1:], stdout, stderr)
	case "render-class-inputs":
		return classInputsCmd(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "fleetctl: unknown command %q\n%s", args[0], usage)
	return 2
}
