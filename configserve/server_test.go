package configserve

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var node01 = Device{ID: 17, Name: "node-01"}

const run01 = "provision-node-01-1767225600"

// ignoreTime compares events without their time stamps.
var ignoreTime = cmpopts.IgnoreFields(Event{}, "Time")

// wantEvent returns the next event, failing t unless it is want, its time
// aside. A want.Peer of fromClient stands for the address of a client of
// the harness: any port on loopback.
func (h *harness) wantEvent(want Event) Event {
	h.t.Helper()
	ev := h.waitEvent()
	if want.Peer == fromClient && strings.HasPrefix(ev.Peer, fromClient) {
		want.Peer = ev.Peer
	}
	if d := cmp.Diff(want, ev, ignoreTime); d != "" {
		h.t.Errorf("event (-want +got):\n%s", d)
	}
	return ev
}

// fromClient is the Peer of an event for a fetch by a harness's client
// (wantEvent).
const fromClient = "127.0.0.1:"

func zeroed(b []byte) bool { return bytes.Count(b, []byte{0}) == len(b) }

// A config is served once, over TLS, on the connection the node kept
// alive, and its answer closes that connection (the client's FIN
// acknowledges it at once); other answers keep their connection alive.
func TestServeOnceOverTLS(t *testing.T) {
	h := newHarness(t, harnessOpts{tls: true})
	code, config, orig := h.put(20<<10, node01, run01)
	c := h.ts.Client()

	h.gate.set(false, nil)
	if r := h.get(c, code); r.status != http.StatusConflict || r.closed {
		t.Fatalf("not planned: %d, closing %v; want 409 on a kept-alive connection", r.status, r.closed)
	}
	h.gate.set(true, nil)
	r := h.want(h.get(c, code), http.StatusOK, orig, "planned")
	if !r.closed || !r.reused {
		t.Errorf("served: closing %v, on the earlier connection %v; want Connection: close on the kept-alive connection", r.closed, r.reused)
	}
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", got)
	}
	ev := h.wantEvent(Event{Kind: Served, Device: node01, Run: run01, Text: "fleetd served the config of provision-node-01-1767225600"})
	if ev.Time.IsZero() {
		t.Error("the event has no time")
	}
	if !zeroed(config) {
		t.Error("the served config was not zeroed")
	}
	if n := h.srv.Waiting(); n != 0 {
		t.Errorf("%d configs wait after the serve, want 0", n)
	}

	// Asked again: 410 on a new connection, and the event names the device.
	if r := h.want(h.get(c, code), http.StatusGone, orig, "second fetch"); r.reused {
		t.Error("410 on the earlier connection; want a new connection")
	}
	h.wantEvent(Event{Kind: Refetched, Device: node01, Run: run01, Peer: fromClient, Text: "the node asked again for the Talos config fleetd served it"})
	if err := h.srv.Put(code, makeConfig(100), node01, run01); !errors.Is(err, ErrCodeSpent) {
		t.Errorf("Put of a spent code: %v, want ErrCodeSpent", err)
	}
	if !strings.Contains(h.logs.String(), "node-01") {
		t.Error("the log names no device; the secret check would look at nothing")
	}
}

