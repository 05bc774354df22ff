package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// runQuiet runs fleetctl with args, wants exit code and nothing on
// stderr, and returns stdout.
func runQuiet(t *testing.T, code int, args ...string) string {
	t.Helper()
	got, stdout, stderr := fleetctl(args...)
	if got != code || stderr != "" {
		t.Fatalf("%q: exit %d, want %d and nothing on stderr\n%s%s", args, got, code, stdout, stderr)
	}
	return stdout
}

// runJSON is runQuiet that also wants one JSON object on stdout.
func runJSON(t *testing.T, code int, args ...string) string {
	t.Helper()
	stdout := runQuiet(t, code, args...)
	var v map[string]any
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&v); err != nil || dec.More() {
		t.Fatalf("%q: stdout is not one JSON object (%v):\n%s", args, err, stdout)
	}
	if v["format_version"] != float64(1) {
		t.Errorf("%q: format_version %v, want 1", args, v["format_version"])
	}
	return stdout
}

// changedNodes writes examples/testdata/nodes.yaml with old replaced by
// with, once, and its topology, to a new directory, and returns the nodes
// file's path.
func changedNodes(t *testing.T, old, with string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "nodes.yaml"), strings.Replace(mustRead(t, "../testdata/nodes.yaml"), old, with, 1))
	writeFile(t, filepath.Join(dir, "cluster-topology.json"), mustRead(t, "../testdata/cluster-topology.json"))
	return filepath.Join(dir, "nodes.yaml")
}

// TestJSONHelpNamesEveryKey checks that fleetctl help json and the package
// documentation name every key the JSON goldens hold.
func TestJSONHelpNamesEveryKey(t *testing.T) {
	code, stdout, _ := fleetctl("help", "json")
	if code != 0 {
		t.Fatalf("help json: exit %d", code)
	}
	doc := mustRead(t, "main.go")
	files, err := filepath.Glob("testdata/*.json.golden")
	if err != nil || len(files) == 0 {
		t.Fatalf("no JSON goldens: %v", err)
	}
	for _, f := range files {
		var v any
		must(t, json.Unmarshal([]byte(mustRead(t, f)), &v))
		for _, k := range jsonKeys(v) {
			if !strings.Contains(stdout, `"`+k+`"`) {
				t.Errorf("fleetctl help json does not name %q of %s", k, f)
			}
			if !strings.Contains(doc, `"`+k+`"`) {
				t.Errorf("the package documentation does not name %q of %s", k, f)
			}
		}
	}
}

// jsonKeys lists the keys of every object in v.
func jsonKeys(v any) []string {
	var keys []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			keys = append(keys, k)
			keys = append(keys, jsonKeys(e)...)
		}
	case []any:
		for _, e := range v {
			keys = append(keys, jsonKeys(e)...)
		}
	}
	return keys
}
