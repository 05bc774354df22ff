package dockertest

import (
	"io"
	"os/exec"

	"github.com/fleetkit/fleet/internal/testproc"
)

// startProcess starts cmd, its output going to out, with an environment
// that holds no variable that would configure the programs started here
// behind the caller's back: DOCKER_* (Docker's client in the agent),
// AGENT_* (the agent's flags), CONTAINERD_* and TINKERBELL_*. output
// returns what it printed, for error messages.
func startProcess(name string, cmd *exec.Cmd, out io.Writer, output func() string) (*testproc.Process, error) {
	cmd.Env = testproc.Env("DOCKER_", "AGENT_", "CONTAINERD_", "TINKERBELL_")
	cmd.Stdout, cmd.Stderr = out, out
	return testproc.Start(name, cmd, output)
}
