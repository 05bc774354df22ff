package configserve

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/syncbuf"
)

// testGate is a Gate whose answer the test sets.
type testGate struct {
	mu      sync.Mutex
	planned bool
	err     error
	hold    chan struct{} // when set, Planned waits until it is closed
	calls   int
	asked   []Device
}

func (g *testGate) Planned(ctx context.Context, d Device) (bool, error) {
	g.mu.Lock()
	g.calls++
	g.asked = append(g.asked, d)
	planned, err, hold := g.planned, g.err, g.hold
	g.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return planned, err
}

func (g *testGate) set(planned bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.planned, g.err = planned, err
}

func (g *testGate) callCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// checkNoSecrets fails t if logs or any event text or field carries one
// of secrets (codes and configs' tags) or its first 12 characters.
func checkNoSecrets(t testing.TB, secrets []string, logs string, events []Event) {
	t.Helper()
	for _, v := range secrets {
		for _, needle := range []string{v, v[:12]} {
			if strings.Contains(logs, needle) {
				t.Errorf("a log line carries a secret (%d characters of it)", len(needle))
			}
			for _, ev := range events {
				if strings.Contains(fmt.Sprintf("%+v", ev), needle) {
					t.Errorf("event %v carries a secret", ev.Kind)
				}
			}
		}
	}
}

// harness is a Server behind a real loopback HTTP(S) server, with its log
// lines and events captured.
type harness struct {
	t       *testing.T
	srv     *Server
	ts      *httptest.Server
	gate    *testGate
	logs    *syncbuf.Buffer
	secrets []string // what must never appear in a log line or an event

	evMu   sync.Mutex
	events []Event
	evCh   chan Event

	lent chan error // SendLoan's outcomes (harnessOpts.lend)
}

type harnessOpts struct {
	cfg           Config // Logger and Events are set by the harness
	tls           bool
	sndbuf        int  // server-side SO_SNDBUF for every connection; 0: the kernel's
	noConnContext bool // unset http.Server.ConnContext after ConfigureServer
	http2         bool // enable HTTP/2 after ConfigureServer
	// eventDelay: each event returns this long after it came, as fleetd's
	// does while it writes a served config's status and line to NetBox.
	eventDelay time.Duration
	// lend serves, beside the configs, a lender's side of the peers' API:
	// GET lendPrefix+code lends the config (Lend) and answers the loan's
	// config as its body (SendLoan); each outcome goes to lent.
	lend bool
	// listener, when set, is where the server listens rather than on
	// loopback.
	listener net.Listener
}

// transports are the two ways a node may fetch: plain TCP and TLS.
var transports = []struct {
	name string
	tls  bool
}{{"tcp", false}, {"tls", true}}

// lendPrefix is the path of the harness's lend requests (harnessOpts.lend).
const lendPrefix = "/lend/"

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	h := &harness{
		t:    t,
		gate: &testGate{planned: true},
		logs: &syncbuf.Buffer{},
		evCh: make(chan Event, 4096),
	}
	cfg := o.cfg
	// fleetd's names, which make the runbook's lines.
	cfg.Name = cmp.Or(cfg.Name, "fleetd")
	cfg.GateName = cmp.Or(cfg.GateName, "NetBox")
	cfg.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Events = func(ev Event) {
		h.evMu.Lock()
		h.events = append(h.events, ev)
		h.evMu.Unlock()
		h.evCh <- ev
		time.Sleep(o.eventDelay)
	}
	srv, err := New(h.gate, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	h.ts = httptest.NewUnstartedServer(srv)
	if o.listener != nil {
		h.ts.Listener.Close()
		h.ts.Listener = o.listener
	}
	if o.lend {
		h.lent = make(chan error, 16)
		mux := http.NewServeMux()
		mux.Handle(PathPrefix, srv)
		mux.HandleFunc(lendPrefix, func(w http.ResponseWriter, r *http.Request) {
			l, err := srv.Lend(r.Context(), strings.TrimPrefix(r.URL.Path, lendPrefix))
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				h.lent <- err
				return
			}
			h.lent <- srv.SendLoan(w, r, l, "application/octet-stream", l.Config)
		})
		h.ts.Config.Handler = mux
	}
	if sndbuf := o.sndbuf; sndbuf > 0 {
		h.ts.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := innermost(c).(*net.TCPConn); ok {
				if err := tc.SetWriteBuffer(sndbuf); err != nil {
					t.Errorf("SO_SNDBUF: %v", err)
				}
			}
			return ctx
		}
	}
	if err := srv.ConfigureServer(h.ts.Config); err != nil {
		t.Fatal(err)
	}
	if o.noConnContext {
		h.ts.Config.ConnContext = nil
	}
	if o.http2 {
		h.ts.Config.Protocols = nil
		h.ts.EnableHTTP2 = true
	}
	if o.tls {
		h.ts.StartTLS()
	} else {
		h.ts.Start()
	}
	t.Cleanup(func() {
		h.ts.Close()
		srv.Close()
		checkNoSecrets(t, h.secrets, h.logs.String(), h.allEvents())
		if t.Failed() {
			t.Logf("server log:\n%s", h.logs.String())
		}
	})
	return h
}

// put holds a fresh config of n bytes (at least 64) under a fresh code and
// returns both. The config carries a random tag on every line so that any
// piece of it is recognisable in a log.
func (h *harness) put(n int, dev Device, run string) (code string, config, orig []byte) {
	h.t.Helper()
	code, config = putNew(h.t, h.srv, n, dev, run)
	h.secrets = append(h.secrets, code, tagOf(config))
	return code, config, bytes.Clone(config)
}

