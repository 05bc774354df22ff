package daemon

import (
	"context"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Bounds of the borrows of codes that no replica holds. A fetch of a code
// this replica does not hold asks every other replica to lend it: anyone
// who reaches the machines' port can send fetches of random codes, each
// costing a request per replica. A source address whose borrows found
// their codes held nowhere heldNowhereMax times within heldNowhereEvery
// gets its next fetches of unknown codes answered 404 at once, without
// asking, until the window passes. A node's fetch of a config a replica
// holds is never counted: it ends in a loan.
const (
	heldNowhereMax   = 8
	heldNowhereEvery = time.Minute
	// heldNowhereSources bounds the addresses tracked; when they are
	// that many, the oldest window is dropped first.
	heldNowhereSources = 4096
	// lendTimeout bounds one lend request to another replica: a replica
	// that hangs delays a fetch of a code no other replica holds by at
	// most this long (the fetch then gets 503 and tries again).
	lendTimeout = 3 * time.Second
)

// heldNowhere counts, by source address, the borrows whose codes no
// replica held. Safe for concurrent use.
type heldNowhere struct {
	mu      sync.Mutex
	sources map[netip.Addr]*nowhereWindow
}

type nowhereWindow struct {
	start time.Time
	n     int
}

// limited reports whether from has used up its borrows of unknown codes.
func (h *heldNowhere) limited(from netip.Addr, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.sources[from]
	return w != nil && now.Sub(w.start) < heldNowhereEvery && w.n >= heldNowhereMax
}

// add counts a borrow from from whose code no replica held.
func (h *heldNowhere) add(from netip.Addr, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sources == nil {
		h.sources = map[netip.Addr]*nowhereWindow{}
	}
	w := h.sources[from]
	if w == nil || now.Sub(w.start) >= heldNowhereEvery {
		if w == nil && len(h.sources) >= heldNowhereSources {
			h.evict(now)
		}
		w = &nowhereWindow{start: now}
		h.sources[from] = w
	}
	w.n++
}

// evict drops the windows that passed, or, when none has, the oldest.
func (h *heldNowhere) evict(now time.Time) {
	var oldest netip.Addr
	var first time.Time
	for a, w := range h.sources {
		if now.Sub(w.start) >= heldNowhereEvery {
			delete(h.sources, a)
			continue
		}
		if first.IsZero() || w.start.Before(first) {
			oldest, first = a, w.start
		}
	}
	if len(h.sources) >= heldNowhereSources {
		delete(h.sources, oldest)
	}
}

type fetchFromKey struct{}

// withFetchFrom records the address a request came from in its context,
// for the borrow a config fetch may make (configserve passes the fetch's
// context values on to Config.Borrow).
func withFetchFrom(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), fetchFromKey{}, peerAddr(r.RemoteAddr))))
	})
}

// fetchFrom is the address withFetchFrom recorded; the zero Addr: none.
func fetchFrom(ctx context.Context) netip.Addr {
	a, _ := ctx.Value(fetchFromKey{}).(netip.Addr)
	return a
}
