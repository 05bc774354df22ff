package configserve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// replicas are two harnesses: a holds the configs, and b borrows them
// from a (borrow), as two replicas of fleetd behind one address do.
type replicas struct {
	a, b      *harness
	mu        sync.Mutex
	borrowErr error
	settled   chan bool // each loan's outcome, once the holder settled it
}

// newReplicas starts a, and b with bo (its Borrow set to r.borrow).
func newReplicas(t *testing.T, bo harnessOpts) *replicas {
	t.Helper()
	r := &replicas{a: newHarness(t, harnessOpts{}), settled: make(chan bool, 256)}
	bo.cfg.Borrow = r.borrow
	r.b = newHarness(t, bo)
	return r
}

// borrow is a borrower's Config.Borrow: the loan crosses from a as bytes,
// as over a network. borrowErr, when set, is what it answers instead.
func (r *replicas) borrow(ctx context.Context, code string) (*Loan, error) {
	r.mu.Lock()
	err := r.borrowErr
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	l, err := r.a.srv.Lend(ctx, code)
	if err != nil {
		return nil, err
	}
	return NewLoan(bytes.Clone(l.Config), l.Device, l.Run, l.Deadline, func(served bool, peer string) {
		l.Settle(served, peer)
		r.settled <- served
	}), nil
}

// waitSettled returns the outcome of the next loan the holder settled,
// failing t after 10 s.
func (r *replicas) waitSettled(t *testing.T) bool {
	t.Helper()
	select {
	case served := <-r.settled:
		return served
	case <-time.After(10 * time.Second):
		t.Fatal("no loan settled within 10 s")
		return false
	}
}

// A fetch that reaches the replica without the config gets it from the
// replica that holds it, once: the borrower reports it served (Borrowed)
// and settles the loan once, the holder reports nothing, and every later
// fetch, at either replica, is told it was served (410).
func TestBorrowedConfigServedOnce(t *testing.T) {
	r := newReplicas(t, harnessOpts{})
	code, _, orig := r.a.put(4096, node01, run01)
	r.b.want(r.b.get(r.b.client(), code), http.StatusOK, orig, "fetch at the borrower")
	r.b.wantEvent(Event{Kind: Served, Device: node01, Run: run01, Text: "fleetd served the config of " + run01, Borrowed: true})
	if !r.waitSettled(t) {
		t.Error("the loan was settled unserved")
	}
	if n := r.a.srv.Waiting(); n != 0 {
		t.Errorf("the holder still holds %d configs", n)
	}
	r.a.noEvent(100 * time.Millisecond)
	for name, h := range map[string]*harness{"borrower": r.b, "holder": r.a} {
		h.want(h.get(h.client(), code), http.StatusGone, orig, "a second fetch at the "+name)
		if ev := h.waitEvent(); ev.Kind != Refetched || ev.Run != run01 || ev.Device != node01 {
			t.Errorf("the %s's event for a second fetch: %+v, want refetched naming the run", name, ev)
		}
	}
	r.a.noEvent(100 * time.Millisecond)
	r.b.noEvent(100 * time.Millisecond)
	select {
	case served := <-r.settled:
		t.Errorf("the loan was settled twice (served %v)", served)
	default:
	}
}

// 100 fetches of one code, half at each replica, at once: one answer
// carries the config.
func TestBorrowedConfigConcurrentFetches(t *testing.T) {
	r := newReplicas(t, harnessOpts{})
	code, _, orig := r.a.put(64<<10, node01, run01)
	statuses, bodies := fetchAtOnce(t, 100, []*harness{r.a, r.b}, code, orig, nil)
	if statuses[http.StatusOK] != 1 || bodies != 1 || statuses[http.StatusOK]+statuses[http.StatusGone]+statuses[http.StatusServiceUnavailable] != 100 {
		t.Errorf("statuses %v, %d carrying the config: want one 200 with the config, and 410 or 503 for the rest", statuses, bodies)
	}
	served := 0
	for name, h := range map[string]*harness{"holder": r.a, "borrower": r.b} {
		for _, ev := range h.allEvents() {
			if ev.Kind == Served {
				served++
				if ev.Borrowed != (h == r.b) {
					t.Errorf("the %s reported served with Borrowed %v", name, ev.Borrowed)
				}
			}
		}
	}
	if served != 1 {
		t.Errorf("the replicas reported %d served events, want 1", served)
	}
}

