package dockertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// toolsModule is the directory, relative to the repository root, of the Go
// module whose tools are Tinkerbell's programs.
const toolsModule = "tools/tinkerbell"

// findTool returns the path of tool (agent) in Go's build cache, building
// it first when it is not there: `go -C tools/tinkerbell tool -n <tool>`
// prints the cached executable's path.
func findTool(ctx context.Context, tool string) (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("needs the go command on PATH to build %s from %s: %w", tool, toolsModule, err)
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, filepath.FromSlash(toolsModule))
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("the tools module: %w", err)
	}
	cmd := exec.CommandContext(ctx, goCmd, "-C", dir, "tool", "-n", tool)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s (go -C %s tool -n %s): %w: %s", tool, toolsModule, tool, err, tail(stderr.String(), 2000))
	}
	p := strings.TrimSpace(stdout.String())
	if p == "" || strings.ContainsAny(p, "\n ") {
		return "", fmt.Errorf("build %s: go tool -n printed %q, not one path", tool, p)
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("build %s: %w", tool, err)
	}
	return p, nil
}

// goBuild builds the main package in dir (relative to the repository root)
// without cgo into out, with ldflags.
func goBuild(ctx context.Context, dir, out, ldflags string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("needs the go command on PATH to build %s: %w", dir, err)
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./"+filepath.ToSlash(dir))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./%s: %w: %s", dir, err, tail(stderr.String(), 2000))
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

// tail returns the last n bytes of s, whole lines where it can.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "..." + s
}
