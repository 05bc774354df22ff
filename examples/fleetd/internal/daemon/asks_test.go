package daemon

import (
	"net/netip"
	"testing"
	"time"
)

// The table of asking addresses stays within its bound: an address beyond
// it is not tracked until idle addresses are swept, unless it is a
// device's; an address with a job waiting is never swept; and one address
// queues at most one job a minute, whose tally counts the asks in between.
func TestAskersBounded(t *testing.T) {
	a := newAskers(time.Minute, 4)
	t0 := time.Unix(1_800_000_000, 0)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}) }
	for i := range 10 {
		if tracked, queue := a.ask(addr(i), t0, false); tracked != (i < 4) || queue != (i < 4) {
			t.Errorf("ask %d: tracked %v, queue %v", i, tracked, queue)
		}
	}
	for range 5 {
		if tracked, queue := a.ask(addr(0), t0.Add(10*time.Second), false); !tracked || queue {
			t.Errorf("an ask within the minute: tracked %v, queue %v; want tracked alone", tracked, queue)
		}
	}
	if got := a.take(addr(0)); got.n != 6 || !got.first.Equal(t0) || !got.last.Equal(t0.Add(10*time.Second)) {
		t.Errorf("tally %+v, want 6 asks from t0 to t0+10s", got)
	}
	if _, queue := a.ask(addr(0), t0.Add(50*time.Second), false); queue {
		t.Error("an ask 50 s after the last job queued another")
	}
	if _, queue := a.ask(addr(0), t0.Add(time.Minute), false); !queue {
		t.Error("an ask a minute after the last job queued none")
	}
	// Every tracked address has a job waiting: none is swept, and only a
	// device's address is tracked beyond the bound.
	if tracked, _ := a.ask(addr(20), t0.Add(2*time.Minute), false); tracked {
		t.Error("a fifth address was tracked while four had jobs waiting")
	}
	if tracked, queue := a.ask(addr(30), t0.Add(2*time.Minute), true); !tracked || !queue {
		t.Errorf("a device's address beyond the bound: tracked %v, queue %v", tracked, queue)
	}
	a.take(addr(30))
	for i := range 4 {
		a.take(addr(i))
	}
	if tracked, _ := a.ask(addr(20), t0.Add(2*time.Minute+500*time.Millisecond), false); tracked {
		t.Error("the table was swept twice within a second")
	}
	if tracked, queue := a.ask(addr(20), t0.Add(2*time.Minute+time.Second), false); !tracked || !queue {
		t.Errorf("after the idle addresses' sweep: tracked %v, queue %v", tracked, queue)
	}
	if all, others := a.tracked(); all != 2 || others != 1 {
		t.Errorf("%d addresses tracked after the sweep (%d not devices'), want the device's and the new one", all, others)
	}
	// A job the queue refused leaves its tally for the next one.
	a.unqueued(addr(20))
	a.ask(addr(20), t0.Add(2*time.Minute+2*time.Second), false)
	if _, queue := a.ask(addr(20), t0.Add(3*time.Minute+time.Second), false); !queue {
		t.Error("no job queued a minute after a refused one")
	}
	if got := a.take(addr(20)); got.n != 3 {
		t.Errorf("tally %+v, want the 3 asks since the refused job", got)
	}
}