// fetchAtOnce fetches code n times at once, the i-th at the harness
// ring[i%len(ring)] with a client of its own, and counts the answers by
// status and those that carry the config. It fails t if a fetch
// fails, or if an answer carries part of the config and is not a 200 with
// all of it. seen, if set, sees each answer, under the count's lock.
func fetchAtOnce(t *testing.T, n int, ring []*harness, code string, orig []byte, seen func(int, http.Header)) (byCode map[int]int, bodies int) {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		errs  []error
	)
	byCode = map[int]int{}
	for i := range n {
		h := ring[i%len(ring)]
		wg.Go(func() {
			c := h.client()
			<-start
			resp, err := c.Get(h.url(code))
			var body []byte
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			byCode[resp.StatusCode]++
			if bytes.Contains(body, orig[:64]) {
				bodies++
				if resp.StatusCode != 200 || !bytes.Equal(body, orig) {
					t.Errorf("a %d answer carried part of the config", resp.StatusCode)
				}
			}
			if seen != nil {
				seen(resp.StatusCode, resp.Header)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d fetches failed, the first: %v", len(errs), errs[0])
	}
	return byCode, bodies
}

func TestConcurrentFetchesServeOnce(t *testing.T) {
	// Fetches that meet the answer in flight get 503 at once, rather
	// than wait for its outcome (TestFetchWaitsForTheAnswerInFlight).
	h := newHarness(t, harnessOpts{cfg: Config{BusyWait: -1}})
	// The gate holds the first fetch until 50 others met it in flight.
	hold := make(chan struct{})
	h.gate.hold = hold
	code, _, orig := h.put(20<<10, node01, run01)
	const n = 200
	retries := 0
	byCode, bodies := fetchAtOnce(t, n, []*harness{h}, code, orig, func(status int, header http.Header) {
		if status == http.StatusServiceUnavailable && header.Get("Retry-After") != "" {
			retries++
			if retries == 50 {
				close(hold)
			}
		}
	})
	select {
	case <-hold:
	default:
		close(hold)
	}
	if byCode[200] != 1 || bodies != 1 {
		t.Fatalf("%d answers were 200 and %d carried the config, want exactly one: %v", byCode[200], bodies, byCode)
	}
	if byCode[503]+byCode[410] != n-1 {
		t.Fatalf("statuses %v: want the others 503 (another answer in flight) or 410 (served)", byCode)
	}
	if byCode[503] == 0 || retries != byCode[503] {
		t.Errorf("statuses %v, %d with Retry-After: want 503s with Retry-After for fetches that met the answer in flight", byCode, retries)
	}
	if g := h.gate.callCount(); g != 1 {
		t.Errorf("the gate was asked %d times, want once: only the fetch that owns the config asks", g)
	}
	// One served event, one refetch event per 410.
	want := map[Kind]int{Served: 1}
	if byCode[410] > 0 {
		want[Refetched] = byCode[410]
	}
	got := map[Kind]int{}
	for range 1 + byCode[410] {
		got[h.waitEvent().Kind]++
	}
	h.noEvent(50 * time.Millisecond)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	t.Logf("statuses %v", byCode)
}

// A fetch refused before any of the config is written: the gate does not
// answer, or says the device is not planned; the http.Server's set-up was
// not ConfigureServer's, or it was made to speak HTTP/2 after it. The
// answer carries no config, nothing is reported, the config stays, and a
// log line says why where one must; once the gate says planned, the next
// fetch gets the config.
func TestRefusalKeepsConfig(t *testing.T) {
	for _, tt := range []struct {
		name    string
		opts    harnessOpts
		planned bool  // what the gate says
		err     error // the gate's error
		status  int
		retry   string // Retry-After
		log     string // what a log line says, if one must
	}{
		{"gate down", harnessOpts{}, false, errors.New("netbox did not answer: dial tcp: connection refused"), http.StatusServiceUnavailable, "5", "NetBox did not answer"},
		{"not planned", harnessOpts{}, false, nil, http.StatusConflict, "", ""},
		{"without ConnContext", harnessOpts{noConnContext: true}, true, nil, http.StatusInternalServerError, "", "ConnContext"},
		{"HTTP/2", harnessOpts{tls: true, http2: true}, true, nil, http.StatusHTTPVersionNotSupported, "", "HTTP/1.1 only"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			code, config, orig := h.put(4096, node01, run01)
			h.gate.set(tt.planned, tt.err)
			c := h.ts.Client()
			r := h.get(c, code)
			if tt.opts.http2 && r.proto != "HTTP/2.0" {
				t.Fatalf("the client spoke %s; the test needs HTTP/2", r.proto)
			}
			if r.status != tt.status || r.header.Get("Retry-After") != tt.retry || bytes.Contains(r.body, orig[:64]) {
				t.Fatalf("%d (Retry-After %q), want %d (Retry-After %q) without the config", r.status, r.header.Get("Retry-After"), tt.status, tt.retry)
			}
			h.noEvent(20 * time.Millisecond)
			if n := h.srv.Waiting(); n != 1 || zeroed(config) {
				t.Fatalf("%d configs wait (zeroed %v), want the config kept", n, zeroed(config))
			}
			if tt.log != "" && !strings.Contains(h.logs.String(), tt.log) {
				t.Errorf("no log line says %s", tt.log)
			}
			if tt.planned {
				return
			}
			h.gate.set(true, nil)
			h.want(h.get(c, code), http.StatusOK, orig, "planned")
			h.gate.mu.Lock()
			asked := h.gate.asked
			h.gate.mu.Unlock()
			if d := cmp.Diff([]Device{node01, node01}, asked); d != "" {
				t.Errorf("devices the gate was asked about (-want +got):\n%s", d)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.put(100, node01, run01) // another code's config
	code := NewCode()
	h.secrets = append(h.secrets, code)
	h.want(h.get(h.client(), code), http.StatusNotFound, nil, "unknown code")
	h.wantEvent(Event{Kind: Missing, Peer: fromClient, Text: "the node asked for its Talos config, and fleetd holds none for it"})
	if g := h.gate.callCount(); g != 0 {
		t.Errorf("the gate was asked %d times for an unknown code", g)
	}
}

// TTL: before it the config waits (the gate is asked); after it the config
// is zeroed and gone, the event says so, and a fetch gets 404. When the
// TTL passes while a fetch owns the config (its gate question is slow),
// the fetch ends without serving, and the config expires then.
func TestTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := &testGate{planned: false}
		var events []Event
		srv := newBareServer(t, gate, &Config{TTL: 10 * time.Minute, Events: func(ev Event) { events = append(events, ev) }})
		code, config := putNew(t, srv, 1000, node01, run01)
		time.Sleep(10*time.Minute - time.Second)
		if st := fetchRecorded(srv, code); st != http.StatusConflict || gate.callCount() != 1 {
			t.Fatalf("before the TTL: %d after %d gate calls, want 409 (not planned) from a held config", st, gate.callCount())
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if srv.Waiting() != 0 || !zeroed(config) {
			t.Fatalf("after the TTL: %d waiting, zeroed %v; want the config gone and zeroed", srv.Waiting(), zeroed(config))
		}
		if st := fetchRecorded(srv, code); st != http.StatusNotFound {
			t.Fatalf("after the TTL: %d, want 404", st)
		}
		expired := Event{Kind: Expired, Device: node01, Run: run01, Text: "the Talos config of provision-node-01-1767225600 expired unread"}
		want := []Event{expired, {Kind: Missing, Peer: "192.0.2.1:1234", Text: "the node asked for its Talos config, and the config server holds none for it"}}
		if d := cmp.Diff(want, events, ignoreTime); d != "" {
			t.Errorf("events (-want +got):\n%s", d)
		}
		if len(events) == 2 && events[0].Time.IsZero() {
			t.Error("the expired event has no time")
		}

		events = nil
		gate.hold = make(chan struct{})
		time.AfterFunc(11*time.Minute, func() { close(gate.hold) })
		code, config = putNew(t, srv, 1000, node01, run01)
		if st := fetchRecorded(srv, code); st != http.StatusConflict {
			t.Fatalf("a fetch the TTL passed during: %d, want 409", st)
		}
		if d := cmp.Diff([]Event{expired}, events, ignoreTime); d != "" {
			t.Errorf("events of a fetch the TTL passed during (-want +got):\n%s", d)
		}
		if srv.Waiting() != 0 || !zeroed(config) {
			t.Error("the config outlived its TTL during a fetch")
		}
	})
}

// The last SpentCodes served codes are remembered; older ones are
// forgotten and count as missing.
func TestSpentCodesBounded(t *testing.T) {
	h := newHarness(t, harnessOpts{cfg: Config{SpentCodes: 2}})
	c := h.client()
	var codes []string
	for range 3 {
		code, _, _ := h.put(100, node01, run01)
		h.want(h.get(c, code), http.StatusOK, nil, "a fresh code")
		h.waitEvent()
		codes = append(codes, code)
	}
	h.want(h.get(c, codes[0]), http.StatusNotFound, nil, "the oldest spent code, forgotten")
	h.wantKind(Missing)
	for _, code := range codes[1:] {
		h.want(h.get(c, code), http.StatusGone, nil, "a remembered spent code")
		h.wantKind(Refetched)
	}
}

// Drop and DropRun let go of one config, by its code or by its run's
// name, and of no other; Close lets go of every config, and Puts and
// fetches after it are refused.
func TestDropRun(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	const run02 = "provision-node-02-1767225601"
	code1, config1, _ := h.put(100, node01, run01)
	code2, config2, _ := h.put(100, Device{Name: "node-02"}, run02)
	code3, _, orig3 := h.put(100, Device{Name: "node-03"}, "provision-node-03-1767225602")
	code4, config4, _ := h.put(100, Device{Name: "node-04"}, "provision-node-04-1767225603")
	if !h.srv.Drop(code1) || !zeroed(config1) || h.srv.Waiting() != 3 {
		t.Fatal("Drop did not drop and zero the config alone")
	}
	if h.srv.Drop(code1) || h.srv.Drop("short") {
		t.Error("Drop reported a config it does not hold")
	}
	if !h.srv.DropRun(run02) || !zeroed(config2) || h.srv.Waiting() != 2 {
		t.Fatal("DropRun did not drop and zero the run's config alone")
	}
	if h.srv.DropRun(run02) || h.srv.DropRun("") {
		t.Error("DropRun reported a config it does not hold")
	}
	c := h.client()
	h.want(h.get(c, code1), http.StatusNotFound, nil, "a dropped code")
	h.wantKind(Missing)
	h.want(h.get(c, code2), http.StatusNotFound, nil, "a dropped run's code")
	h.wantKind(Missing)
	h.want(h.get(c, code3), http.StatusOK, orig3, "another run's code")
	h.wantKind(Served)

	if err := h.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if !zeroed(config4) || h.srv.Waiting() != 0 {
		t.Error("Close kept a config")
	}
	if err := h.srv.Put(NewCode(), makeConfig(100), node01, run01); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v, want ErrClosed", err)
	}
	h.want(h.get(c, code4), http.StatusServiceUnavailable, nil, "a fetch after Close")
	if err := h.srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestPutErrors(t *testing.T) {
	srv, err := New(&testGate{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Put(NewCode(), []byte("x"), node01, run01); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("Put before ConfigureServer: %v, want ErrNotConfigured", err)
	}
	if err := srv.ConfigureServer(&http.Server{}); err != nil {
		t.Fatal(err)
	}
	held := NewCode()
	if err := srv.Put(held, []byte("x"), node01, run01); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		code   string
		dev    Device
		run    string
		config []byte
		want   error
	}{
		{"short code", "abc", node01, run01, []byte("x"), ErrInvalidCode},
		{"code with a slash", strings.Repeat("a", CodeLen-1) + "/", node01, run01, []byte("x"), ErrInvalidCode},
		{"empty config", NewCode(), node01, run01, nil, ErrNoConfig},
		{"no device", NewCode(), Device{}, run01, []byte("x"), ErrNoDevice},
		{"no run", NewCode(), node01, "", []byte("x"), ErrNoRun},
		{"held code", held, node01, run01, []byte("x"), ErrCodeInUse},
		{"device by ID only", NewCode(), Device{ID: 3}, run01, []byte("x"), nil},
		{"device by name only", NewCode(), Device{Name: "n"}, run01, []byte("x"), nil},
	} {
		err := srv.Put(tc.code, tc.config, tc.dev, tc.run)
		if d := cmp.Diff(tc.want, err, cmpopts.EquateErrors()); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil, nil); !errors.Is(err, ErrNoGate) {
		t.Errorf("nil gate: %v, want ErrNoGate", err)
	}
	for _, cfg := range []Config{{TTL: -1}, {WriteTimeout: -1}, {SpentCodes: -1}} {
		if _, err := New(&testGate{}, &cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", cfg, err)
		}
	}
	s, err := New(&testGate{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.ttl != DefaultTTL || s.writeTimeout != DefaultWriteTimeout || len(s.spent.ring) != DefaultSpentCodes {
		t.Errorf("nil Config gave TTL %v, write timeout %v, %d spent codes", s.ttl, s.writeTimeout, len(s.spent.ring))
	}
}

func TestNewCode(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		c := NewCode()
		if len(c) != CodeLen || !ValidCode(c) {
			t.Fatalf("NewCode gave a code of %d characters that ValidCode refuses", len(c))
		}
		if seen[c] {
			t.Fatal("NewCode repeated a code")
		}
		seen[c] = true
	}
	for _, bad := range []string{"", "a", strings.Repeat("a", CodeLen+1), strings.Repeat("a", CodeLen-1) + "=", strings.Repeat("a", CodeLen-1) + "+", strings.Repeat("a", CodeLen-1) + "\x00", strings.Repeat("a", CodeLen-1) + "é"[:1]} {
		if ValidCode(bad) {
			t.Errorf("ValidCode(%q) is true", bad)
		}
	}
	if !ValidCode(strings.Repeat("-", CodeLen)) || !ValidCode(strings.Repeat("_", CodeLen)) || !ValidCode(strings.Repeat("Z9", CodeLen/2)+"z") {
		t.Error("ValidCode refuses a base64url text")
	}
}

func TestKindString(t *testing.T) {
	got := []string{Kind(0).String(), Served.String(), NotAcknowledged.String(), Refetched.String(), Missing.String(), Expired.String(), Lost.String(), Kind(99).String()}
	want := []string{"Kind(0)", "served", "not-acknowledged", "refetched", "missing", "expired", "lost", "Kind(99)"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// ConfigureServer records connections after the http.Server's own
// ConnContext, makes it speak HTTP/1.1 only, and refuses one that asks for
// HTTP/2, changing nothing.
func TestConfigureServer(t *testing.T) {
	srv, err := New(&testGate{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	type own struct{}
	hs := &http.Server{ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, own{}, true)
	}}
	if err := srv.ConfigureServer(hs); err != nil {
		t.Fatal(err)
	}
	if hs.Protocols == nil || !hs.Protocols.HTTP1() || hs.Protocols.HTTP2() || hs.Protocols.UnencryptedHTTP2() {
		t.Errorf("protocols %v, want HTTP/1 only", hs.Protocols)
	}
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	ctx := hs.ConnContext(context.Background(), c1)
	if ctx.Value(own{}) != true || ctx.Value(connKey{}) != c1 {
		t.Error("ConnContext does not carry both the server's own value and the connection")
	}

	h2 := new(http.Protocols)
	h2.SetHTTP1(true)
	h2.SetHTTP2(true)
	for name, hs := range map[string]*http.Server{
		"Protocols":            {Protocols: h2},
		"TLSNextProto":         {TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){"h2": func(*http.Server, *tls.Conn, http.Handler) {}}},
		"TLSConfig.NextProtos": {TLSConfig: &tls.Config{NextProtos: []string{"h2", "http/1.1"}}},
	} {
		if err := srv.ConfigureServer(hs); !errors.Is(err, ErrHTTP2) {
			t.Errorf("%s: %v, want ErrHTTP2", name, err)
		}
		if hs.ConnContext != nil {
			t.Errorf("%s: a refused http.Server was changed", name)
		}
	}
	if err := srv.ConfigureServer(nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil: %v, want ErrInvalidConfig", err)
	}
	srv.Close()
	if err := srv.ConfigureServer(&http.Server{}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// The caller names the service and its inventory in answers and events,
// and sets the config's Content-Type; the defaults name neither fleetd nor
// NetBox.
func TestCallerTexts(t *testing.T) {
	h := newHarness(t, harnessOpts{cfg: Config{Name: "provisiond", GateName: "Nautobot", ContentType: "text/x-talos"}})
	c := h.client()
	code, _, _ := h.put(4096, node01, run01)
	h.gate.set(false, errors.New("dial tcp: connection refused"))
	if r := h.get(c, code); r.status != http.StatusServiceUnavailable || string(r.body) != "Nautobot did not answer; try again\n" {
		t.Errorf("gate down: %d %q", r.status, r.body)
	}
	h.gate.set(true, nil)
	r := h.get(c, code)
	if got := r.header.Get("Content-Type"); r.status != 200 || got != "text/x-talos" {
		t.Errorf("%d with Content-Type %q, want 200 with text/x-talos", r.status, got)
	}
	h.wantEvent(Event{Kind: Served, Device: node01, Run: run01, Text: "provisiond served the config of " + run01})
	h.get(c, code)
	h.wantEvent(Event{Kind: Refetched, Device: node01, Run: run01, Peer: fromClient, Text: "the node asked again for the Talos config provisiond served it"})
	h.get(c, NewCode())
	h.wantEvent(Event{Kind: Missing, Peer: fromClient, Text: "the node asked for its Talos config, and provisiond holds none for it"})
	h.srv.Close()
	if r := h.get(c, code); string(r.body) != "provisiond is shutting down\n" {
		t.Errorf("closed: %d %q", r.status, r.body)
	}

	s := newBareServer(t, &testGate{}, nil)
	for _, text := range []string{s.contentType, s.text.served(run01), s.text.refetched, s.text.missing, s.text.closed, s.text.gateDown, s.text.cannotCheck} {
		if strings.Contains(text, "fleetd") || strings.Contains(text, "NetBox") {
			t.Errorf("a default text names fleetd or NetBox: %q", text)
		}
	}
	if s.contentType != "application/yaml" {
		t.Errorf("default Content-Type %q", s.contentType)
	}
}
