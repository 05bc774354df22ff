// Command fleetctl is the operator's tool for a fleet inventory.
//
//	fleetctl check [-topology FILE] [-o json] NODES_FILE
//	fleetctl plan  [-nodes FILE] [-topology FILE] [-site SLUG] [-switch NAME] [-o json] [-detailed-exitcode] [-out FILE] [flags]
//	fleetctl apply [-nodes FILE] [-topology FILE] [-site SLUG] [-switch NAME] [flags]
//	fleetctl apply PLAN_FILE
//	fleetctl status [-role SLUG] [-o json] [-kubeconfig FILE [-namespace NS]] [-w]
//	fleetctl approve SERIAL
//	fleetctl render-class-inputs [-nodes FILE] [-topology FILE] [-san SAN]...
//	fleetctl version
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
// plan -detailed-exitcode exits as terraform plan -detailed-exitcode does,
// for Atlantis and CI: 0 when the plan changes nothing, 2 when it changes
// something, 1 on anything else (a nodes file with problems, a conflict
// with NetBox, NetBox not answering, a refused token, a usage error).
//
// plan -out FILE also writes the plan to FILE (JSON, kind
// "fleetctl-plan"): the nodes file and topology it was made from, the
// settings, NETBOX_URL, the plan, and a digest of what it read of NetBox
// (the plan's changes and, of each of fleet's devices, the fields the plan
// compares with the nodes file; not what fleetd records, such as the MAC
// or the attestation, so that an attestation between plan and apply does
// not void the plan). fleetctl apply FILE plans again from what FILE
// holds, and writes the plan only when the digest is unchanged; otherwise
// it exits 1 with "NetBox changed since the plan was made in FILE (...);
// nothing was applied: run fleetctl plan -out FILE again", having written
// nothing. The nodes file on disk and plan's flags play no part in apply
// FILE, and NETBOX_URL must name the NetBox the plan read (else it exits
// 1).
//
// NETBOX_URL names the NetBox and NETBOX_TOKEN its API token; the token's
// user is the binding author fleetd's bindingAuthor must name. -site
// defaults to the topology's CLUSTER_NAME; -switch (default "switch") names
// the switch device whose ports, named "Port N" (-port-name), the nodes'
// switch_port numbers name. Run fleetctl plan -h for every flag.
//
// status prints a table of fleet's devices in NetBox, sorted by host name:
// each one's serial, status, address, MAC, attest_verdict, last_run (its
// current or last Workflow) and desired_action, "-" for a field that is
// unset, then a count by status. fleetctl reaches Kubernetes only for
// this, and only when asked: with -kubeconfig FILE (and -namespace,
// default tinkerbell) it also reads the Workflows (list only) and shows
// each device's Workflow state and the action running or last run, the
// Workflow being the one last_run names. status -w watches, as the
// runbook's kubectl get workflows -w does: it prints the table, then,
// every -interval (default 2s) until interrupted, a device's row again
// each time it changes; a read that fails is said once on stderr, and the
// watch goes on.
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
// stable form inventory.RenderClassInputs documents, to be committed for
// the Talos root. The nodes file (-nodes, its topology found as check finds
// it) says which classes are control planes. No control plane with an
// address in NetBox exits 1.
//
// version prints the build's version line, "fleetctl version=<module
// version> revision=<commit> modified=<true|false> goversion=<Go
// release>", the fields fleetd -version prints (package
// internal/buildinfo; "unknown" for what the build did not record).
//
// status, render-class-inputs, plan and apply read NETBOX_URL and
// NETBOX_TOKEN.
//
// # JSON output
//
// check, plan and status take -o json and then print one JSON object on
// stdout instead of text (fleetctl help json prints the shapes below),
// with the same exit codes; errors that exit 2 (usage, I/O, NetBox not
// answering) stay text on stderr, and stdout is then empty. Every document has "format_version": 1. A change that
// renames, removes or retypes a key raises it; a new key may appear
// without. Keys are always present; null stands for a value that is
// unset, [] for an empty list.
//
// check -o json:
//
//	{"format_version": 1, "file": NODES_FILE, "valid": bool,
//	 "problems": [PROBLEM...],
//	 "summary": null | {"nodes": n, "control_planes": n, "workers": n,
//	   "approved_ek_bindings": n, "models": n, "classes": n,
//	   "node_cidr": "10.40.0.0/24", "bootstrap_node": NAME | null}}
//
// where a PROBLEM is {"file", "line", "column" (0 when the problem has no
// place in the file), "subject" ("node w-01", "model ms-01", "class
// worker", or null for the file), "text"}, as check prints
// FILE:LINE:COL: SUBJECT: TEXT; bootstrap_node is the node at
// API_SERVER_IP.
//
// plan -o json:
//
//	{"format_version": 1, "file": NODES_FILE,
//	 "problems": [PROBLEM...], "conflicts": [TEXT...],
//	 "changes": [{"action": "create" | "update",
//	   "kind": "custom field" | "device role" | "manufacturer" | "device type" | "device",
//	   "name": NAME, "fields": [{"name": FIELD, "old": VALUE | null, "new": VALUE | null}...]}...],
//	 "unlisted": [NAME...], "add": n, "change": n}
//
// changes are in the order apply writes them; unlisted names fleet's
// devices in NetBox that no entry names (fleet never deletes them). A
// nodes file with problems fills only problems, a conflict with NetBox
// only conflicts (both exit 1).
//
// status -o json:
//
//	{"format_version": 1, "role": SLUG,
//	 "devices": [{"id": n, "name", "serial", "status", "class",
//	   "address" ("10.40.0.21", without the prefix length), "mac",
//	   "switch_port" (n), "attest_verdict", "attested_at" (RFC 3339, UTC),
//	   "last_run", "desired_action",
//	   "workflow": null | {"name": NAME, "state": STATE | null, "action": ACTION | null}}...]}
//
// devices are sorted by name, then NetBox ID; each value but id is null
// when NetBox holds none. workflow is the Workflow last_run names, read
// with -kubeconfig (null without it, or when the cluster holds no such
// Workflow): its status.state ("PENDING", "RUNNING", "SUCCESS",
// "FAILED", "TIMEOUT") and the name of the action running or last run.
//
// Exit codes: 0 success, 1 a problem to act on (the inventory has problems
// or conflicts with NetBox, no claim waits, no control plane), 2 usage, I/O,
// NetBox or fleetd errors (not answering, a refused token). An apply that
// stops midway leaves nothing a second apply does not finish.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  fleetctl check [-topology FILE] [-o json] NODES_FILE
  fleetctl plan  [-nodes FILE] [-topology FILE] [-site SLUG] [-switch NAME] [-o json] [-detailed-exitcode] [-out FILE] [flags]
  fleetctl apply [-nodes FILE] [-topology FILE] [-site SLUG] [-switch NAME] [flags]
  fleetctl apply PLAN_FILE
  fleetctl status [-role SLUG] [-o json] [-kubeconfig FILE [-namespace NS]] [-w]
  fleetctl approve SERIAL
  fleetctl render-class-inputs [-nodes FILE] [-topology FILE] [-san SAN]...
  fleetctl version
