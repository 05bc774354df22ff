package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// toolsModule is the directory, relative to the repository root, of the Go
// module whose tools are kube-apiserver and etcd.
const toolsModule = "tools/kube"

// The tool names of the binaries in toolsModule (go tool <name>).
const (
	apiserverTool = "kube-apiserver"
	etcdTool      = "server" // go.etcd.io/etcd/server/v3: etcd's own main
)

// binaries are the paths of the programs the control plane runs.
type binaries struct {
	apiserver, etcd string
}

// findBinaries returns the paths of kube-apiserver and etcd in Go's build
// cache, building them first when they are not there: `go -C tools/kube
// tool -n <tool>` prints the cached executable's path. Go's cache is keyed by
// the sources and the toolchain, so a changed tools module or Go version
// rebuilds, and concurrent test binaries share one cache safely.
func findBinaries(ctx context.Context, root string, logf func(string, ...any)) (binaries, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return binaries{}, fmt.Errorf("needs the go command on PATH to build kube-apiserver and etcd from %s: %w", toolsModule, err)
	}
	dir := filepath.Join(root, filepath.FromSlash(toolsModule))
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return binaries{}, fmt.Errorf("the tools module: %w", err)
	}
	// Both at once: warm, each is mostly go loading its package graph.
	var b binaries
	var errs [2]error
	var wg sync.WaitGroup
	for i, tool := range []struct {
		name string
		path *string
	}{{apiserverTool, &b.apiserver}, {etcdTool, &b.etcd}} {
		wg.Go(func() {
			t0 := time.Now()
			*tool.path, errs[i] = toolPath(ctx, goCmd, dir, tool.name)
			if d := time.Since(t0); errs[i] == nil && d > 10*time.Second {
				logf("kubetest: built %s in %v (a cold build; scripts/test builds it before go test)", tool.name, round(d))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return binaries{}, err
	}
	return b, nil
}

// toolPath runs `go -C dir tool -n name` and returns the path it prints.
func toolPath(ctx context.Context, goCmd, dir, name string) (string, error) {
	cmd := exec.CommandContext(ctx, goCmd, "-C", dir, "tool", "-n", name)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s (go -C %s tool -n %s): %w: %s", name, toolsModule, name, err, tail(stderr.String(), 2000))
	}
	p := strings.TrimSpace(stdout.String())
	if p == "" || strings.ContainsAny(p, "\n ") {
		return "", fmt.Errorf("build %s: go tool -n printed %q, not one path", name, p)
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	return p, nil
}

// errNoRepoRoot is returned when no directory above the working directory
// holds fleet's go.mod.
var errNoRepoRoot = errors.New("no directory above the working directory holds the go.mod of github.com/fleetkit/fleet: run the tests from inside the repository")

// repoRoot returns the repository root: the nearest directory, from the
// working directory up, whose go.mod declares module github.com/fleetkit/fleet.
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
