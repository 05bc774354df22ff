package sim

import (
	"context"
	"testing"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// A fleetd told to stop while it starts (before its Templates exist) stops
// cleanly, as after a SIGTERM at any other time.
func TestServeStoppedWhileStarting(t *testing.T) {
	f := newTestFleet(t, nil, testNode{name: "w-01", class: "worker", approve: true})
	d, err := daemon.New(f.settings, f.parts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Serve(ctx, daemon.Listeners{HTTPS: listen(t)}); err != nil {
		t.Errorf("serve stopped while starting: %v, want a clean stop", err)
	}
}