// Unknown codes, a device not planned, the holder's gate down, and the
// holder unreachable: the borrower answers as for a config of its own,
// and the config stays with its holder.
func TestBorrowRefusals(t *testing.T) {
	r := newReplicas(t, harnessOpts{})
	r.b.want(r.b.get(r.b.client(), NewCode()), http.StatusNotFound, nil, "an unknown code at the borrower")
	r.b.wantKind(Missing)

	code, _, orig := r.a.put(512, node01, run01)
	r.a.gate.set(false, nil)
	r.b.want(r.b.get(r.b.client(), code), http.StatusConflict, orig, "a device not planned")
	r.a.gate.set(false, errors.New("NetBox is down"))
	if got := r.b.get(r.b.client(), code); got.status != http.StatusServiceUnavailable || got.header.Get("Retry-After") != "5" {
		t.Errorf("the holder's gate down: %d, Retry-After %q; want 503, 5", got.status, got.header.Get("Retry-After"))
	}
	r.mu.Lock()
	r.borrowErr = errors.New("dial tcp 10.0.0.2:8443: connection refused")
	r.mu.Unlock()
	got := r.b.get(r.b.client(), code)
	if got.status != http.StatusServiceUnavailable || !bytes.Contains(got.body, []byte("could not reach the replica")) {
		t.Errorf("the holder unreachable: %d %q, want 503", got.status, got.body)
	}
	r.mu.Lock()
	r.borrowErr = nil
	r.mu.Unlock()
	r.a.gate.set(true, nil)
	r.b.want(r.b.get(r.b.client(), code), http.StatusOK, orig, "after every refusal")
}

// A borrowed answer the node does not acknowledge: the borrower reports it
// not acknowledged by the node, the holder keeps the config and reports
// nothing, and a later fetch gets it.
func TestBorrowedNotAcknowledged(t *testing.T) {
	r := newReplicas(t, harnessOpts{cfg: Config{WriteTimeout: 500 * time.Millisecond}})
	code, _, orig := r.a.put(1<<20, node01, run01)
	c, tc := r.b.rawConn(16 << 10)
	sendGet(t, c, PathPrefix+code)
	r.b.wantEvent(Event{Kind: NotAcknowledged, Device: node01, Run: run01, Peer: tc.LocalAddr().String(), Text: "the peer did not acknowledge all of it", Borrowed: true})
	if r.waitSettled(t) {
		t.Error("the loan was settled served")
	}
	r.a.noEvent(100 * time.Millisecond)
	if n := r.a.srv.Waiting(); n != 1 {
		t.Fatalf("the holder holds %d configs, want the config kept", n)
	}
	r.b.want(r.b.get(r.b.client(), code), http.StatusOK, orig, "the next fetch")
}

// A loan whose borrower never settles it (its replica died mid-answer):
// after the deadline the holder drops the config, reported Lost, so that
// it is never served again; while the loan is out, no one else gets it.
func TestLoanNeverSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []Event
		srv := newBareServer(t, &testGate{planned: true}, &Config{WriteTimeout: time.Second, Events: func(ev Event) { events = append(events, ev) }})
		code, _ := putNew(t, srv, 128, node01, run01)
		l, err := srv.Lend(context.Background(), code)
		if err != nil || len(l.Config) != 128 || l.Run != run01 || time.Until(l.Deadline) != time.Second+DefaultLoanGrace {
			t.Fatalf("Lend = %+v, %v", l, err)
		}
		if _, err := srv.Lend(context.Background(), code); !errors.Is(err, ErrBusy) {
			t.Errorf("a second Lend while the loan is out: %v, want ErrBusy", err)
		}
		time.Sleep(time.Until(l.Deadline) + time.Millisecond)
		synctest.Wait()
		want := []Event{{Kind: Lost, Device: node01, Run: run01, Text: "the Talos config of " + run01 + " was lent for a fetch that never reported back; it was dropped, so that it is never served twice"}}
		if d := cmp.Diff(want, events, ignoreTime); d != "" {
			t.Errorf("events (-want +got):\n%s", d)
		}
		if _, err := srv.Lend(context.Background(), code); !errors.Is(err, ErrNotHeld) {
			t.Errorf("Lend after the loan was lost: %v, want ErrNotHeld", err)
		}
		l.Settle(true, "") // too late: changes nothing
		if n := srv.Waiting(); n != 0 || len(events) != 1 {
			t.Errorf("after a late Settle: %d held, events %v", n, events)
		}

		// Settled in time, the loan's timer is stopped.
		code2, _ := putNew(t, srv, 128, node01, run01)
		l2, err := srv.Lend(context.Background(), code2)
		if err != nil {
			t.Fatal(err)
		}
		l2.Settle(false, "")
		time.Sleep(2 * DefaultLoanGrace)
		synctest.Wait()
		if n := srv.Waiting(); n != 1 || len(events) != 1 {
			t.Errorf("a loan settled unserved: %d held (want 1), events %v", n, events)
		}
		var spent *SpentError
		l3, err := srv.Lend(context.Background(), code2)
		if err != nil {
			t.Fatal(err)
		}
		l3.Settle(true, "")
		if _, err := srv.Lend(context.Background(), code2); !errors.As(err, &spent) || !errors.Is(err, ErrCodeSpent) || spent.Run != run01 {
			t.Errorf("Lend of a served code: %v, want a *SpentError naming %s", err, run01)
		}
		if _, err := srv.Lend(context.Background(), "not-a-code"); !errors.Is(err, ErrInvalidCode) {
			t.Errorf("Lend of a bad code: %v", err)
		}
	})
}

