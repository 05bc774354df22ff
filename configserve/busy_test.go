package configserve

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/testenv"
)

// A fetch that comes while another fetch of its code is being answered
// waits for that answer's outcome and is answered as if it came after it:
// 410 once the config was served.
func TestFetchWaitsForTheAnswerInFlight(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	hold := make(chan struct{})
	h.gate.hold = hold
	code, _, orig := h.put(4096, node01, run01)
	first := make(chan reply, 1)
	go func() { first <- h.get(h.client(), code) }()
	testenv.WaitFor(t, 10*time.Second, "the first fetch asks the gate", func() bool { return h.gate.callCount() == 1 })
	second := make(chan reply, 1)
	go func() { second <- h.get(h.client(), code) }()
	select {
	case got := <-second:
		t.Errorf("a fetch while the first is in flight was answered %d at once; want it to wait for the outcome", got.status)
		second <- got
	case <-time.After(200 * time.Millisecond):
	}
	close(hold)
	h.want(<-first, http.StatusOK, orig, "the first fetch")
	h.want(<-second, http.StatusGone, orig, "the fetch that waited")
	if g := h.gate.callCount(); g != 1 {
		t.Errorf("the gate was asked %d times, want once", g)
	}
}

// A fetch that waits for an answer that is not acknowledged gets the
// config itself.
func TestFetchWaitsAndGetsTheUnacknowledgedConfig(t *testing.T) {
	h := newHarness(t, harnessOpts{cfg: Config{WriteTimeout: 500 * time.Millisecond}})
	code, _, orig := h.put(1<<20, node01, run01)
	c, _ := h.rawConn(16 << 10)
	sendGet(t, c, PathPrefix+code) // never read: the answer cannot arrive whole
	testenv.WaitFor(t, 10*time.Second, "the stuck answer asks the gate", func() bool { return h.gate.callCount() == 1 })
	h.want(h.get(h.client(), code), http.StatusOK, orig, "the fetch that waited")
	h.wantKind(NotAcknowledged)
	h.wantKind(Served)
}

// A fetch still waiting at BusyWait hears "try again" (503, Retry-After:
// 1) without the config, and a node that leaves while it waits costs
// nothing; the answer in flight is unaffected.
func TestFetchWaitRunsOut(t *testing.T) {
	h := newHarness(t, harnessOpts{cfg: Config{BusyWait: 300 * time.Millisecond}})
	hold := make(chan struct{})
	h.gate.hold = hold
	code, _, orig := h.put(4096, node01, run01)
	first := make(chan reply, 1)
	go func() { first <- h.get(h.client(), code) }()
	testenv.WaitFor(t, 10*time.Second, "the first fetch asks the gate", func() bool { return h.gate.callCount() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.url(code), nil)
	if _, err := h.client().Do(req); err == nil {
		t.Error("a fetch whose node left while it waited got an answer")
	}
	cancel()

	start := time.Now()
	got := h.get(h.client(), code)
	if got.status != http.StatusServiceUnavailable || got.header.Get("Retry-After") != "1" || bytes.Contains(got.body, orig[:64]) {
		t.Errorf("a fetch whose wait ran out: %d, Retry-After %q; want 503, 1, without the config", got.status, got.header.Get("Retry-After"))
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("answered after %v, before BusyWait", waited)
	}
	close(hold)
	h.want(<-first, http.StatusOK, orig, "the answer in flight")
}

// Three replicas behind one address, a node fetching its config through
// each in turn, 200 times over, the first try at each replica in turn:
// one answer carries the config, and every later one says it was served
// (410), even while the replica that answered still writes its outcome
// down (20 ms, as fleetd's NetBox writes) before it settles the loan.
func TestServedOnceThenGoneAtEveryReplica(t *testing.T) {
	opts := harnessOpts{eventDelay: 20 * time.Millisecond}
	r := newReplicas(t, opts)
	opts.cfg.Borrow = r.borrow
	ring := []*harness{r.a, r.b, newHarness(t, opts)}
	clients := []*http.Client{ring[0].client(), ring[1].client(), ring[2].client()}
	for i := range 200 {
		code, _, orig := r.a.put(4096, node01, run01)
		var got []int
		for try := range len(ring) {
			h := ring[(i+try)%len(ring)]
			r := h.get(clients[(i+try)%len(ring)], code)
			if r.status == http.StatusOK && !bytes.Equal(r.body, orig) {
				t.Fatalf("sequence %d: a 200 that is not the config", i)
			}
			got = append(got, r.status)
		}
		if want := []int{200, 410, 410}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("sequence %d (first try at replica %d): statuses %v, want %v", i, i%len(ring), got, want)
		}
	}
}
