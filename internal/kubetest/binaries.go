package kubetest

import (
	"context"
	"errors"
	"sync"

	"github.com/fleetkit/fleet/internal/testproc"
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
func findBinaries(ctx context.Context, logf func(string, ...any)) (binaries, error) {
	// Both at once: warm, each is mostly go loading its package graph.
	var b binaries
	var errs [2]error
	var wg sync.WaitGroup
	for i, tool := range []struct {
		name string
		path *string
	}{{apiserverTool, &b.apiserver}, {etcdTool, &b.etcd}} {
		wg.Go(func() { *tool.path, errs[i] = testproc.Tool(ctx, toolsModule, tool.name, logf) })
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return binaries{}, err
	}
	return b, nil
}