// A node that leaves while its config is being borrowed does not cut the
// lend short (a lender whose answer went unread would keep the config
// lent until the loan's deadline): the loan that comes back is settled
// unserved at once, nothing is written, and nothing is reported.
func TestBorrowOutlivesTheNode(t *testing.T) {
	orig, code := makeConfig(512), NewCode()
	started, release := make(chan struct{}), make(chan struct{})
	borrowErr, settled := make(chan error, 1), make(chan bool, 1)
	b := newHarness(t, harnessOpts{cfg: Config{Borrow: func(ctx context.Context, code string) (*Loan, error) {
		close(started)
		<-release
		borrowErr <- ctx.Err()
		return NewLoan(bytes.Clone(orig), node01, run01, time.Now().Add(time.Minute), func(served bool, _ string) { settled <- served }), nil
	}}})
	b.secrets = append(b.secrets, tagOf(orig), code)
	c, _ := b.rawConn(64 << 10)
	sendGet(t, c, PathPrefix+code)
	<-started
	c.Close()
	time.Sleep(300 * time.Millisecond) // the server reads the close
	close(release)
	if err := <-borrowErr; err != nil {
		t.Errorf("Borrow's context, after the node left: %v, want not done", err)
	}
	select {
	case served := <-settled:
		if served {
			t.Error("the loan was settled served")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loan was not settled")
	}
	b.noEvent(200 * time.Millisecond)
}

// A lend answer that does not reach the borrower whole (it hung up, or
// its replica died, mid-answer) hands the loan back unserved at once: the
// config is lent again at the next ask, not kept out until the loan's
// deadline and then dropped. An answer read whole leaves the loan out.
func TestLendAnswerNotReceived(t *testing.T) {
	h := newHarness(t, harnessOpts{lend: true, cfg: Config{WriteTimeout: 500 * time.Millisecond, BusyWait: -1}})
	code, _, orig := h.put(1<<20, node01, run01)

	// A borrower that asks and never reads: its kernel cannot take the
	// whole answer.
	c, _ := h.rawConn(16 << 10)
	sendGet(t, c, lendPrefix+code)
	if err := <-h.lent; err == nil {
		t.Fatal("SendLoan to a borrower that never read: nil, want an error")
	}
	if _, err := io.ReadAll(c); !isReset(err) && err != nil {
		t.Errorf("the borrower's connection after the answer ran out: %v, want it reset", err)
	}

	// A borrower that hangs up mid-answer.
	c2, tc2 := h.rawConn(16 << 10)
	sendGet(t, c2, lendPrefix+code)
	io.ReadFull(c2, make([]byte, 4096))
	tc2.SetLinger(0)
	c2.Close()
	if err := <-h.lent; err == nil {
		t.Fatal("SendLoan to a borrower that hung up mid-answer: nil, want an error")
	}

	// Handed back each time: a borrower that reads the answer whole gets
	// the config, and the loan stays out until it settles.
	r := h.do(h.client(), "GET", lendPrefix+code)
	if err := <-h.lent; err != nil || r.status != http.StatusOK || !bytes.Equal(r.body, orig) {
		t.Fatalf("a lend read whole: %d, %d bytes, SendLoan %v; want 200, the config, nil", r.status, len(r.body), err)
	}
	if _, err := h.srv.Lend(context.Background(), code); !errors.Is(err, ErrBusy) {
		t.Errorf("a Lend while the loan read whole is out: %v, want ErrBusy", err)
	}
	h.noEvent(100 * time.Millisecond)
}
