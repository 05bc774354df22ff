package configserve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetkit/fleet/internal/testenv"
)

// realConfigSize is the size of a real Talos config (3-12 KB): small
// enough to fit in a socket's send buffer, so that writing it returns at
// once whether or not the peer ever receives it.
const realConfigSize = 8 << 10

// netnsLink joins two network namespaces, a server side and a client
// side (testenv.NetnsPair), by a link between serverIP and clientIP. The
// client's end of it, clientDev, can be cut (set down), which drops every
// packet either way, and mended. Deleting a namespace deletes the link's
// end in it.
type netnsLink struct {
	serverNS, clientNS  string // namespace names
	serverIP, clientDev string
}

const (
	vethServerIP  = "10.202.0.1"
	vethClientIP  = "10.202.0.2"
	vethServerDev = "fcs-srv"
	vethClientDev = "fcs-cli"
)

// newVethLink joins the namespaces by a veth pair on a private test
// subnet.
func newVethLink(t *testing.T) *netnsLink {
	t.Helper()
	testenv.Short(t)
	testenv.Root(t, "network namespaces and a veth pair")
	l := &netnsLink{serverIP: vethServerIP, clientDev: vethClientDev}
	l.serverNS, l.clientNS = testenv.NetnsPair(t, "fleet-cs-ack-srv", "fleet-cs-ack-cli")
	testenv.Veth(t, l.serverNS, vethServerDev, l.clientNS, vethClientDev)
	testenv.IP(t, "-n", l.serverNS, "addr", "add", vethServerIP+"/24", "dev", vethServerDev)
	testenv.IP(t, "-n", l.clientNS, "addr", "add", vethClientIP+"/24", "dev", vethClientDev)
	return l
}

func (l *netnsLink) listen(t testing.TB) net.Listener {
	t.Helper()
	return testenv.Within(t, l.serverNS, func() (net.Listener, error) { return net.Listen("tcp", l.serverIP+":0") })
}

// dial connects from the client's namespace.
func (l *netnsLink) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := testenv.InNetns(l.clientNS, func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// noConnection fails t unless the server's namespace soon holds no TCP
// connection with peer (host:port).
func (l *netnsLink) noConnection(t *testing.T, peer string) {
	t.Helper()
	ss := testenv.Command(t, "ss", "iproute2")
	var out []byte
	if err := testenv.Until(t.Context(), 2*time.Second, func() bool {
		var err error
		out, err = exec.Command(ss, "-N", l.serverNS, "-Htan", "dst", peer).CombinedOutput()
		if err != nil {
			t.Fatalf("ss: %v: %s", err, out)
		}
		return len(bytes.TrimSpace(out)) == 0
	}); err != nil {
		t.Errorf("the server's kernel still holds the connection with %s (%v):\n%s", peer, err, out)
	}
}

// A node asks for its config, and its network fails before the answer
// leaves. The answer is a real-size config: it fits in the socket's send
// buffer, so its write returns at once, and only the acknowledgement check
// can tell that the node never got it. The config is not counted served,
// the connection is reset so that no copy of the answer reaches anyone
// later, and once the network is back the node's next fetch gets it whole.
func TestIntegrationUnacknowledgedRealSizeConfig(t *testing.T) {
	start := time.Now()
	l := newVethLink(t)
	const writeTimeout = 500 * time.Millisecond
	h := newHarness(t, harnessOpts{cfg: Config{WriteTimeout: writeTimeout}, listener: l.listen(t)})
	hold := make(chan struct{})
	h.gate.hold = hold
	code, _, orig := h.put(realConfigSize, node01, run01)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := l.dial(ctx, "tcp", h.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sendGet(t, c, PathPrefix+code)
	testenv.WaitFor(t, 10*time.Second, "the request reaches the server", func() bool { return h.gate.callCount() == 1 })
	// The request is in; the network fails before the answer leaves: the
	// client's end goes down, and no packet crosses the link either way.
	testenv.IP(t, "-n", l.clientNS, "link", "set", l.clientDev, "down")
	cutAt := time.Now()
	close(hold)
	elapsed := h.wantNotAcknowledged(c, cutAt, writeTimeout)

	// Nothing crossed the cut link: the node holds not one byte of the
	// answer.
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the client read %d bytes and %v across the cut link, want nothing", n, err)
	}
	// The server reset the connection, so its kernel keeps no copy of the
	// answer to send once the link is back: the connection is gone from
	// the server's namespace, not closing with the answer still queued.
	l.noConnection(t, c.LocalAddr().String())

	testenv.IP(t, "-n", l.clientNS, "link", "set", l.clientDev, "up")
	// A healthy fetch gets the config whole.
	hc := &http.Client{
		Transport: &http.Transport{DialContext: l.dial, DisableKeepAlives: true},
		Timeout:   10 * time.Second,
	}
	h.wantServedWhole(hc, code, orig)
	if n := h.srv.Waiting(); n != 0 {
		t.Errorf("%d configs wait after the config was served", n)
	}
	t.Logf("took %v, of which %v from the cut to the event", time.Since(start), elapsed)
}

// wantNotAcknowledged checks the outcome of an answer that the client at
// c did not acknowledge: its event names c's address and came no sooner
// than minWait after start, and the config stays. It returns the time
// from start to the event.
func (h *harness) wantNotAcknowledged(c net.Conn, start time.Time, minWait time.Duration) time.Duration {
	h.t.Helper()
	ev := h.waitEvent()
	elapsed := time.Since(start)
	want := Event{Kind: NotAcknowledged, Device: node01, Run: run01, Peer: c.LocalAddr().String(), Text: "the peer did not acknowledge all of it"}
	if d := cmp.Diff(want, ev, ignoreTime); d != "" {
		h.t.Fatalf("event (-want +got):\n%s", d)
	}
	if elapsed < minWait {
		h.t.Errorf("the answer ended after %v, before the write deadline %v", elapsed, minWait)
	}
	if n := h.srv.Waiting(); n != 1 {
		h.t.Fatalf("%d configs wait, want the config kept", n)
	}
	return elapsed
}

// wantServedWhole fetches code with c, and wants the whole config orig,
// served.
func (h *harness) wantServedWhole(c *http.Client, code string, orig []byte) {
	h.t.Helper()
	h.want(h.get(c, code), http.StatusOK, orig, "next fetch")
	h.wantKind(Served)
}

// readHalfAndReset reads the answer on c up to half of the config orig,
// and resets the connection.
func readHalfAndReset(t *testing.T, c net.Conn, tc *net.TCPConn, orig []byte) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(orig)) {
		t.Fatalf("status %d, length %d", resp.StatusCode, resp.ContentLength)
	}
	half := make([]byte, len(orig)/2)
	if _, err := io.ReadFull(resp.Body, half); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(half, orig[:len(half)]) {
		t.Fatal("the first half differs from the config")
	}
	tc.SetLinger(0)
	tc.Close()
}

