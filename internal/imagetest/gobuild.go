package imagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// goBuild builds the main package in dir (relative to the repository root,
// e.g. "examples/wipe-disk") for Linux on this architecture without cgo,
// as .ko.yaml builds fleet's images, into out.
func goBuild(ctx context.Context, dir, out string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("needs the go command on PATH to build %s: %w", dir, err)
	}
	root, err := repoRoot()
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

// errNoRepoRoot is returned when no directory above the working directory
// holds fleet's go.mod.
var errNoRepoRoot = errors.New("no directory above the working directory holds the go.mod of github.com/fleetkit/fleet: run the tests from inside the repository")

// repoRoot returns the nearest directory, from the working directory up,
// whose go.mod declares module github.com/fleetkit/fleet.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the repository root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePath(data) == "github.com/fleetkit/fleet" {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errNoRepoRoot
		}
		dir = parent
	}
}

// modulePath returns the path of go.mod's module line, or "".
func modulePath(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}