// putNew holds a fresh config of n bytes under a fresh code in srv.
func putNew(tb testing.TB, srv *Server, n int, dev Device, run string) (code string, config []byte) {
	tb.Helper()
	code, config = NewCode(), makeConfig(n)
	if err := srv.Put(code, config, dev, run); err != nil {
		tb.Fatal(err)
	}
	return code, config
}

// newBareServer returns a Server that ConfigureServer set up but no
// http.Server serves, closed when the test ends.
func newBareServer(tb testing.TB, gate Gate, cfg *Config) *Server {
	tb.Helper()
	srv, err := New(gate, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	if err := srv.ConfigureServer(&http.Server{}); err != nil {
		tb.Fatal(err)
	}
	return srv
}

// fetchRecorded answers a fetch of code with no connection behind it, and
// returns its status.
func fetchRecorded(srv *Server, code string) int {
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("GET", PathPrefix+code, nil))
	return w.Code
}

// makeConfig returns n bytes of YAML-ish text whose every line
// carries the same random 16-character tag.
func makeConfig(n int) []byte {
	var r [8]byte
	rand.Read(r[:])
	tag := hex.EncodeToString(r[:])
	line := "token: " + tag + "-secret\n" // 31 bytes
	var b bytes.Buffer
	b.Grow(n + len(line))
	for b.Len() < n {
		b.WriteString(line)
	}
	return b.Bytes()[:max(n, 64)]
}

func tagOf(config []byte) string { return string(config[7:23]) }

func (h *harness) url(code string) string { return h.ts.URL + PathPrefix + code }

// client returns a client that opens a new connection per request.
func (h *harness) client() *http.Client {
	tr := h.ts.Client().Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

type reply struct {
	status int
	proto  string // "HTTP/1.1"
	header http.Header
	body   []byte
	closed bool // the answer closes its connection (Connection: close)
	reused bool // it came on a connection an earlier answer came on
}

func (h *harness) get(c *http.Client, code string) reply { return h.do(c, "GET", PathPrefix+code) }

// do sends a request of method for path with c, and reads the whole answer.
func (h *harness) do(c *http.Client, method, path string) reply {
	h.t.Helper()
	var reused bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	})
	req, err := http.NewRequestWithContext(ctx, method, h.ts.URL+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		h.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s: reading the body: %v", method, err)
	}
	return reply{resp.StatusCode, resp.Proto, resp.Header, body, resp.Close, reused}
}

// want fails t unless r has status and carries the whole config orig if
// status is 200, none of it otherwise (a nil orig: any body). It returns r.
func (h *harness) want(r reply, status int, orig []byte, what string) reply {
	h.t.Helper()
	ok := r.status == status
	switch {
	case orig == nil:
	case status == http.StatusOK:
		ok = ok && bytes.Equal(r.body, orig)
	default:
		ok = ok && !bytes.Contains(r.body, orig[:64])
	}
	if !ok {
		h.t.Fatalf("%s: %d with %d bytes, want %d, with the config only if 200", what, r.status, len(r.body), status)
	}
	return r
}

// wantKind returns the next event, failing t unless it is of kind.
func (h *harness) wantKind(kind Kind) Event {
	h.t.Helper()
	ev := h.waitEvent()
	if ev.Kind != kind {
		h.t.Errorf("event %v (%q), want %v", ev.Kind, ev.Text, kind)
	}
	return ev
}

func (h *harness) allEvents() []Event {
	h.evMu.Lock()
	defer h.evMu.Unlock()
	return append([]Event(nil), h.events...)
}

// waitEvent returns the next event, failing t after 10 s.
func (h *harness) waitEvent() Event {
	h.t.Helper()
	select {
	case ev := <-h.evCh:
		return ev
	case <-time.After(10 * time.Second):
		h.t.Fatal("no event within 10 s")
		return Event{}
	}
}

// noEvent fails t if an event arrives within d.
func (h *harness) noEvent(d time.Duration) {
	h.t.Helper()
	select {
	case ev := <-h.evCh:
		h.t.Errorf("unexpected event %v: %q", ev.Kind, ev.Text)
	case <-time.After(d):
	}
}

// rcvbufDialer dials with the given receive buffer (0: the kernel's), set
// before the handshake so that the window the client advertises is small
// from the start.
func rcvbufDialer(rcvbuf int) *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		if rcvbuf == 0 {
			return nil
		}
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
		}); err != nil {
			return err
		}
		return serr
	}}
}

// tcpPair returns both ends of a loopback TCP connection; the client end
// has the given receive buffer (0: the kernel's).
func tcpPair(tb testing.TB, rcvbuf int) (server, client *net.TCPConn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	cc, err := rcvbufDialer(rcvbuf).Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close(); sc.Close() })
	return sc.(*net.TCPConn), cc.(*net.TCPConn)
}

// rawConn dials the server with a small receive buffer (rcvbufDialer),
// and speaks TLS if the server does.
func (h *harness) rawConn(rcvbuf int) (net.Conn, *net.TCPConn) {
	h.t.Helper()
	c, err := rcvbufDialer(rcvbuf).Dial("tcp", h.ts.Listener.Addr().String())
	if err != nil {
		h.t.Fatal(err)
	}
	tc := c.(*net.TCPConn)
	h.t.Cleanup(func() { c.Close() })
	if h.ts.TLS == nil {
		return c, tc
	}
	cfg := h.ts.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.ServerName = "127.0.0.1"
	tlsc := tls.Client(c, cfg)
	if err := tlsc.Handshake(); err != nil {
		h.t.Fatal(err)
	}
	return tlsc, tc
}

// sendGet sends a GET of path on c.
func sendGet(t *testing.T, c net.Conn, path string) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: fleetd\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
