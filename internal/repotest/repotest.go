// Package repotest finds fleet's repository for the test helpers that build
// its programs and tools (internal/kubetest, internal/tinktest,
// internal/dockertest, internal/imagetest), and trims a failed build's
// output for their errors.
package repotest

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

// Module is the path of fleet's module.
const Module = "github.com/fleetkit/fleet"

// ErrNoRoot is returned when no directory above the working directory
// holds fleet's go.mod.
var ErrNoRoot = errors.New("no directory above the working directory holds the go.mod of " + Module + ": run the tests from inside the repository")

// Root returns the repository root: the nearest directory, from the
// working directory up, whose go.mod declares Module.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the repository root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && ModulePath(data) == Module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoRoot
		}
		dir = parent
	}
}

// ModulePath returns the path of go.mod's module line, or "".
func ModulePath(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// Tail returns the last n bytes of s, whole lines where it can, marked
// with "..." when it cut.
func Tail(s string, n int) string {
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

// Tool returns the path of tool, a tool of the Go module in the
// repository's directory module (e.g. "tools/kube"), in Go's build cache,
// building it first when it is not there: `go -C <module> tool -n <tool>`
// prints the cached executable's path. Go's cache is keyed by the sources
// and the toolchain, so a changed tools module or Go version rebuilds, and
// concurrent test binaries share one build safely.
func Tool(ctx context.Context, module, tool string) (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("needs the go command on PATH to build %s from %s: %w", tool, module, err)
	}
	root, err := Root()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, filepath.FromSlash(module))
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("the tools module: %w", err)
	}
	cmd := exec.CommandContext(ctx, goCmd, "-C", dir, "tool", "-n", tool)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s (go -C %s tool -n %s): %w: %s", tool, module, tool, err, Tail(stderr.String(), 2000))
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
