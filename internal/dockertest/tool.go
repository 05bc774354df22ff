package dockertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/fleetkit/fleet/internal/repotest"
)

// goBuild builds the main package in dir (relative to the repository root)
// without cgo into out, with ldflags.
func goBuild(ctx context.Context, dir, out, ldflags string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("needs the go command on PATH to build %s: %w", dir, err)
	}
	root, err := repotest.Root()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./"+filepath.ToSlash(dir))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./%s: %w: %s", dir, err, repotest.Tail(stderr.String(), 2000))
	}
	return nil
}
