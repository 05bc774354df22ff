package imagetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/fleetkit/fleet/internal/repotest"
)

// goBuild builds the main package in dir (relative to the repository root,
// e.g. "examples/wipe-disk") for Linux on this architecture without cgo,
// as .ko.yaml builds fleet's images, into out.
func goBuild(ctx context.Context, dir, out string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("needs the go command on PATH to build %s: %w", dir, err)
	}
	root, err := repotest.Root()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-o", out, "./"+filepath.ToSlash(dir))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./%s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
