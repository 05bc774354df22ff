package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/inventory"
)

// runJSON runs fleetctl with args, wants exit code, nothing on stderr and
// one JSON object on stdout, and returns stdout.
func runJSON(t *testing.T, code int, args ...string) string {
	t.Helper()
	got, stdout, stderr := fleetctl(args...)
	if got != code {
		t.Fatalf("%q: exit %d, want %d\n%s%s", args, got, code, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("%q: stderr: %s", args, stderr)
	}
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

func TestCheckJSONGolden(t *testing.T) {
	golden(t, "testdata/check-broken.json.golden", runJSON(t, 1, "check", "-o", "json", "testdata/broken-nodes.yaml"))
	golden(t, "testdata/check-example.json.golden", runJSON(t, 0, "check", "-o", "json", "../testdata/nodes.yaml"))
}

func TestApplySavedPlan(t *testing.T) {
	srv := netBox(t)
	dir := t.TempDir()
	planFile := filepath.Join(dir, "folly.plan")
	args := []string{"-nodes", "../testdata/nodes.yaml", "-switch", "usw"}

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
	wroteNothing(t, srv, "plan -out, and apply of what is not a plan of this NetBox")

	// Another apply writes NetBox after the plan: the saved plan is stale.
	stale := filepath.Join(dir, "stale.plan")
	oneChange := changedNodes(t, dir)
	mustRun(t, "plan", "-out", stale, "-nodes", oneChange, "-switch", "usw")

	// Applying the saved plan writes it, whatever the nodes file says now.
	if stdout := mustRun(t, "apply", planFile); !strings.HasSuffix(stdout, "\nApply complete: 32 added, 0 changed.\n") {
		t.Errorf("apply FILE printed:\n%s", stdout)
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

// changedNodes writes examples/testdata/nodes.yaml with w-02's disk serial
// changed, and its topology, to dir, and returns the nodes file's path.
func changedNodes(t *testing.T, dir string) string {
	t.Helper()
	sub := filepath.Join(dir, "changed")
	must(t, os.MkdirAll(sub, 0o755))
	changed := strings.Replace(mustRead(t, "../testdata/nodes.yaml"), "disk_serial: BTHH81230456513B", "disk_serial: BTHH81230456599Z", 1)
	writeFile(t, filepath.Join(sub, "nodes.yaml"), changed)
	writeFile(t, filepath.Join(sub, "cluster-topology.json"), mustRead(t, "../testdata/cluster-topology.json"))
	return filepath.Join(sub, "nodes.yaml")
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
