package kubetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/internal/repotest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// The CRDs checked in under examples/deploy/crds are what controller-gen
// (tools/crd) generates from the tinkerbell API module tools/crd requires:
// the same files, byte for byte.
func TestCRDsAreCurrent(t *testing.T) {
	testenv.Short(t)
	root, err := repotest.Root()
	if err != nil {
		t.Fatal(err)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		testenv.Unavailable(t, "needs the go command on PATH to run controller-gen")
	}
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), goCmd, append([]string{"-C", filepath.Join(root, crdGenerator)}, crdGenerateArgs(out)...)...)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go -C %s %s: %v\n%s", crdGenerator, strings.Join(crdGenerateArgs(out), " "), err, msg)
	}
	want := readDir(t, out)
	got := readDir(t, filepath.Join(root, filepath.FromSlash(CRDDir)))
	if len(want) != 7 {
		t.Errorf("controller-gen generated %d CRDs, want 7 (hardware, templates, workflows, workflowrulesets; bmc jobs, tasks, machines)", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s differs from what controller-gen generates (-generated +checked in):\n%s\nrun go generate ./internal/kubetest, and delete the files it no longer writes", CRDDir, diff)
	}
}

// readDir returns the *.yaml files of dir by name.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]string)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(f)] = string(data)
	}
	return m
}

// readCRDs refuses a file that holds anything but CRDs, and an empty
// directory gives none (applyCRDs then fails with errNoCRDs).
func TestReadCRDs(t *testing.T) {
	dir := t.TempDir()
	crds, err := readCRDs(dir)
	if err != nil || len(crds) != 0 {
		t.Fatalf("readCRDs(empty) = %d, %v; want none", len(crds), err)
	}
	crd := "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: a.example.org\n"
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(crd+"---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	crds, err = readCRDs(dir)
	if err != nil || len(crds) != 1 || crds[0].GetName() != "a.example.org" {
		t.Fatalf("readCRDs(one CRD) = %v, %v", crds, err)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
	if err := os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readCRDs(dir); err == nil || !strings.Contains(err.Error(), `ConfigMap "x", not a CustomResourceDefinition`) {
		t.Fatalf("readCRDs(a ConfigMap) = %v, want a refusal naming it", err)
	}
}
