//go:build !linux

package dockertest

import (
	"runtime"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/testenv"
)

// start ends t: dockerd, and the namespaces it runs in, are Linux's.
func start(t testing.TB, _ *Config) *Docker {
	t.Helper()
	testenv.Unavailable(t, "dockertest needs Linux (dockerd, network and mount namespaces), not %s", runtime.GOOS)
	return nil
}

func (d *Docker) startAgent(t testing.TB, _, _ string, _ *AgentConfig) *Agent {
	t.Helper()
	testenv.Unavailable(t, "dockertest needs Linux, not %s", runtime.GOOS)
	return nil
}

// process is Linux's: no agent runs elsewhere.
type process struct{}

func (*process) stop(time.Duration) error { return nil }
func (*process) kill() error              { return nil }

func (d *Docker) stop(testing.TB) {}
