package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

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
// with -detailed-exitcode, and writes nothing; apply writes it; then plan
// says nothing is to be done, until one field of the nodes file changes.
func TestPlanApplyGolden(t *testing.T) {
	srv := netBox(t)
	args := []string{"-nodes", "../testdata/nodes.yaml", "-switch", "usw"}
	golden(t, "testdata/plan.golden", mustRun(t, append([]string{"plan"}, args...)...))
	golden(t, "testdata/plan.json.golden", runJSON(t, 0, append([]string{"plan", "-o", "json"}, args...)...))
	golden(t, "testdata/plan-broken.json.golden", runJSON(t, 1, "plan", "-o", "json", "-nodes", "testdata/broken-nodes.yaml"))
	golden(t, "testdata/plan-conflict.json.golden", runJSON(t, 1, "plan", "-o", "json", "-nodes", "../testdata/nodes.yaml"))
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		code int
	}{
		{name: "changes", args: args, code: 2},
		{name: "changes, as JSON", args: append([]string{"-o", "json"}, args...), code: 2},
		{name: "a broken nodes file", args: []string{"-nodes", "testdata/broken-nodes.yaml"}, code: 1},
		{name: "a conflict", args: []string{"-nodes", "../testdata/nodes.yaml"}, code: 1},
		{name: "a refused token", args: args, env: map[string]string{"NETBOX_TOKEN": "nope"}, code: 1},
		{name: "no NetBox named", args: args, env: map[string]string{"NETBOX_URL": ""}, code: 1},
		{name: "an unknown flag", args: append([]string{"-frobnicate"}, args...), code: 1},
		{name: "an argument", args: append(args, "nodes.yaml"), code: 1},
		{name: "an unknown output", args: append([]string{"-o", "yaml"}, args...), code: 1},
	} {
		t.Run("-detailed-exitcode, "+c.name, func(t *testing.T) {
			setenv(t, c.env)
			if code, stdout, stderr := fleetctl(append([]string{"plan", "-detailed-exitcode"}, c.args...)...); code != c.code {
				t.Errorf("exit %d, want %d\n%s%s", code, c.code, stdout, stderr)
			}
		})
	}
	wroteNothing(t, srv, "plan")

	if stdout := mustRun(t, append([]string{"apply"}, args...)...); !strings.HasSuffix(stdout, "\nApply complete: 32 added, 0 changed.\n") {
		t.Errorf("apply printed:\n%s", stdout)
	}
	if code, stdout, _ := fleetctl(append([]string{"plan"}, args...)...); code != 0 || stdout != "No changes. NetBox matches the nodes file.\n" {
		t.Errorf("plan after apply: exit %d\n%s", code, stdout)
	}
	golden(t, "testdata/plan-empty.json.golden", runJSON(t, 0, append([]string{"plan", "-o", "json"}, args...)...))
	if code, stdout, stderr := fleetctl(append([]string{"plan", "-detailed-exitcode"}, args...)...); code != 0 {
		t.Errorf("-detailed-exitcode, no changes: exit %d, want 0\n%s%s", code, stdout, stderr)
	}

	// One field of one node changes: one update of one field.
	golden(t, "testdata/plan-one-change.golden", mustRun(t, "plan", "-nodes", changedNodes(t, t.TempDir()), "-switch", "usw"))
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
		{name: "no nodes file", args: []string{"plan", "-nodes", "/nonexistent/nodes.yaml"}, code: 2, stderr: "no nodes file at /nonexistent/nodes.yaml"},
	} {
		t.Run(c.name, c.run)
	}
	wroteNothing(t, srv, "a refused plan or apply")
}
