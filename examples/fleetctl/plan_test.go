package main

import (
	"bytes"
	"os"
	"path/filepath"
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
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("output:\n%s\nwant (%s):\n%s", got, path, want)
	}
}

func TestPlanApplyGolden(t *testing.T) {
	srv := netBox(t)
	args := []string{"-nodes", "../testdata/nodes.yaml", "-switch", "usw"}
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"plan"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("plan: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	golden(t, "testdata/plan.golden", stdout.String())
	for _, r := range srv.Requests() {
		if r.Method != "GET" {
			t.Errorf("plan wrote: %s %s", r.Method, r.URI)
		}
	}

	stdout.Reset()
	stderr.Reset()
	if code := run(append([]string{"apply"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.HasSuffix(stdout.String(), "\nApply complete: 32 added, 0 changed.\n") {
		t.Errorf("apply printed:\n%s", stdout.String())
	}

	stdout.Reset()
	if code := run(append([]string{"plan"}, args...), &stdout, &stderr); code != 0 || stdout.String() != "No changes. NetBox matches the nodes file.\n" {
		t.Errorf("plan after apply: exit %d\n%s", code, stdout.String())
	}

	// One field of one node changes: one update of one field.
	dir := t.TempDir()
	data, err := os.ReadFile("../testdata/nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(data), "disk_serial: BTHH81230456513B", "disk_serial: BTHH81230456599Z", 1)
	writeFile(t, filepath.Join(dir, "nodes.yaml"), changed)
	writeFile(t, filepath.Join(dir, "cluster-topology.json"), mustRead(t, "../testdata/cluster-topology.json"))
	stdout.Reset()
	if code := run([]string{"plan", "-nodes", filepath.Join(dir, "nodes.yaml"), "-switch", "usw"}, &stdout, &stderr); code != 0 {
		t.Fatalf("plan of a changed file: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	golden(t, "testdata/plan-one-change.golden", stdout.String())
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
	for _, c := range []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stdout string // a line it prints
		stderr string // a line it explains
	}{
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
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			if code := run(c.args, &stdout, &stderr); code != c.code {
				t.Errorf("exit %d, want %d\n%s%s", code, c.code, stdout.String(), stderr.String())
			}
			if c.stdout != "" && !strings.Contains(stdout.String(), c.stdout) {
				t.Errorf("stdout lacks %q:\n%s", c.stdout, stdout.String())
			}
			if c.stderr != "" && !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("stderr lacks %q:\n%s", c.stderr, stderr.String())
			}
		})
	}
	for _, r := range srv.Requests() {
		if r.Method != "GET" {
			t.Errorf("a refused plan or apply wrote: %s %s", r.Method, r.URI)
		}
	}
}
