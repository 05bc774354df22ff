package daemon

import (
	"net/netip"
	"sync"
	"time"

	"github.com/fleetkit/fleet/inventory"
)

// Bounds of the asks for configs fleetd does not hold (configserve's
// Missing events): anyone can send them, from many addresses.
const (
	// askEvery is the least time between two journal lines (and two
	// NetBox look-ups) for the asks of one address.
	askEvery = time.Minute
	// AskPeers is how many addresses that are not known as devices' fleetd
	// tracks at once; the asks of a further one are counted in
	// fleet_install_config_untracked_asks_total, and nothing else is done
	// with them. It is a quarter of the journal's queue, so that the
	// look-ups of such addresses can never fill it.
	AskPeers = inventory.DefaultJournalQueueSize / 4
)

// askers tallies the asks for configs fleetd does not hold, by the address
// they came from, so that one address is looked up in NetBox and journaled
// at most once per every, however often it asks.
//
// It tracks every address a caller says is a device's (there are as many
// as devices), and at most max others: when those are max, a further
// address is not tracked, until idle ones (whose last job was queued more
// than every ago, and has taken their tally) are swept, at most once a
// second. An address with a job waiting is never swept, so at most max
// jobs of others wait at once. Safe for concurrent use.
type askers struct {
	every time.Duration
	max   int

	mu     sync.Mutex
	peers  map[netip.Addr]*asker
	others int // peers not known as devices'
	swept  time.Time
}

// asker is what askers knows of one address.
type asker struct {
	tally   asks
	device  bool      // the address is a device's
	queued  time.Time // when the address's last job was queued
	pending bool      // that job has not yet taken the tally
}

// asks is a tally of one address's asks.
type asks struct {
	n           int
	first, last time.Time // of the n asks
}

func newAskers(every time.Duration, max int) *askers {
	return &askers{every: every, max: max, peers: map[netip.Addr]*asker{}}
}

// ask tallies one ask from peer at t; device says whether peer is known as
// a device's address. It reports whether the ask is tracked (false: the
// table of others is full, and the ask is not tallied), and whether the
// caller should now queue a job that takes the address's tally (take): at
// most one such job waits per address, and they are queued at least every
// apart. A caller whose queue refuses the job says so (unqueued).
func (a *askers) ask(peer netip.Addr, t time.Time, device bool) (tracked, queue bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.peers[peer]
	switch {
	case p == nil:
		if !device && a.others >= a.max {
			a.sweep(t)
			if a.others >= a.max {
				return false, false
			}
		}
		p = &asker{device: device}
		a.peers[peer] = p
		if !device {
			a.others++
		}
	case device && !p.device:
		p.device = true
		a.others--
	}
	if p.tally.n == 0 {
		p.tally.first = t
	}
	p.tally.n++
	p.tally.last = t
	if p.pending || (!p.queued.IsZero() && t.Sub(p.queued) < a.every) {
		return true, false
	}
	p.pending, p.queued = true, t
	return true, true
}

// take returns peer's tally and starts a new one; its next ask after every
// queues a job again.
func (a *askers) take(peer netip.Addr) asks {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.peers[peer]
	if p == nil {
		return asks{}
	}
	t := p.tally
	p.tally, p.pending = asks{}, false
	return t
}

// retry gives back the tally t of peer's job that could not write it: the
// address's next ask asks for a job again at once, with t's asks counted.
func (a *askers) retry(peer netip.Addr, t asks) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.peers[peer]
	if p == nil {
		return
	}
	if p.tally.n == 0 || t.first.Before(p.tally.first) {
		p.tally.first = t.first
	}
	if t.last.After(p.tally.last) {
		p.tally.last = t.last
	}
	p.tally.n += t.n
	p.pending, p.queued = false, time.Time{}
}

// unqueued says the job ask asked for was not queued: the tally stays for
// the job of the address's next ask after every.
func (a *askers) unqueued(peer netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.peers[peer]; p != nil {
		p.pending = false
	}
}

// sweep forgets the idle addresses, at most once a second. An idle
// address's asks since its last job are not journaled; they are counted
// in fleet_install_config_events_total all the same.
func (a *askers) sweep(t time.Time) {
	if t.Sub(a.swept) < time.Second {
		return
	}
	a.swept = t
	for addr, p := range a.peers {
		if !p.pending && t.Sub(p.queued) >= a.every {
			delete(a.peers, addr)
			if !p.device {
				a.others--
			}
		}
	}
}

// tracked is the number of addresses tracked, and of those not known as
// devices'.
func (a *askers) tracked() (all, others int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.peers), a.others
}
