// Package deptest checks the dependency direction between fleet's packages:
// each package's TestDeps names what it must never import, directly or not.
package deptest

import (
	"os/exec"
	"strings"
	"testing"
)

// Check fails t when pkg (an import path) depends, directly or through any
// other package, on a package whose import path equals one of banned or
// begins with it followed by "/". Only non-test dependencies count: what a
// user of pkg compiles in.
func Check(t *testing.T, pkg string, banned []string) {
	t.Helper()
	deps, err := Deps(pkg)
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	if len(deps) == 0 {
		t.Fatalf("go list -deps %s listed nothing", pkg)
	}
	for _, v := range Violations(deps, banned) {
		t.Errorf("%s imports %s, which it must not", pkg, v)
	}
}

// Heavy are the module paths of the systems fleet talks to, which the
// packages that run on a node (attest, lldpwait, disksafe, configserve)
// must never link: Kubernetes, Talos, Tinkerbell and NetBox.
var Heavy = []string{
	"k8s.io",
	"sigs.k8s.io",
	"github.com/siderolabs",
	"github.com/tinkerbell",
	"github.com/netbox-community",
}

// packages are fleet's packages, each of which does one job.
var packages = []string{"attest", "configserve", "disksafe", "inventory", "lldpwait", "provision"}

// CheckLeaf fails t when pkg, one of fleet's packages (or a package below
// one), depends on Heavy, on one of fleet's other packages, or on any of
// extra.
func CheckLeaf(t *testing.T, pkg string, extra ...string) {
	t.Helper()
	Check(t, pkg, leafBanned(pkg, extra))
}

func leafBanned(pkg string, extra []string) []string {
	const module = "github.com/fleetkit/fleet/"
	banned := append(append([]string(nil), Heavy...), extra...)
	for _, p := range packages {
		if own := module + p; pkg != own && !strings.HasPrefix(pkg, own+"/") {
			banned = append(banned, own)
		}
	}
	return banned
}

// Violations returns the entries of deps that banned rules out: equal to a
// banned path, or below it.
func Violations(deps, banned []string) []string {
	var bad []string
	for _, d := range deps {
		for _, b := range banned {
			b = strings.TrimSuffix(b, "/")
			if d == b || strings.HasPrefix(d, b+"/") {
				bad = append(bad, d)
				break
			}
		}
	}
	return bad
}

// Deps returns the import paths pkg depends on, itself included, as
// `go list -deps` prints them.
func Deps(pkg string) ([]string, error) {
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, &listError{err: err, stderr: string(ee.Stderr)}
		}
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

type listError struct {
	err    error
	stderr string
}

func (e *listError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }
func (e *listError) Unwrap() error { return e.err }
