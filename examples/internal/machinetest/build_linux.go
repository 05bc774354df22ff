package machinetest

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/testproc"
)

// Binaries is the directory of the programs BuildAll built.
type Binaries string

// Path returns the path of the program name.
func (b Binaries) Path(name string) string { return filepath.Join(string(b), name) }

// A Build is one go build: in Module (a directory relative to the
// repository root), with Env added to its environment, of Args (go
// build's flags and packages).
type Build struct {
	Module    string
	Env, Args []string
}

// BuildAll runs builds, each into one directory, removed when t ends, and
// logs how long they took.
func BuildAll(t testing.TB, builds ...Build) Binaries {
	t.Helper()
	dir := t.TempDir()
	t0 := time.Now()
	var built []string
	for _, b := range builds {
		if err := testproc.GoBuild(t.Context(), b.Module, dir+"/", b.Env, b.Args...); err != nil {
			t.Fatal(err)
		}
		built = append(built, b.Args...)
	}
	t.Logf("built %s in %v", strings.Join(built, " "), time.Since(t0).Round(10*time.Millisecond))
	return Binaries(dir)
}
