package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestCheckGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		golden string
	}{
		{"broken", []string{"check", "testdata/broken-nodes.yaml"}, 1, "testdata/broken-nodes.golden"},
		{"example", []string{"check", "-topology", "../testdata/cluster-topology.json", "../testdata/nodes.yaml"}, 0, "testdata/example.golden"},
		{"example, topology found beside it", []string{"check", "../testdata/nodes.yaml"}, 0, "testdata/example.golden"},
		{"broken, as JSON", []string{"check", "-o", "json", "testdata/broken-nodes.yaml"}, 1, "testdata/check-broken.json.golden"},
		{"example, as JSON", []string{"check", "-o", "json", "../testdata/nodes.yaml"}, 0, "testdata/check-example.json.golden"},
	} {
		t.Run(tc.name, func(t *testing.T) { golden(t, tc.golden, runQuiet(t, tc.code, tc.args...)) })
	}
}

func TestCheckTopologyInConfigDir(t *testing.T) {
	// The runbook's layout: inventory/nodes.yaml and config/cluster-topology.json.
	dir := t.TempDir()
	for src, dst := range map[string]string{
		"../testdata/nodes.yaml":            "inventory/nodes.yaml",
		"../testdata/cluster-topology.json": "config/cluster-topology.json",
	} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, dst)), 0o755))
		writeFile(t, filepath.Join(dir, dst), mustRead(t, src))
	}
	mustRun(t, "check", filepath.Join(dir, "inventory/nodes.yaml"))
}

// A command line fleetctl cannot run exits 2 and says why: no command or
// an unknown one, a wrong number of arguments, a topology file missing or
// not found, a nodes file missing (in the runbook's layout: said in one
// line), an output other than text or json; plan's are TestPlanRefuses's.
func TestUsage(t *testing.T) {
	t.Setenv("NETBOX_URL", "http://netbox.invalid")
	t.Setenv("NETBOX_TOKEN", "t")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "nodes.yaml"), "nodes: {}\n")
	missing := filepath.Join(dir, "inventory", "nodes.yaml")
	const outputs = `-o "yaml": the output is text or json`
	for _, c := range []struct {
		args   []string
		stderr string // a part of what it explains; the whole of it when it ends in a newline
	}{
		{nil, "usage:\n  fleetctl check "},
		{[]string{"frobnicate"}, `fleetctl: unknown command "frobnicate"`},
		{[]string{"check"}, "usage: fleetctl check "},
		{[]string{"check", "a", "b"}, "usage: fleetctl check "},
		{[]string{"check", "-topology", "/nonexistent", "../testdata/nodes.yaml"}, "fleetctl check: open /nonexistent: no such file or directory\n"},
		{[]string{"check", filepath.Join(dir, "nodes.yaml")}, "pass -topology FILE"},
		{[]string{"check", missing}, "fleetctl check: no nodes file at " + missing + "\n"},
		{[]string{"check", "-topology", "../testdata/cluster-topology.json", missing}, "fleetctl check: no nodes file at " + missing + "\n"},
		{[]string{"version", "extra"}, "usage: fleetctl version\n"},
		{[]string{"check", "-o", "yaml", "../testdata/nodes.yaml"}, outputs},
		{[]string{"status", "-o", "yaml"}, outputs},
	} {
		code, _, stderr := fleetctl(c.args...)
		if code != 2 || !explains(stderr, c.stderr) {
			t.Errorf("%q: exit %d, stderr %q; want 2, and %q", c.args, code, stderr, c.stderr)
		}
	}
}

// explains reports whether stderr says want: the whole of it when want
// ends in a newline, else a part of it; nothing when want is "".
func explains(stderr, want string) bool {
	if want == "" || strings.HasSuffix(want, "\n") {
		return stderr == want
	}
	return strings.Contains(stderr, want)
}
