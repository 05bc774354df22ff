package attest

import (
	"container/list"
	"fmt"
	"strings"
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

// String prints the claim for an operator, one fact a line: the serial,
// MAC, peer and time; the switch port; each proven EK hash. It approves
// nothing: a waiting claim proves nothing, because another machine can send
// one with this serial.
func (c Claim) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "serial %s, MAC %s, from %s at %s\n", c.Serial, c.MAC, c.Peer, c.Proven.UTC().Format(time.RFC3339))
	if l := c.LLDP; l != nil {
		fmt.Fprintf(&b, "switch %q (chassis %s), port %q", l.SystemName, l.ChassisID, l.PortID)
		if l.PortDescription != "" {
			fmt.Fprintf(&b, " %q", l.PortDescription)
		}
		b.WriteString("\n")
	} else {
		b.WriteString("no LLDP frame from the switch\n")
	}
	if c.RSA2048 != "" {
		fmt.Fprintf(&b, "proven RSA-2048 EK %s\n", c.RSA2048)
	}
	if c.ECCP256 != "" {
		fmt.Fprintf(&b, "proven ECC P-256 EK %s\n", c.ECCP256)
	}
	return b.String()
}
