//go:build !linux

package dockertest

import (
	"runtime"
	"testing"

	"github.com/fleetkit/fleet/internal/testenv"
)

// start ends t: dockerd, and the namespaces it runs in, are Linux's.
func start(t testing.TB, _ *Config) *Docker {
	t.Helper()
	testenv.Unavailable(t, "dockertest needs Linux (dockerd, network and mount namespaces), not %s", runtime.GOOS)
	return nil
}

func (d *Docker) startAgent(t testing.TB, _, _ string) *Agent {
	t.Helper()
	testenv.Unavailable(t, "dockertest needs Linux, not %s", runtime.GOOS)
	return nil
}

func (d *Docker) stop(testing.TB) {}
