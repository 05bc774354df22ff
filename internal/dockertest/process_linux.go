package dockertest

import (
	"os/exec"

	"github.com/fleetkit/fleet/internal/testproc"
)

// command returns the command of args, with an environment that holds no
// variable that would configure the programs started here behind the
// caller's back: DOCKER_* (Docker's client in the agent), AGENT_* (the
// agent's flags), CONTAINERD_* and TINKERBELL_*.
func command(args ...string) *exec.Cmd {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = testproc.Env("DOCKER_", "AGENT_", "CONTAINERD_", "TINKERBELL_")
	return cmd
}
