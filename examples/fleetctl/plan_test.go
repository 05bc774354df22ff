package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// netBox starts a netboxtest NetBox with the folly site and its switch,
// checking every exchange against NetBox's schema, and points NETBOX_URL and
// NETBOX_TOKEN at it.
func netBox(t *testing.T) *netboxtest.Server {
	t.Helper()
	srv := netboxtest.New(&netboxtest.Config{Validate: t, Users: []string{"terraform"}})
	t.Cleanup(srv.Close)
	if _, err := srv.AddSwitch(netboxtest.Switch{Site: "folly", Name: "usw", Ports: 24}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NETBOX_URL", srv.URL)
	t.Setenv("NETBOX_TOKEN", srv.Token("terraform"))
	return srv
}

// golden compares got with the golden file, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		writeFile(t, path, got)
	}
	if want := mustRead(t, path); got != want {
		t.Errorf("output:\n%s\nwant (%s):\n%s", got, path, want)
	}
}

// fleetctl runs fleetctl with args and returns its exit code and output.
func fleetctl(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// mustRun runs fleetctl with args, fails t unless it exits 0, and returns
// its stdout.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := fleetctl(args...)
	if code != 0 {
		t.Fatalf("%q: exit %d\n%s%s", args, code, stdout, stderr)
	}
	return stdout
}

// wroteNothing fails t for each request srv took that was not a read;
// what names the command that made them.
func wroteNothing(t *testing.T, srv *netboxtest.Server, what string) {
	t.Helper()
	for _, r := range srv.Requests() {
		if r.Method != "GET" {
			t.Errorf("%s wrote: %s %s", what, r.Method, r.URI)
		}
	}
}

// A cliCase is a run of fleetctl: its arguments and environment, and
// what it must exit with, print and explain.
type cliCase struct {
	name   string
	args   []string
	env    map[string]string
	code   int
	stdout string // what it prints (see explains)
	stderr string // what it explains (see explains)
}

// run runs fleetctl as c says, and fails t unless it exits c.code,
// printing c.stdout and explaining c.stderr.
func (c cliCase) run(t *testing.T) {
	t.Helper()
	setenv(t, c.env)
	code, stdout, stderr := fleetctl(c.args...)
	if code != c.code {
		t.Errorf("exit %d, want %d\n%s%s", code, c.code, stdout, stderr)
	}
	if !explains(stdout, c.stdout) {
		t.Errorf("stdout %q, want %q", stdout, c.stdout)
	}
	if !explains(stderr, c.stderr) {
		t.Errorf("stderr %q, want %q", stderr, c.stderr)
	}
}

