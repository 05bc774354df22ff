package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Readiness and liveness, on the metrics listener.
//
// /readyz answers 200 "ok" only when the serving certificate is loaded and
// not expired, NetBox answered within the window (Settings.ReadyWindow),
// and Tinkerbell's API server answered within it too; otherwise 503 with
// one line per cause, as text. A replica that is not ready leaves the
// Services' endpoints, and machines go to the others: a replica without
// NetBox cannot judge a claim (its binding is in NetBox) nor serve a
// config (served only while NetBox says the device is planned), and one
// without the API server cannot start a run.
//
// /healthz answers 200 whenever the process serves HTTP: liveness, which
// neither NetBox nor the API server enters, so that a slow or absent
// NetBox never gets a replica restarted (a restart would drop the configs
// waiting in its memory, and mend nothing).
//
// An answer is any HTTP answer below 500, a 404 or a 403 included: the
// server took the request and said something. A transport error, a
// timeout or a 5xx is not one. Every request of fleetd's own clients
// counts (Answers wraps their transports), so a busy replica asks
// nothing more; one that has not heard from NetBox or the API server for
// a quarter of the window asks it once (NetBox's GET /api/status/, the API
// server's GET /readyz), so that an idle replica does not go unready for
// being idle, while one whose NetBox stopped answering goes unready
// within the window.

// defaultReadyWindow is Settings.ReadyWindow's default.
const defaultReadyWindow = time.Minute

// minReadyWindow is the shortest ReadyWindow fleetd takes: asks go out at
// most every quarter of it.
const minReadyWindow = time.Second

// Answers records when NetBox and Tinkerbell's API server last answered
// fleetd, for its readiness (/readyz). Wrap the transports of fleetd's
// NetBox client with NetBoxTransport and of its Kubernetes clients of
// Tinkerbell's cluster with APIServerTransport (a rest.Config's Wrap), so
// that every request they make counts. The zero value records; safe for
// concurrent use.
type Answers struct {
	// AskNetBox and AskAPIServer each send one cheap request through a
	// client whose transport NetBoxTransport or APIServerTransport wrapped
	// (AskNetBox and AskAPIServer make them), when that server has not
	// answered for a quarter of the readiness window; what the answer
	// says is up to the transport. nil: never asked, and an idle replica
	// goes unready. Set them before the Daemon is made; not changed
	// after.
	AskNetBox, AskAPIServer func(context.Context)

	netbox, apiserver answered
}

// NetBoxTransport wraps rt (nil: http.DefaultTransport) so that NetBox's
// answers through it are recorded.
func (a *Answers) NetBoxTransport(rt http.RoundTripper) http.RoundTripper {
	return a.netbox.wrap(rt)
}

// APIServerTransport wraps rt (nil: http.DefaultTransport) so that the
// answers of Tinkerbell's API server through it are recorded. It is a
// transport.WrapperFunc, for rest.Config.Wrap.
func (a *Answers) APIServerTransport(rt http.RoundTripper) http.RoundTripper {
	return a.apiserver.wrap(rt)
}

// AskNetBox returns an Answers.AskNetBox: GET /api/status/ of the NetBox at
// base with token, through c, whose transport NetBoxTransport wrapped.
func AskNetBox(c *http.Client, base, token string) func(context.Context) {
	url := strings.TrimSuffix(base, "/") + "/api/status/"
	return func(ctx context.Context) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Token "+token)
		req.Header.Set("Accept", "application/json")
		if rsp, err := c.Do(req); err == nil {
			io.Copy(io.Discard, io.LimitReader(rsp.Body, 64<<10))
			rsp.Body.Close()
		}
	}
}

// answered is when one server last answered, and why its last request
// that got no answer got none. The zero value is ready; safe for
// concurrent use.
type answered struct {
	mu sync.Mutex
	answerState
}

// answerState is a copy of an answered.
type answerState struct {
	at       time.Time // the last answer; zero: none yet
	failedAt time.Time // the last request without an answer
	failure  string    // why, on one line
}

func (a *answered) wrap(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return answerTransport{base: rt, a: a}
}

func (a *answered) state() answerState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.answerState
}

// answerTransport records the answers of the requests it sends.
type answerTransport struct {
	base http.RoundTripper
	a    *answered
}