// A client that asks for a config and never reads: its kernel takes a
// little of the answer and then advertises a closed window. A real-size
// config, asked with the smallest receive buffer, fits whole in the
// server's send buffer, so its write returns at once; only the
// acknowledgement check can tell that the peer does not hold it. A config
// of 1 MiB fills the send buffer, and its write blocks. Either way the
// write deadline ends the answer, the connection is reset so no more of
// it arrives, and the config stays. A client that reads half of a 1 MiB
// answer and resets the connection (small socket buffers on both sides,
// so that half the answer read leaves most of it unsent and
// unacknowledged) leaves the config too. The next fetch gets it whole.
func TestUnreadRealSizeConfigNotServed(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		tls                  bool
		size, rcvbuf, sndbuf int           // rcvbuf 1: the kernel raises it to its smallest
		deadline             time.Duration // 0: the client reads half and resets
	}{
		{"tcp", false, realConfigSize, 1, 0, 300 * time.Millisecond},
		{"tls", true, realConfigSize, 1, 0, 300 * time.Millisecond},
		{"1MiB", false, 1 << 20, 16 << 10, 64 << 10, time.Second},
		{"half-read-tcp", false, 1 << 20, 16 << 10, 64 << 10, 0},
		{"half-read-tls", true, 1 << 20, 16 << 10, 64 << 10, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{tls: tt.tls, sndbuf: tt.sndbuf, cfg: Config{WriteTimeout: tt.deadline}})
			code, _, orig := h.put(tt.size, node01, run01)

			c, tc := h.rawConn(tt.rcvbuf)
			start := time.Now()
			sendGet(t, c, PathPrefix+code)
			if tt.deadline == 0 {
				readHalfAndReset(t, c, tc, orig)
				h.wantNotAcknowledged(tc, start, 0)
			} else {
				h.wantNotAcknowledged(tc, start, tt.deadline)
				// The stalled client now reads: it never gets the whole
				// answer, since the server reset the connection.
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				got, err := io.ReadAll(c)
				if !isReset(err) {
					t.Errorf("reading the stalled connection ended with %v, want a reset", err)
				}
				if len(got) >= len(orig) {
					t.Errorf("the stalled client read %d bytes, the whole answer", len(got))
				}
			}
			h.wantServedWhole(h.client(), code, orig)
		})
	}
}

// A client that reads half of a real-size config and resets the
// connection: its kernel had received, and acknowledged, the whole answer
// before the client read a byte, so the code is spent all the same, and
// the next fetch gets 410 and the event Refetched.
func TestHalfReadOfRealSizeConfigSpendsCode(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	code, _, orig := h.put(realConfigSize, node01, run01)

	c, tc := h.rawConn(64 << 10)
	sendGet(t, c, PathPrefix+code)
	readHalfAndReset(t, c, tc, orig)

	h.wantEvent(Event{Kind: Served, Device: node01, Run: run01, Text: h.srv.text.served(run01)})
	h.want(h.get(h.client(), code), http.StatusGone, orig, "next fetch")
	h.wantEvent(Event{Kind: Refetched, Device: node01, Run: run01, Peer: fromClient, Text: h.srv.text.refetched})
}
