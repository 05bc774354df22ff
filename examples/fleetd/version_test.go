package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/repotest"
	"github.com/fleetkit/fleet/internal/testenv"
)

// fleetd built with go build in the repository names the commit it was
// built from: -version's revision is git rev-parse HEAD.
func TestVersionRevision(t *testing.T) {
	testenv.Short(t)
	git := testenv.Command(t, "git", "git")
	root, err := repotest.Root()
	if err != nil {
		t.Fatal(err)
	}
	head := func() string {
		cmd := exec.Command(git, "rev-parse", "HEAD")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			testenv.Unavailable(t, "the repository is not a git checkout (git rev-parse HEAD: %v), so the build records no revision", err)
		}
		return strings.TrimSpace(string(out))
	}
	before := head()
	// go build finds the checkout by its .git directory: in a git
	// worktree, where .git is a file, it records no revision.
	if fi, err := os.Stat(filepath.Join(root, ".git")); err == nil && !fi.IsDir() {
		testenv.Unavailable(t, "%s is a git worktree (its .git is a file), where go build records no revision", root)
	}
	bin := filepath.Join(t.TempDir(), "fleetd")
	t0 := time.Now()
	// -buildvcs=true: a GOFLAGS of -buildvcs=false would leave the
	// revision out, and without git the build fails rather than skip it.
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./examples/fleetd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/fleetd: %v\n%s", err, out)
	}
	t.Logf("built fleetd in %v", time.Since(t0).Round(10*time.Millisecond))
	// Others may commit while it builds: the build names HEAD as it was
	// at some moment in between.
	after := head()

	out, err := exec.Command(bin, "-version").Output()
	if err != nil {
		t.Fatalf("fleetd -version: %v", err)
	}
	line := strings.TrimSpace(string(out))
	fields := map[string]string{}
	for _, f := range strings.Fields(strings.TrimPrefix(line, "fleetd ")) {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	if !strings.HasPrefix(line, "fleetd version=") || len(fields) != 4 {
		t.Fatalf("fleetd -version printed %q, want fleetd version=... revision=... modified=... goversion=...", line)
	}
	if rev := fields["revision"]; rev != before && rev != after {
		t.Errorf("fleetd -version: revision=%s, want git rev-parse HEAD, %s", rev, before)
	}
	if m := fields["modified"]; m != "true" && m != "false" {
		t.Errorf("fleetd -version: modified=%s, want true or false", m)
	}
	// A pseudo-version names the commit's first 12 hex digits.
	if v := fields["version"]; strings.Count(v, "-") >= 2 && !strings.Contains(v, fields["revision"][:min(12, len(fields["revision"]))]) {
		t.Errorf("fleetd -version: version=%s does not name revision %s", v, fields["revision"])
	}
}
