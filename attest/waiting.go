package attest

import (
	"container/list"
	"sync"
	"time"
)

// waitingStore keeps the latest pending-approval claim of each serial, at
// most max of them, each for ttl.
type waitingStore struct {
	mu    sync.Mutex
	ttl   time.Duration
	max   int
	order *list.List // of *waitingEntry, oldest first
	by    map[string]*list.Element
}

type waitingEntry struct {
	claim   Claim
	expires time.Time
}

func newWaitingStore(ttl time.Duration, max int) *waitingStore {
	return &waitingStore{ttl: ttl, max: max, order: list.New(), by: map[string]*list.Element{}}
}

func (w *waitingStore) put(c Claim) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.by[c.Serial]; ok {
		w.order.Remove(e)
		delete(w.by, c.Serial)
	}
	for w.order.Len() >= w.max {
		oldest := w.order.Front()
		w.order.Remove(oldest)
		delete(w.by, oldest.Value.(*waitingEntry).claim.Serial)
	}
	w.by[c.Serial] = w.order.PushBack(&waitingEntry{claim: c, expires: c.Proven.Add(w.ttl)})
}

func (w *waitingStore) get(serial string, now time.Time) (Claim, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Entries expire in the order they were put.
	for e := w.order.Front(); e != nil; e = w.order.Front() {
		we := e.Value.(*waitingEntry)
		if now.Before(we.expires) {
			break
		}
		w.order.Remove(e)
		delete(w.by, we.claim.Serial)
	}
	e, ok := w.by[serial]
	if !ok {
		return Claim{}, false
	}
	c := e.Value.(*waitingEntry).claim
	if c.LLDP != nil {
		l := *c.LLDP
		c.LLDP = &l
	}
	return c, true
}
