package sim

import (
	"context"
	"net"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Serve(ctx, daemon.Listeners{HTTPS: ln}); err != nil {
		t.Errorf("serve stopped while starting: %v, want a clean stop", err)
	}
}
