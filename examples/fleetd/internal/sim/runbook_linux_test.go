package sim

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/inventory"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// The runbook's "The journal says the peer did not acknowledge all of it
// ... A peer that is not the node held the code; read the address in the
// line": a peer at another address than the node's fetches the config
// with the code and never reads the answer (its kernel takes a little of
// it and closes its window). Once FLEET_CONFIG_WRITE_TIMEOUT has passed,
// the device's journal names the run and that peer's address and port;
// the config stays, and the node's own fetch gets it whole and takes the
// device active. (Linux: fleetd reads the peer's acknowledgement from the
// kernel's TCP_INFO.)
func TestConfigNotAcknowledgedNamesPeer(t *testing.T) {
	// The Tinkerbell agent is not started: nothing fetches the config.
	f, url := attestedWorker(t, func(s *daemon.Settings) { s.ConfigWriteTimeout = 2 * time.Second })
	run := f.startedRun("w-01")

	// Another peer, from 127.0.0.99, with the smallest receive buffer.
	d := net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.99")},
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1)
			}); err != nil {
				return err
			}
			return serr
		},
	}
	raw, err := d.DialContext(f.ctx, "tcp", strings.TrimPrefix(f.url, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	tlsConf := f.client.Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsConf.ServerName = "127.0.0.1"
	conn := tls.Client(raw, tlsConf)
	if err := conn.HandshakeContext(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: fleetd\r\n\r\n", strings.TrimPrefix(url, f.url)); err != nil {
		t.Fatal(err)
	}
	peer := raw.LocalAddr().String()
	if !strings.HasPrefix(peer, "127.0.0.99:") {
		t.Fatalf("the peer dialled from %s", peer)
	}

	want := fmt.Sprintf("warning: the peer did not acknowledge all of it: the config of %s went to %s; it stays for the next fetch", run, peer)
	if got := f.waitJournal("w-01", "the peer did not acknowledge all of it"); got != want {
		t.Fatalf("journal line %q, want %q", got, want)
	}
	if got := f.status("w-01"); got != inventory.StatusPlanned {
		t.Errorf("w-01 is %s after the answer the peer did not acknowledge, want planned", got)
	}

	// The node's own fetch gets the config whole.
	f.wantServed(f.machines["w-01"].client, url, "the node's fetch")
	f.waitJournal("w-01", "fleetd served the config of "+run)
	f.wait("w-01 active", func() bool { return f.status("w-01") == inventory.StatusActive })
	if m := f.metrics(); !strings.Contains(m, `fleet_install_config_events_total{event="`+configserve.NotAcknowledged.String()+`"} 1`) {
		t.Errorf("the answer is not counted:\n%s", grep(m, "fleet_install_config_events_total"))
	}
}