Run fleetctl COMMAND -h for a command's flags and environment,
and fleetctl help json for the keys of -o json.
`

// netBoxEnvHelp is the usage line of the commands that reach NetBox.
const netBoxEnvHelp = "NETBOX_URL and NETBOX_TOKEN name the NetBox and its API token."

// command is one fleetctl command: its usage, its flags and its body.
type command struct {
	name  string
	usage string   // the usage line, after "usage: "
	help  []string // lines the usage prints before the flags: the environment it reads
	nargs int      // how many arguments follow the flags; -1: the body checks
	// flags defines the command's flags on fs and returns its body, which
	// runs once the flags parsed and returns the exit code.
	flags func(fs *flag.FlagSet) func(c *call) int
}

// commands are fleetctl's commands.
var commands = []command{
	{name: "check", usage: "fleetctl check [-topology FILE] [-o json] NODES_FILE", nargs: 1, flags: checkFlags, help: []string{jsonHelp}},
	{name: "plan", usage: "fleetctl plan [-nodes FILE] [-topology FILE] [-site SLUG] [-switch NAME] [-o json] [-detailed-exitcode] [-out FILE] [flags]", help: []string{netBoxEnvHelp, jsonHelp},
		flags: func(fs *flag.FlagSet) func(*call) int { return planFlags(fs, false) }},
	{name: "apply", usage: "fleetctl apply [-nodes FILE] [-topology FILE] [-site SLUG] [-switch NAME] [flags] | fleetctl apply PLAN_FILE", nargs: -1,
		help:  []string{netBoxEnvHelp, "With PLAN_FILE (from fleetctl plan -out) it writes that plan, and refuses when NetBox changed since."},
		flags: func(fs *flag.FlagSet) func(*call) int { return planFlags(fs, true) }},
	{name: "status", usage: "fleetctl status [-role SLUG] [-timeout DURATION] [-o json] [-kubeconfig FILE [-namespace NS]] [-w [-interval DURATION]]",
		help: []string{netBoxEnvHelp, jsonHelp, "-kubeconfig names the cluster that runs the Workflows; without it, no Workflow is read."}, flags: statusFlags},
	{name: "approve", usage: "fleetctl approve [-timeout DURATION] SERIAL", nargs: 1, flags: approveFlags, help: []string{
		"FLEETD_URL names fleetd (https://...); FLEET_APPROVER_TOKEN is an approver token, or",
		"FLEETD_CERT and FLEETD_KEY an approver's client certificate; FLEETD_CA is fleetd's CA (PEM).",
	}},
	{name: "render-class-inputs", usage: "fleetctl render-class-inputs [-nodes FILE] [-topology FILE] [-san SAN]... [-role SLUG] [-timeout DURATION]",
		help: []string{netBoxEnvHelp}, flags: classInputsFlags},
	{name: "version", usage: "fleetctl version", flags: versionFlags},
}

// run runs one fleetctl command, interrupted by an interrupt signal, and
// returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return runContext(ctx, args, stdout, stderr)
}

// runContext runs one fleetctl command until ctx is done, and returns its
// exit code.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) == 2 && args[1] == "json" {
			fmt.Fprint(stdout, jsonShapes)
			return 0
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	for i := range commands {
		if commands[i].name == args[0] {
			return commands[i].run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "fleetctl: unknown command %q\n%s", args[0], usage)
	return 2
}

// run parses the command's flags and runs its body. A flag that does not
// parse, or another count of arguments, exits 2 with the usage.
func (cmd *command) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	body := cmd.flags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: "+cmd.usage)
		for _, l := range cmd.help {
			fmt.Fprintln(stderr, l)
		}
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return usageCode(args)
	}
	if cmd.nargs >= 0 && fs.NArg() != cmd.nargs {
		fs.Usage()
		return usageCode(args)
	}
	return body(&call{ctx: ctx, name: cmd.name, fs: fs, args: fs.Args(), stdout: stdout, stderr: stderr})
}

// usageCode is the exit code of a usage error: 2, or 1 when args ask for
// plan -detailed-exitcode, where 2 means a plan with changes.
func usageCode(args []string) int {
	for _, a := range args {
		switch a {
		case "-detailed-exitcode", "--detailed-exitcode", "-detailed-exitcode=true", "--detailed-exitcode=true":
			return 1
		case "--":
			return 2
		}
	}
	return 2
}

// call is one run of a command: its arguments and where it writes.
type call struct {
	ctx            context.Context // done when the command is to stop
	name           string
	fs             *flag.FlagSet
	args           []string // the arguments after the flags
	stdout, stderr io.Writer
}

// fail says err on stderr as "fleetctl NAME: err" and returns code.
func (c *call) fail(code int, err error) int {
	fmt.Fprintf(c.stderr, "fleetctl %s: %v\n", c.name, err)
	return code
}

// usage prints the command's usage and returns the usage exit code, 2.
func (c *call) usage() int {
	c.fs.Usage()
	return 2
}

// context is the context of the command's requests: done at an interrupt.
func (c *call) context() (context.Context, context.CancelFunc) {
	return context.WithCancel(c.ctx)
}