// setenv sets each of env's variables for the rest of t.
func setenv(t *testing.T, env map[string]string) {
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// plan says what apply would write, as text, as JSON and in its exit code
// with -detailed-exitcode, and writes nothing; plan -out saves it, and
// apply of the saved plan writes exactly it, whatever the nodes file says
// by then, unless NetBox changed since (fleetd recording an attestation
// is no change); apply refuses what is not a plan of this NetBox. Then
// plan says nothing is to be done, until one field of the nodes file
// changes.
func TestPlanApplyGolden(t *testing.T) {
	srv := netBox(t)
	dir := t.TempDir()
	planFile := filepath.Join(dir, "folly.plan")
	args := []string{"-nodes", "../testdata/nodes.yaml", "-switch", "usw"}
	golden(t, "testdata/plan.golden", mustRun(t, append([]string{"plan"}, args...)...))
	golden(t, "testdata/plan.json.golden", runJSON(t, 0, append([]string{"plan", "-o", "json"}, args...)...))
	golden(t, "testdata/plan-broken.json.golden", runJSON(t, 1, "plan", "-o", "json", "-nodes", "testdata/broken-nodes.yaml"))
	golden(t, "testdata/plan-conflict.json.golden", runJSON(t, 1, "plan", "-o", "json", "-nodes", "../testdata/nodes.yaml"))
	// With -detailed-exitcode, changes exit 2 (a refusal exits 1: see
	// TestPlanRefuses).
	for _, a := range [][]string{args, append([]string{"-o", "json"}, args...)} {
		if code, stdout, stderr := fleetctl(append([]string{"plan", "-detailed-exitcode"}, a...)...); code != exitChanges {
			t.Errorf("-detailed-exitcode %q: exit %d, want 2\n%s%s", a, code, stdout, stderr)
		}
	}
	stdout := mustRun(t, append([]string{"plan", "-out", planFile}, args...)...)
	if want := "\nSaved the plan to " + planFile + ". To write exactly it, run: fleetctl apply " + planFile + "\n"; !strings.HasSuffix(stdout, want) {
		t.Errorf("plan -out printed:\n%s", stdout)
	}
	notPlan := filepath.Join(dir, "nodes.yaml")
	writeFile(t, notPlan, "nodes: {}\n")
	for _, c := range []cliCase{
		{name: "not a plan", args: []string{"apply", notPlan}, code: 2, stderr: notPlan + " is not a plan fleetctl plan -out wrote"},
		{name: "no such file", args: []string{"apply", filepath.Join(dir, "none.plan")}, code: 2, stderr: "no such file"},
		{name: "another NetBox", args: []string{"apply", planFile}, env: map[string]string{"NETBOX_URL": "https://netbox.invalid"}, code: 1,
			stderr: "was planned against the NetBox at http://"},
		{name: "two files", args: []string{"apply", planFile, planFile}, code: 2, stderr: "usage: fleetctl apply"},
	} {
		t.Run(c.name, c.run)
	}
	wroteNothing(t, srv, "plan, plan -out, and apply of what is not a plan of this NetBox")

	// Another apply writes NetBox after the plan: the saved plan is stale.
	stale := filepath.Join(dir, "stale.plan")
	oneChange := changedNodes(t, "disk_serial: BTHH81230456513B", "disk_serial: BTHH81230456599Z") // w-02's disk serial
	mustRun(t, "plan", "-out", stale, "-nodes", oneChange, "-switch", "usw")
	// Applying the saved plan writes it, whatever the nodes file says now.
	if stdout := mustRun(t, "apply", planFile); !strings.HasSuffix(stdout, "\nApply complete: 32 added, 0 changed.\n") {
		t.Errorf("apply FILE printed:\n%s", stdout)
	}
	if code, stdout, _ := fleetctl(append([]string{"plan"}, args...)...); code != 0 || stdout != "No changes. NetBox matches the nodes file.\n" {
		t.Errorf("plan after apply: exit %d\n%s", code, stdout)
	}
	golden(t, "testdata/plan-empty.json.golden", runJSON(t, 0, append([]string{"plan", "-o", "json"}, args...)...))
	if code, stdout, stderr := fleetctl(append([]string{"plan", "-detailed-exitcode"}, args...)...); code != 0 {
		t.Errorf("-detailed-exitcode, no changes: exit %d, want 0\n%s%s", code, stdout, stderr)
	}

	srv.ResetRequests()
	code, stdout, stderr := fleetctl("apply", stale)
	if code != 1 {
		t.Errorf("apply of a stale plan: exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	if want := "fleetctl apply: NetBox changed since the plan was made in " + stale; !strings.HasPrefix(stderr, want) ||
		!strings.HasSuffix(stderr, "; nothing was applied: run fleetctl plan -out "+stale+" again\n") {
		t.Errorf("apply of a stale plan said %q", stderr)
	}
	wroteNothing(t, srv, "apply of a stale plan")

	// One field of one node changes: one update of one field.
	golden(t, "testdata/plan-one-change.golden", mustRun(t, "plan", "-nodes", oneChange, "-switch", "usw"))
	// fleetd recording an attestation does not make a plan stale.
	fresh := filepath.Join(dir, "fresh.plan")
	mustRun(t, "plan", "-out", fresh, "-nodes", oneChange, "-switch", "usw")
	fleetd, err := inventory.NewNetBox(srv.URL, srv.AddUser("fleetd"), &inventory.NetBoxConfig{Switch: "usw"})
	must(t, err)
	attested(t, fleetd, device(t, fleetd, "7090-CN0F4K2"), "58:47:ca:70:00:21", time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC))
	if stdout := mustRun(t, "apply", fresh); !strings.HasSuffix(stdout, "\nApply complete: 0 added, 1 changed.\n") {
		t.Errorf("apply FILE printed:\n%s", stdout)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// plan and apply refuse what they cannot plan, say why and write nothing;
// plan -detailed-exitcode, whose 2 means changes, exits 1 on each refusal
// and says the same.
func TestPlanRefuses(t *testing.T) {
	srv := netBox(t)
	for _, c := range []cliCase{
		{name: "a broken nodes file", args: []string{"plan", "-nodes", "testdata/broken-nodes.yaml", "-switch", "usw"}, code: 1,
			stdout: "testdata/broken-nodes.yaml: 17 problems; nothing was planned"},
		{name: "no NetBox named", args: []string{"plan", "-nodes", "../testdata/nodes.yaml"}, env: map[string]string{"NETBOX_URL": ""}, code: 2,
			stderr: "set NETBOX_URL"},
		{name: "a refused token", args: []string{"plan", "-nodes", "../testdata/nodes.yaml", "-switch", "usw"}, env: map[string]string{"NETBOX_TOKEN": "nope"}, code: 2,
			stderr: "netbox refused the token"},
		{name: "no such switch", args: []string{"plan", "-nodes", "../testdata/nodes.yaml"}, code: 1,
			stdout: "switch switch is not a device of site folly in NetBox"},
		{name: "no such site", args: []string{"apply", "-nodes", "../testdata/nodes.yaml", "-site", "nowhere", "-switch", "usw"}, code: 1,
			stdout: "site nowhere is not in NetBox"},
		{name: "an argument", args: []string{"plan", "nodes.yaml"}, code: 2, stderr: "usage: fleetctl plan"},
		{name: "no nodes file", args: []string{"plan", "-nodes", "/nonexistent/nodes.yaml"}, code: 2, stderr: "fleetctl plan: no nodes file at /nonexistent/nodes.yaml\n"},
		{name: "an unknown flag", args: []string{"plan", "-frobnicate"}, code: 2, stderr: "flag provided but not defined: -frobnicate"},
		{name: "an unknown output", args: []string{"plan", "-o", "yaml", "-nodes", "../testdata/nodes.yaml"}, code: 2,
			stderr: `-o "yaml": the output is text or json`},
	} {
		t.Run(c.name, c.run)
		if c.args[0] == "plan" {
			c.args, c.code = slices.Insert(c.args, 1, "-detailed-exitcode"), 1
			t.Run(c.name+", -detailed-exitcode", c.run)
		}
	}
	wroteNothing(t, srv, "a refused plan or apply")
}
