package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
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
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			if stderr.Len() > 0 {
				t.Errorf("stderr: %s", stderr.String())
			}
			if *update {
				os.WriteFile(tc.golden, stdout.Bytes(), 0o644)
			}
			want, err := os.ReadFile(tc.golden)
			if err != nil {
				t.Fatal(err)
			}
			if got := stdout.String(); got != string(want) {
				t.Errorf("output:\n%s\nwant:\n%s", got, want)
			}
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
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(dir, dst)), 0o755)
		os.WriteFile(filepath.Join(dir, dst), data, 0o644)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check", filepath.Join(dir, "inventory/nodes.yaml")}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"check"}, {"check", "a", "b"}, {"check", "-topology", "/nonexistent", "../testdata/nodes.yaml"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
		if stderr.Len() == 0 {
			t.Errorf("run(%q) explained nothing on stderr", args)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nodes.yaml"), []byte("nodes: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"check", filepath.Join(dir, "nodes.yaml")}, &stdout, &stderr); code != 2 || !bytes.Contains(stderr.Bytes(), []byte("pass -topology FILE")) {
		t.Errorf("no topology: exit %d, stderr %q", code, stderr.String())
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
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
		if want := "fleetctl " + args[0] + ": no nodes file at " + missing + "\n"; stderr.String() != want {
			t.Errorf("%q: stderr %q, want %q", args, stderr.String(), want)
		}
	}
}
