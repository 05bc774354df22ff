package configserve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetkit/fleet/internal/syncbuf"
	"github.com/fleetkit/fleet/internal/testenv"
)

// realConfigSize is the size of a real Talos config (3-12 KB): small
// enough to fit in a socket's send buffer, so that writing it returns at
// once whether or not the peer ever receives it.
const realConfigSize = 8 << 10

// vethLink joins two network namespaces, a server side and a client side,
// by a veth pair on a private test subnet. The client's end can be cut
// (set down), which drops every packet either way, and mended.
type vethLink struct {
	ip                 string // ip(8)
	serverNS, clientNS string // namespace names
}

const (
	vethServerIP  = "10.202.0.1"
	vethClientIP  = "10.202.0.2"
	vethServerDev = "fcs-srv"
	vethClientDev = "fcs-cli"
)

var vethLinks atomic.Int64

func newVethLink(t *testing.T) *vethLink {
	t.Helper()
	testenv.Short(t)
	testenv.Root(t, "network namespaces and a veth pair")
	l := &vethLink{ip: testenv.Command(t, "ip", "iproute2")}
	n := vethLinks.Add(1)
	l.serverNS = fmt.Sprintf("fleet-cs-ack-srv-%d-%d", os.Getpid(), n)
	l.clientNS = fmt.Sprintf("fleet-cs-ack-cli-%d-%d", os.Getpid(), n)
	for _, ns := range []string{l.serverNS, l.clientNS} {
		l.run(t, "netns", "add", ns)
		// Deleting a namespace deletes the veth end in it.
		t.Cleanup(func() { exec.Command(l.ip, "netns", "del", ns).Run() })
		l.run(t, "-n", ns, "link", "set", "lo", "up")
	}
	l.run(t, "-n", l.serverNS, "link", "add", vethServerDev, "type", "veth",
		"peer", "name", vethClientDev, "netns", l.clientNS)
	l.run(t, "-n", l.serverNS, "addr", "add", vethServerIP+"/24", "dev", vethServerDev)
	l.run(t, "-n", l.clientNS, "addr", "add", vethClientIP+"/24", "dev", vethClientDev)
	l.run(t, "-n", l.serverNS, "link", "set", vethServerDev, "up")
	l.run(t, "-n", l.clientNS, "link", "set", vethClientDev, "up")
	return l
}