func (t answerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rsp, err := t.base.RoundTrip(r)
	now := time.Now()
	var failure string
	switch {
	case err == nil && rsp.StatusCode < 500:
	case err == nil:
		failure = "answered " + rsp.Status
	case errors.Is(err, context.Canceled):
		return rsp, err // the caller gave up: that says nothing of the server
	default:
		failure = oneLine(err.Error())
	}
	t.a.mu.Lock()
	if failure == "" {
		t.a.at = now
	} else {
		t.a.failedAt, t.a.failure = now, failure
	}
	t.a.mu.Unlock()
	return rsp, err
}

// oneLine is s with its line breaks made spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// readyFacts are what readiness is judged from.
type readyFacts struct {
	now    time.Time
	window time.Duration
	// cert is the serving certificate, with its Leaf; nil: none loaded.
	cert              *tls.Certificate
	netbox, apiserver answerState
}

// notReady returns why fleetd is not ready, one line per cause; none when
// it is.
func notReady(f readyFacts) []string {
	var causes []string
	switch {
	case f.cert == nil || f.cert.Leaf == nil:
		causes = append(causes, "the serving certificate is not loaded (FLEET_TLS_CERT, FLEET_TLS_KEY)")
	case !f.now.Before(f.cert.Leaf.NotAfter):
		causes = append(causes, fmt.Sprintf("the serving certificate expired at %s (FLEET_TLS_CERT)", f.cert.Leaf.NotAfter.UTC().Format(time.RFC3339)))
	}
	if c, ok := silent("NetBox", f.netbox, f.now, f.window); ok {
		causes = append(causes, c)
	}
	if c, ok := silent("Tinkerbell's API server", f.apiserver, f.now, f.window); ok {
		causes = append(causes, c)
	}
	return causes
}

// silent says, when the server named name has not answered within window
// before now, since when, and what its last request without an answer
// met.
func silent(name string, s answerState, now time.Time, window time.Duration) (string, bool) {
	if !s.at.IsZero() && now.Sub(s.at) < window {
		return "", false
	}
	var b strings.Builder
	if s.at.IsZero() {
		fmt.Fprintf(&b, "%s has not answered since fleetd started", name)
	} else {
		fmt.Fprintf(&b, "%s has not answered for %s (last at %s; readiness window %s)",
			name, now.Sub(s.at).Round(time.Second), s.at.UTC().Format(time.RFC3339), window)
	}
	if s.failure != "" && s.failedAt.After(s.at) {
		fmt.Fprintf(&b, ": %s", s.failure)
	}
	return b.String(), true
}

// readiness is fleetd's /readyz, and the asks that keep an idle replica's
// answers recent.
type readiness struct {
	answers *Answers
	cert    *CertReloader
	window  time.Duration
	now     func() time.Time
}

func (r *readiness) facts() readyFacts {
	// getCertificate also reads a renewed certificate, which a replica
	// that is not ready, and so gets no handshake, would otherwise never
	// do.
	cert, _ := r.cert.getCertificate(nil)
	return readyFacts{
		now: r.now(), window: r.window, cert: cert,
		netbox: r.answers.netbox.state(), apiserver: r.answers.apiserver.state(),
	}
}

func (r *readiness) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	causes := notReady(r.facts())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if len(causes) == 0 {
		fmt.Fprintln(w, "ok")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	for _, c := range causes {
		fmt.Fprintln(w, c)
	}
}

// ask asks NetBox and Tinkerbell's API server, each when it has not
// answered for a quarter of the window, at once and then every quarter of
// the window, until ctx ends.
func (r *readiness) ask(ctx context.Context) {
	every := r.window / 4
	var wg sync.WaitGroup
	for _, s := range []struct {
		a   *answered
		ask func(context.Context)
	}{{&r.answers.netbox, r.answers.AskNetBox}, {&r.answers.apiserver, r.answers.AskAPIServer}} {
		if s.ask != nil {
			wg.Go(func() { askWhenQuiet(ctx, s.a, s.ask, every) })
		}
	}
	wg.Wait()
}

// askWhenQuiet calls ask, with a timeout of every, whenever a has not
// answered for every, checking at once and then every every, until ctx
// ends.
func askWhenQuiet(ctx context.Context, a *answered, ask func(context.Context), every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if time.Since(a.state().at) >= every {
			actx, cancel := context.WithTimeout(ctx, every)
			ask(actx)
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readyz is the metrics listener's /readyz.
func (d *Daemon) readyz(w http.ResponseWriter, r *http.Request) { d.ready.ServeHTTP(w, r) }
