package firmware

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/repotest"
)

// binaries are the programs the test builds: fleetd, as a user deploys it,
// and, static (the initramfs holds no C library), hookos-attest,
// guestinit, fleet's actions (wipe-disk, install, next-boot), the stand-in
// installer, and the runner (tools/tinkerbell/runner, a module of its own).
type binaries struct{ dir string }

func (b binaries) path(name string) string { return filepath.Join(b.dir, name) }

// build builds the programs into a directory removed when t ends.
func build(t *testing.T) binaries {
	t.Helper()
	root, err := repotest.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t0 := time.Now()
	static := []string{"CGO_ENABLED=0"}
	for _, b := range []struct {
		module string // relative to the repository's root
		env    []string
		args   []string
	}{
		{".", nil, []string{"./examples/fleetd"}},
		{".", static, []string{"-trimpath", "-ldflags=-s -w", "./examples/hookos-attest", "./examples/internal/firmware/guestinit",
			"./examples/wipe-disk", "./examples/install", "./examples/next-boot", "./examples/internal/firmware/installer"}},
		{"tools/tinkerbell", static, []string{"-trimpath", "-ldflags=-s -w", "./runner"}},
	} {
		cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, b.args...)...)
		cmd.Dir, cmd.Env = filepath.Join(root, b.module), append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s (in %s): %v\n%s", strings.Join(b.args, " "), b.module, err, out)
		}
	}
	t.Logf("built fleetd, hookos-attest, guestinit, the actions, the installer and the runner in %v", time.Since(t0).Round(10*time.Millisecond))
	return binaries{dir: dir}
}
