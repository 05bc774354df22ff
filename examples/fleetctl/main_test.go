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
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := fleetctl(tc.args...)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			if stderr != "" {
				t.Errorf("stderr: %s", stderr)
			}
			golden(t, tc.golden, stdout)
		})
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

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"check"}, {"check", "a", "b"}, {"check", "-topology", "/nonexistent", "../testdata/nodes.yaml"}} {
		code, _, stderr := fleetctl(args...)
		if code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
		if stderr == "" {
			t.Errorf("run(%q) explained nothing on stderr", args)
		}
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "nodes.yaml"), "nodes: {}\n")
	if code, _, stderr := fleetctl("check", filepath.Join(dir, "nodes.yaml")); code != 2 || !strings.Contains(stderr, "pass -topology FILE") {
		t.Errorf("no topology: exit %d, stderr %q", code, stderr)
	}
}

func TestCheckMissingNodesFile(t *testing.T) {
	t.Setenv("NETBOX_URL", "http://netbox.invalid")
	t.Setenv("NETBOX_TOKEN", "t")
	dir := t.TempDir()
	missing := filepath.Join(dir, "inventory", "nodes.yaml")
	for _, args := range [][]string{
		{"check", missing},
		{"check", "-topology", "../testdata/cluster-topology.json", missing},
		{"plan", "-nodes", missing},
	} {
		code, _, stderr := fleetctl(args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
		if want := "fleetctl " + args[0] + ": no nodes file at " + missing + "\n"; stderr != want {
			t.Errorf("%q: stderr %q, want %q", args, stderr, want)
		}
	}
}