func (l *vethLink) run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(l.ip, args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// cut sets the client's end down: from then on no packet crosses the link
// either way, as when a node's network fails.
func (l *vethLink) cut(t *testing.T) {
	t.Helper()
	l.run(t, "-n", l.clientNS, "link", "set", vethClientDev, "down")
}

// mend sets the client's end up again.
func (l *vethLink) mend(t *testing.T) {
	t.Helper()
	l.run(t, "-n", l.clientNS, "link", "set", vethClientDev, "up")
}

func (l *vethLink) listen(t *testing.T) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := testenv.InNetns(l.serverNS, func() error {
		var err error
		ln, err = net.Listen("tcp", vethServerIP+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ln
}

// noConnection fails t unless the server's namespace soon holds no TCP
// connection with peer (host:port).
func (l *vethLink) noConnection(t *testing.T, peer string) {
	t.Helper()
	ss := testenv.Command(t, "ss", "iproute2")
	var out []byte
	for wait := time.Now().Add(2 * time.Second); time.Now().Before(wait); time.Sleep(10 * time.Millisecond) {
		var err error
		out, err = exec.Command(ss, "-N", l.serverNS, "-Htan", "dst", peer).CombinedOutput()
		if err != nil {
			t.Fatalf("ss: %v: %s", err, out)
		}
		if len(bytes.TrimSpace(out)) == 0 {
			return
		}
	}
	t.Errorf("the server's kernel still holds the connection with %s:\n%s", peer, out)
}

// dial connects from the client's namespace.
func (l *vethLink) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := testenv.InNetns(l.clientNS, func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// heldGate says every device is planned, but holds the first question
// until the test releases it, and reports each question on asked.
type heldGate struct {
	asked   chan struct{}
	release chan struct{}
}

func (g *heldGate) Planned(ctx context.Context, _ Device) (bool, error) {
	select {
	case g.asked <- struct{}{}:
	default:
	}
	select {
	case <-g.release:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
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
	gate := &heldGate{asked: make(chan struct{}, 1), release: make(chan struct{})}
	events := make(chan Event, 16)
	logs := &syncbuf.Buffer{}
	srv, err := New(gate, &Config{
		WriteTimeout: writeTimeout,
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Events:       func(ev Event) { events <- ev },
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.Listener.Close()
	ts.Listener = l.listen(t)
	if err := srv.ConfigureServer(ts.Config); err != nil {
		t.Fatal(err)
	}
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	nextEvent := func() Event {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10 s")
			return Event{}
		}
	}

	code := NewCode()
	config := makeConfig(realConfigSize)
	orig := bytes.Clone(config)
	if err := srv.Put(code, config, node01, run01); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := l.dial(ctx, "tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sendGet(t, c, code)
	select {
	case <-gate.asked:
	case <-ctx.Done():
		t.Fatal("the request did not reach the server")
	}
	// The request is in; the network fails before the answer leaves.
	l.cut(t)
	cutAt := time.Now()
	close(gate.release)

	ev := nextEvent()
	elapsed := time.Since(cutAt)
	want := Event{Kind: NotAcknowledged, Device: node01, Run: run01, Peer: c.LocalAddr().String(),
		Text: "the peer did not acknowledge all of it"}
	if d := cmp.Diff(want, ev, ignoreTime); d != "" {
		t.Fatalf("event (-want +got):\n%s", d)
	}
	if elapsed < writeTimeout {
		t.Errorf("the answer ended after %v, before the write deadline %v", elapsed, writeTimeout)
	}
	if n := srv.Waiting(); n != 1 {
		t.Fatalf("%d configs wait, want the config kept", n)
	}

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

	l.mend(t)
	// A healthy fetch gets the config whole.
	hc := &http.Client{
		Transport: &http.Transport{DialContext: l.dial, DisableKeepAlives: true},
		Timeout:   10 * time.Second,
	}
	resp, err := hc.Get(ts.URL + PathPrefix + code)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, orig) {
		t.Fatalf("next fetch: %v, %d with %d bytes, want 200 with the whole %d", err, resp.StatusCode, len(body), len(orig))
	}
	if ev := nextEvent(); ev.Kind != Served {
		t.Errorf("event %v (%q), want served", ev.Kind, ev.Text)
	}
	if n := srv.Waiting(); n != 0 {
		t.Errorf("%d configs wait after the config was served", n)
	}
	t.Logf("took %v, of which %v from the cut to the event", time.Since(start), elapsed)
}

// A client that asks for a real-size config and never reads, with the
// smallest receive buffer: its kernel takes a little of the answer and
// then advertises a closed window. The whole answer fits in the server's
// send buffer, so its write returns at once; only the acknowledgement
// check can tell that the peer does not hold it. The write deadline ends
// the answer, and the config stays.
func TestUnreadRealSizeConfigNotServed(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		name := "tcp"
		if tlsOn {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			const deadline = 300 * time.Millisecond
			h := newHarness(t, harnessOpts{tls: tlsOn, cfg: Config{WriteTimeout: deadline}})
			code, _, orig := h.put(realConfigSize, node01, run01)

			c, tc := h.rawConn(1) // the kernel raises it to its smallest
			start := time.Now()
			sendGet(t, c, code)
			ev := h.waitEvent()
			elapsed := time.Since(start)
			want := Event{Kind: NotAcknowledged, Device: node01, Run: run01, Peer: tc.LocalAddr().String(), Text: textNotAcknowledged}
			if d := cmp.Diff(want, ev, ignoreTime); d != "" {
				t.Fatalf("event (-want +got):\n%s", d)
			}
			if elapsed < deadline {
				t.Errorf("the answer ended after %v, before the write deadline %v", elapsed, deadline)
			}
			if n := h.srv.Waiting(); n != 1 {
				t.Fatalf("%d configs wait, want the config kept", n)
			}
			r := h.get(h.client(), code)
			if r.status != 200 || !bytes.Equal(r.body, orig) {
				t.Fatalf("next fetch: %d with %d bytes, want 200 with the whole %d", r.status, len(r.body), len(orig))
			}
			if ev := h.waitEvent(); ev.Kind != Served {
				t.Errorf("event %v, want served", ev.Kind)
			}
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
	sendGet(t, c, code)
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
	tc.SetLinger(0)
	tc.Close()

	want := Event{Kind: Served, Device: node01, Run: run01, Text: h.srv.text.served(run01)}
	if d := cmp.Diff(want, h.waitEvent(), ignoreTime); d != "" {
		t.Fatalf("event (-want +got):\n%s", d)
	}
	c2 := h.client()
	if r := h.get(c2, code); r.status != http.StatusGone {
		t.Fatalf("next fetch: %d, want 410", r.status)
	}
	if ev := h.waitEvent(); ev.Kind != Refetched || ev.Text != h.srv.text.refetched {
		t.Errorf("event %v (%q), want refetched", ev.Kind, ev.Text)
	}
}
