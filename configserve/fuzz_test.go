package configserve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fleetkit/fleet/internal/syncbuf"
)

// fuzzConn is one loopback TCP connection per fuzzing process, whose far
// end reads everything, so that an answer's acknowledgement check has a
// real socket to query.
var fuzzConn = sync.OnceValues(func() (net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	go io.Copy(io.Discard, c)
	return ln.Accept()
})

// FuzzHandler sends the Server request shapes (method, path, query, a
// header, the gate's answer, the HTTP version) and checks every answer
// against a model of the documented statuses: nothing panics, only the one
// documented shape gets the config, the gate is asked and an event
// reported only where ServeHTTP says, and no code or config reaches a log
// line or an event. In the path, {code} stands for the held config's code
// and {spent} for a served one.
func FuzzHandler(f *testing.F) {
	for _, s := range []struct {
		method, path, query, hname, hval string
		gate                             byte
		h2                               bool
	}{
		{"GET", "/config/{code}", "", "", "", 0, false},
		{"GET", "/config/{code}", "a=b", "Range", "bytes=0-10", 0, false},
		{"GET", "/config/{code}", "", "", "", 1, false},
		{"GET", "/config/{code}", "", "", "", 2, false},
		{"GET", "/config/{code}", "", "", "", 0, true},
		{"GET", "/config/{spent}", "", "", "", 0, false},
		{"GET", "/config/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "", "", "", 0, false},
		{"HEAD", "/config/{code}", "", "", "", 0, false},
		{"POST", "/config/{code}", "", "Content-Type", "text/plain", 0, false},
		{"DELETE", "/config/{code}", "", "", "", 0, false},
		{"GET", "/config/{code}/", "", "", "", 0, false},
		{"GET", "/config/{code}/x", "", "", "", 0, false},
		{"GET", "/config/../config/{code}", "", "", "", 0, false},
		{"GET", "/configs/{code}", "", "", "", 0, false},
		{"GET", "/config/{code}{code}", "", "", "", 0, false},
		{"GET", "/config/{code}A", "", "", "", 0, false},
		{"GET", "/config/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "", "", "", 0, false},
		{"GET", "/config/short", "", "", "", 0, false},
		{"GET", "/config/", "", "", "", 0, false},
		{"GET", "/config", "", "", "", 0, false},
		{"GET", "/", "", "", "", 0, false},
		{"GET", "/config/\x00\xff", "", "Connection", "close", 0, false},
		{"", "", "", "", "", 0, false},
	} {
		f.Add(s.method, s.path, s.query, s.hname, s.hval, s.gate, s.h2)
	}
	f.Fuzz(func(t *testing.T, method, path, query, hname, hval string, gateMode byte, h2 bool) {
		conn, err := fuzzConn()
		if err != nil {
			t.Fatal(err)
		}
		logs := &syncbuf.Buffer{}
		var events []Event
		gate := &testGate{}
		switch gateMode % 3 {
		case 0:
			gate.planned = true
		case 2:
			gate.err = errors.New("netbox did not answer")
		}
		srv := newBareServer(t, gate, &Config{
			SpentCodes: 4,
			Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Events:     func(ev Event) { events = append(events, ev) },
		})
		code, config := putNew(t, srv, 2000, node01, run01)
		orig, spent := bytes.Clone(config), NewCode()
		srv.spent.add(digestOf(spent), spentEntry{device: node01, run: "provision-node-01-1"})

		p := strings.ReplaceAll(strings.ReplaceAll(path, "{code}", code), "{spent}", spent)
		req := &http.Request{
			Method:     method,
			URL:        &url.URL{Path: p, RawQuery: query},
			Proto:      "HTTP/1.1",
			ProtoMajor: 1,
			ProtoMinor: 1,
			Header:     http.Header{},
			Host:       "fleetd",
			RemoteAddr: "192.0.2.7:4711",
		}
		if h2 {
			req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
		}
		if hname != "" {
			req.Header[hname] = []string{hval}
		}
		req = req.WithContext(connContext(context.Background(), conn))
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)

		// The model: the status, the event, whether the gate is asked.
		rest, isConfig := strings.CutPrefix(p, PathPrefix)
		want, event, asked := http.StatusNotFound, Kind(0), false
		switch {
		case !isConfig || rest == "" || strings.Contains(rest, "/"):
		case method != http.MethodGet:
			want = http.StatusMethodNotAllowed
		case !ValidCode(rest):
			want = http.StatusBadRequest
		case rest == spent:
			want, event = http.StatusGone, Refetched
		case rest != code:
			event = Missing
		case gateMode%3 == 1:
			want, asked = http.StatusConflict, true
		case gateMode%3 == 2:
			want, asked = http.StatusServiceUnavailable, true
		case h2:
			want, asked = http.StatusHTTPVersionNotSupported, true
		default:
			want, event, asked = http.StatusOK, Served, true
		}
		if w.Code != want {
			t.Fatalf("%q %q: %d, want %d", method, path, w.Code, want)
		}
		var kinds, wantKinds []Kind
		for _, ev := range events {
			kinds = append(kinds, ev.Kind)
		}
		if event != 0 {
			wantKinds = []Kind{event}
		}
		if !slices.Equal(kinds, wantKinds) || (gate.callCount() == 1) != asked {
			t.Fatalf("%q %q: events %v and %d gate calls, want %v and gate asked %v", method, path, kinds, gate.callCount(), wantKinds, asked)
		}
		if allow := w.Header().Get("Allow"); (want == http.StatusMethodNotAllowed) != (allow == http.MethodGet) {
			t.Fatalf("%q %q: %d with Allow %q", method, path, w.Code, allow)
		}
		body := w.Body.Bytes()
		if want == http.StatusOK {
			if !bytes.Equal(body, orig) || srv.Waiting() != 0 {
				t.Fatalf("a serve gave %d bytes, and %d configs wait", len(body), srv.Waiting())
			}
		} else {
			if bytes.Contains(body, []byte(tagOf(orig))) {
				t.Fatalf("a %d answer carried the config", w.Code)
			}
			if srv.Waiting() != 1 {
				t.Fatalf("a %d answer dropped the config", w.Code)
			}
		}
		checkNoSecrets(t, []string{code, spent, tagOf(orig)}, logs.String(), events)
	})
}
