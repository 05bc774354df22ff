package tinktest

import (
	"context"

	"github.com/fleetkit/fleet/internal/repotest"
)

// toolsModule is the directory, relative to the repository root, of the Go
// module whose tools are Tinkerbell's programs, tinkerbell and agent.
const toolsModule = "tools/tinkerbell"

// tinkerbellTool is the tool name of tink-server, tink-controller and
// Rufio's binary in toolsModule (go tool tinkerbell).
const tinkerbellTool = "tinkerbell"

// findTool returns the path of tool in Go's build cache, building it first
// when it is not there (repotest.Tool).
func findTool(ctx context.Context, tool string) (string, error) {
	return repotest.Tool(ctx, toolsModule, tool)
}
