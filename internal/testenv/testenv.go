// Package testenv gates fleet's integration tests: tests that need root,
// network namespaces, a loop device, swtpm or lldpd.
//
// By hand such a test skips with an actionable reason when what it needs is
// missing. With FLEET_REQUIRE_INTEGRATION=1 (as .ci/run sets it) the same
// condition fails the test instead, so a CI run can never count a skipped
// integration test as a pass.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// RequireEnv is the environment variable that turns integration skips into
// failures.
const RequireEnv = "FLEET_REQUIRE_INTEGRATION"

// Required reports whether integration tests must run (RequireEnv is "1").
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Unavailable ends t because something it needs is missing: a skip by hand,
// a failure when Required. The reason should say what to do, e.g.
// "needs root: network namespaces".
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("integration test cannot run (%s=1): %s", RequireEnv, reason)
	}
	t.Skipf("%s (set %s=1 to make this a failure)", reason, RequireEnv)
}

// Root ends t unless the test runs as root. why names what root is needed for.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "needs root: %s", why)
	}
}

// Command returns the path of the named program, or ends t with a reason that
// names the Debian package to install.
func Command(t testing.TB, name, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, "needs %s: apt-get install -y %s", name, debianPackage)
	}
	return p
}

// Short ends t when the test binary runs with -short, since integration tests
// start real programs.
func Short(t testing.TB) {
	t.Helper()
	if testing.Short() {
		Unavailable(t, "integration test: run without -short")
	}
}

// Time ends t unless its binary's -timeout leaves it at least need: a test
// that takes minutes on real firmware or a real Tinkerbell would otherwise
// be cut off by go test's default 10 minutes, with a panic in place of a
// result. pkg names the package in the reason's command.
func Time(t *testing.T, need time.Duration, pkg string) {
	t.Helper()
	d, ok := t.Deadline()
	if !ok {
		return
	}
	if left := time.Until(d); left < need {
		Unavailable(t, "needs up to %v on 2 loaded cores and -timeout leaves %v: go test -timeout %v %s",
			need.Round(time.Minute), left.Round(time.Second), (need + 5*time.Minute).Round(time.Minute), pkg)
	}
}
