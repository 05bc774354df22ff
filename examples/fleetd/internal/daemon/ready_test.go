package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetkit/fleet/internal/testcert"
)

// Each cause of unreadiness, alone and together, from plain facts.
func TestNotReady(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	valid := &tls.Certificate{Leaf: &x509.Certificate{NotAfter: now.Add(24 * time.Hour)}}
	recent := answerState{at: now.Add(-59 * time.Second)}
	for _, tc := range []struct {
		name string
		f    readyFacts
		want []string
	}{
		{"all good", readyFacts{cert: valid, netbox: recent, apiserver: recent}, nil},
		{"a request failed after the last answer, within the window", readyFacts{cert: valid,
			netbox:    answerState{at: now.Add(-30 * time.Second), failedAt: now.Add(-time.Second), failure: "answered 503 Service Unavailable"},
			apiserver: recent}, nil},
		{"certificate not loaded", readyFacts{netbox: recent, apiserver: recent},
			[]string{"the serving certificate is not loaded (FLEET_TLS_CERT, FLEET_TLS_KEY)"}},
		{"certificate expired", readyFacts{cert: &tls.Certificate{Leaf: &x509.Certificate{NotAfter: now}}, netbox: recent, apiserver: recent},
			[]string{"the serving certificate expired at 2026-12-01T12:00:00Z (FLEET_TLS_CERT)"}},
		{"NetBox never answered", readyFacts{cert: valid, apiserver: recent},
			[]string{"NetBox has not answered since fleetd started"}},
		{"NetBox not answered within the window", readyFacts{cert: valid, apiserver: recent,
			netbox: answerState{at: now.Add(-90 * time.Second), failedAt: now.Add(-5 * time.Second), failure: "dial tcp 10.0.0.5:443: connect: connection refused"}},
			[]string{"NetBox has not answered for 1m30s (last at 2026-12-01T11:58:30Z; readiness window 1m0s): dial tcp 10.0.0.5:443: connect: connection refused"}},
		{"NetBox answered exactly a window ago", readyFacts{cert: valid, apiserver: recent, netbox: answerState{at: now.Add(-time.Minute)}},
			[]string{"NetBox has not answered for 1m0s (last at 2026-12-01T11:59:00Z; readiness window 1m0s)"}},
		{"API server never answered, its requests failed", readyFacts{cert: valid, netbox: recent,
			apiserver: answerState{failedAt: now.Add(-time.Second), failure: "answered 500 Internal Server Error"}},
			[]string{"Tinkerbell's API server has not answered since fleetd started: answered 500 Internal Server Error"}},
		{"everything at once", readyFacts{},
			[]string{
				"the serving certificate is not loaded (FLEET_TLS_CERT, FLEET_TLS_KEY)",
				"NetBox has not answered since fleetd started",
				"Tinkerbell's API server has not answered since fleetd started",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.now, tc.f.window = now, time.Minute
			if diff := cmp.Diff(tc.want, notReady(tc.f)); diff != "" {
				t.Errorf("notReady (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeServer answers through a transport of its own: status (0: 404)
// while up, a connection refused (its text on two lines) while down, and
// a request whose caller gave up its context's error; it counts the
// requests it got.
type fakeServer struct {
	down     atomic.Bool
	status   atomic.Int64
	requests atomic.Int64
}

func (f *fakeServer) RoundTrip(r *http.Request) (*http.Response, error) {
	f.requests.Add(1)
	code := int(f.status.Load())
	switch {
	case r.Context().Err() != nil:
		return nil, r.Context().Err()
	case f.down.Load():
		return nil, errors.New("dial tcp 10.0.0.5:443: connect:\nconnection refused")
	case code == 0:
		code = http.StatusNotFound
	}
	return &http.Response{StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), Body: http.NoBody, Request: r}, nil
}

// getFrom GETs url with c, as ctx allows, and closes the answer.
func getFrom(ctx context.Context, c *http.Client, url string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if rsp, err := c.Do(req); err == nil {
		rsp.Body.Close()
	}
}

// An answer below 500 counts, whatever it says; a 5xx and a transport
// error do not, and are kept as the failure; a request its caller
// cancelled says nothing.
func TestAnswerTransport(t *testing.T) {
	srv := &fakeServer{}
	var a answered
	c := &http.Client{Transport: a.wrap(srv)}
	get := func(ctx context.Context) { getFrom(ctx, c, "https://netbox.example/") }
	before := time.Now()
	get(t.Context())
	s := a.state()
	if s.at.Before(before) || s.failure != "" {
		t.Fatalf("after a 404: %+v, want an answer at or after %v", s, before)
	}
	answeredAt := s.at

	srv.status.Store(http.StatusServiceUnavailable)
	get(t.Context())
	if s = a.state(); !s.at.Equal(answeredAt) || s.failure != "answered 503 Service Unavailable" || s.failedAt.Before(answeredAt) {
		t.Errorf("after a 503: %+v, want the last answer kept and the 503 as the failure", s)
	}

	srv.down.Store(true)
	get(t.Context())
	if s = a.state(); !s.at.Equal(answeredAt) || s.failure != "dial tcp 10.0.0.5:443: connect: connection refused" {
		t.Errorf("after a transport error: %+v, want it as the failure, on one line", s)
	}

	failed := s
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	get(ctx)
	if s = a.state(); s != failed || srv.requests.Load() != 4 {
		t.Errorf("after a request its caller cancelled (request %d): %+v, want %+v unchanged", srv.requests.Load(), s, failed)
	}
}

// readyzAndHealthz are a Daemon's /readyz and /healthz: status and body.
func readyzAndHealthz(t *testing.T, d *Daemon) (readyCode int, readyBody string, healthCode int) {
	t.Helper()
	h := d.MetricsHandler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	readyCode, readyBody = rec.Code, rec.Body.String()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return readyCode, readyBody, rec.Code
}

// A replica asks NetBox and the API server only when they have been quiet
// for a quarter of the window: a busy NetBox is not asked, an idle API
// server is, and stays ready. When NetBox stops answering, /readyz turns
// 503 with NetBox's cause once the window has passed, and back to 200 at
// the first answer after NetBox is back; /healthz answers 200 throughout.
func TestReadinessAsks(t *testing.T) {
	tc, err := testcert.New("fleetd.test")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := StaticCert(tc.TLS)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		netbox, apiserver := &fakeServer{}, &fakeServer{}
		ans := &Answers{}
		nbClient := &http.Client{Transport: ans.NetBoxTransport(netbox)}
		apiClient := &http.Client{Transport: ans.APIServerTransport(apiserver)}
		ans.AskNetBox = AskNetBox(nbClient, "https://netbox.example/", "token")
		var netboxAsks atomic.Int64
		askNetBox := ans.AskNetBox
		ans.AskNetBox = func(ctx context.Context) { netboxAsks.Add(1); askNetBox(ctx) }
		ans.AskAPIServer = func(ctx context.Context) { getFrom(ctx, apiClient, "https://apiserver.example/readyz") }
		d := &Daemon{
			metrics: newMetrics(func() time.Time { return time.Time{} }, func() int { return 0 }),
			ready:   &readiness{answers: ans, cert: cert, window: time.Minute, now: time.Now},
		}
		if code, body, _ := readyzAndHealthz(t, d); code != http.StatusServiceUnavailable ||
			body != "NetBox has not answered since fleetd started\nTinkerbell's API server has not answered since fleetd started\n" {
			t.Errorf("/readyz before any answer: %d %q, want 503 naming NetBox and the API server", code, body)
		}

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go d.ready.ask(ctx)
		synctest.Wait()
		if code, body, _ := readyzAndHealthz(t, d); code != http.StatusOK || body != "ok\n" {
			t.Fatalf("/readyz after the first asks: %d %q, want 200 ok", code, body)
		}

		// fleetd's own NetBox requests, every 5 s for a minute: NetBox is
		// not asked again; the API server, idle, is asked every 15 s.
		for range 12 {
			time.Sleep(5 * time.Second)
			getFrom(t.Context(), nbClient, "https://netbox.example/api/dcim/devices/")
			synctest.Wait()
		}
		if n := netboxAsks.Load(); n != 1 {
			t.Errorf("NetBox, busy for a minute, was asked %d times, want once (at start)", n)
		}
		if n := apiserver.requests.Load(); n != 5 {
			t.Errorf("the API server, idle for a minute, was asked %d times, want 5 (at start, then every 15 s)", n)
		}
		if code, _, _ := readyzAndHealthz(t, d); code != http.StatusOK {
			t.Errorf("/readyz with NetBox busy and the API server idle: %d, want 200", code)
		}

		netbox.down.Store(true)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if code, body, health := readyzAndHealthz(t, d); code != http.StatusOK || health != http.StatusOK {
			t.Errorf("/readyz 59 s after NetBox's last answer: %d %q, want 200 (within the window); /healthz %d", code, body, health)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		want := "NetBox has not answered for 1m0s (last at " + time.Now().Add(-time.Minute).UTC().Format(time.RFC3339) +
			"; readiness window 1m0s): dial tcp 10.0.0.5:443: connect: connection refused\n"
		code, body, health := readyzAndHealthz(t, d)
		if code != http.StatusServiceUnavailable || body != want {
			t.Errorf("/readyz a minute after NetBox's last answer: %d %q, want 503 %q", code, body, want)
		}
		if health != http.StatusOK {
			t.Errorf("/healthz with NetBox down: %d, want 200", health)
		}
		if n := netboxAsks.Load(); n < 4 {
			t.Errorf("NetBox, quiet for a minute, was asked %d times, want at least 4", n)
		}

		netbox.down.Store(false)
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if code, body, _ := readyzAndHealthz(t, d); code != http.StatusOK {
			t.Errorf("/readyz 15 s after NetBox came back: %d %q, want 200", code, body)
		}
		cancel()
	})
}
