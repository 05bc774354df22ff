package configserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Errors of Lend, which a Config.Borrow returns (wrapped or carried as the
// caller likes, as long as errors.Is and errors.As find them) to tell the
// borrowing Server how to answer.
var (
	// ErrNotHeld: the Server holds no config under the code and does not
	// remember serving one. The borrower answers 404 (Missing).
	ErrNotHeld = errors.New("configserve: no config is held under the install code")
	// ErrBusy: another fetch or loan owned the config for as long as Lend
	// waited for its outcome (Config.BusyWait). The borrower answers 503
	// with Retry-After: 1.
	ErrBusy = errors.New("configserve: another fetch is answering with the config")
	// ErrGateDown: the Gate did not answer. The borrower answers 503 with
	// Retry-After: 5.
	ErrGateDown = errors.New("configserve: the gate did not answer whether the device is planned")
	// ErrNotPlanned: the Gate says the device is not planned. The borrower
	// answers 409.
	ErrNotPlanned = errors.New("configserve: the device is not planned")
)

// A SpentError is Lend's error for a code whose config was served: the
// borrower answers 410 (Refetched) and names the device and run.
type SpentError struct {
	Device Device
	Run    string
}

func (e *SpentError) Error() string {
	return fmt.Sprintf("configserve: the install code of %s (%s) was served; a code serves once", e.Run, e.Device)
}

// Is makes errors.Is(err, ErrCodeSpent) true for a *SpentError.
func (e *SpentError) Is(target error) bool { return target == ErrCodeSpent }

// DefaultLoanGrace is how long past its write timeout a lender waits for
// a loan's Settle.
const DefaultLoanGrace = 30 * time.Second

// A Loan is one config lent for one fetch: made by the lender's Lend, or
// by NewLoan on the borrower's side from what the lender sent.
type Loan struct {
	// Config is a copy of the config. The borrower zeroes it when the
	// fetch ends.
	Config []byte
	// Device and Run are those the config was put with.
	Device Device
	Run    string
	// Deadline is when the lender stops waiting for Settle and drops the
	// config (Lost).
	Deadline time.Time

	once   sync.Once
	settle func(served bool, peer string)
}

// NewLoan makes the Loan a Config.Borrow returns from what a lender's Lend
// gave: settle carries the outcome to the lender's Loan.Settle, and is
// called once.
func NewLoan(config []byte, device Device, run string, deadline time.Time, settle func(served bool, peer string)) *Loan {
	return &Loan{Config: config, Device: device, Run: run, Deadline: deadline, settle: settle}
}

// Settle ends the loan: served says that the peer's kernel acknowledged
// every byte of the answer (the lender spends the code), otherwise the
// config waits again at the lender; peer is the fetching node's address
// when an answer was written but not acknowledged. The borrower reports
// the outcome; the lender reports nothing of a settled loan. Only the
// first call counts.
func (l *Loan) Settle(served bool, peer string) {
	l.once.Do(func() {
		if l.settle != nil {
			l.settle(served, peer)
		}
	})
}

// Lend lends the config held under code for one fetch that reached
// another Server, after asking the Gate, as a fetch does; while another
// fetch or loan owns the config, it waits for that one's outcome as a
// fetch does (Config.BusyWait), or until ctx ends. Until the loan
// is settled or its Deadline passes, no other fetch or loan gets the
// config. Errors: ErrInvalidCode, ErrClosed, ErrNotHeld, *SpentError,
// ErrBusy, ErrGateDown (wrapping the Gate's error), ErrNotPlanned. Lend
// reports no event for them: the borrower does, as for a fetch of its own.
func (s *Server) Lend(ctx context.Context, code string) (*Loan, error) {
	if !ValidCode(code) {
		return nil, ErrInvalidCode
	}
	d := digestOf(code)
	f := s.await(ctx, d)
	switch f.found {
	case foundClosed:
		return nil, ErrClosed
	case foundSpent:
		return nil, &SpentError{Device: f.spent.device, Run: f.spent.run}
	case foundNone:
		return nil, ErrNotHeld
	case foundBusy:
		return nil, ErrBusy
	}
	e := f.owned
	planned, err := s.gate.Planned(ctx, e.device)
	switch {
	case err != nil:
		s.release(d, e, outcome{})
		return nil, fmt.Errorf("%w: %w", ErrGateDown, err)
	case !planned:
		s.release(d, e, outcome{})
		return nil, ErrNotPlanned
	}
	s.mu.Lock()
	cfg := append([]byte(nil), e.config...)
	s.mu.Unlock()
	l := &Loan{Config: cfg, Device: e.device, Run: e.run, Deadline: time.Now().Add(s.writeTimeout + DefaultLoanGrace)}
	var lost *time.Timer
	l.settle = func(served bool, peer string) {
		lost.Stop()
		// The borrower reported the answer (Served or NotAcknowledged).
		s.release(d, e, outcome{served: served, reported: true})
	}
	lost = time.AfterFunc(time.Until(l.Deadline), func() { l.once.Do(func() { s.lose(d, e) }) })
	return l, nil
}

// SendLoan answers the lend request r of another replica with body, the
// caller's encoding of l (Lend's loan), as a fetch's answer is written:
// over HTTP/1.1, on a connection the Server recorded (ConfigureServer on
// the http.Server that serves r), counted as sent only when the
// borrower's kernel acknowledged every byte before Config.WriteTimeout.
// When it was not (the borrower hung up, or its replica died, mid-answer),
// the connection is reset and the loan settled unserved: the config waits
// again at once, rather than lent until the loan's deadline to a borrower
// that never got it. SendLoan returns nil when the answer arrived whole,
// and then the borrower settles the loan.
func (s *Server) SendLoan(w http.ResponseWriter, r *http.Request, l *Loan, contentType string, body []byte) error {
	if r.Context().Err() == nil {
		if sent, _ := s.deliver(w, r, contentType, body, l.Device, l.Run); sent {
			return nil
		}
	}
	l.Settle(false, "")
	return fmt.Errorf("configserve: the lend answer for %s did not reach the borrower whole; the loan is settled unserved", l.Run)
}

// lose drops the config of a loan that was not settled by its deadline:
// the borrower may have served it, so it is never served again.
func (s *Server) lose(d digest, e *entry) {
	s.mu.Lock()
	e.busy = false
	close(e.freed)
	if s.held[d] == e {
		delete(s.held, d)
		e.timer.Stop()
	}
	clear(e.config)
	e.config = nil
	closed := s.closed
	s.mu.Unlock()
	if !closed {
		s.emit(Event{Kind: Lost, Device: e.device, Run: e.run, Text: s.text.lost(e.run)})
	}
}

// serveBorrowed answers a fetch for a code this Server holds no config
// under, with the config Config.Borrow finds for it elsewhere.
func (s *Server) serveBorrowed(w http.ResponseWriter, r *http.Request, code string) {
	peer := r.RemoteAddr
	// A node that gives up while the lend is on its way must not cancel
	// it: a lender that lent, and whose answer then went unread, would
	// keep the config lent until the loan's deadline, and drop it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.writeTimeout)
	l, err := s.borrow(ctx, code)
	cancel()
	var spent *SpentError
	switch {
	case err == nil:
	case errors.As(err, &spent):
		s.emit(Event{Kind: Refetched, Device: spent.Device, Run: spent.Run, Peer: peer, Text: s.text.refetched})
		answer(w, http.StatusGone, "this install code was served; a code serves once")
		return
	case errors.Is(err, ErrNotHeld):
		s.emit(Event{Kind: Missing, Peer: peer, Text: s.text.missing})
		answer(w, http.StatusNotFound, "no config for this install code")
		return
	case errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", "1")
		answer(w, http.StatusServiceUnavailable, "another fetch is answering with this config; try again")
		return
	case errors.Is(err, ErrNotPlanned):
		answer(w, http.StatusConflict, "the device is not planned")
		return
	case errors.Is(err, ErrGateDown):
		w.Header().Set("Retry-After", "5")
		answer(w, http.StatusServiceUnavailable, s.text.gateDown)
		return
	default:
		s.log.Warn("configserve: could not borrow the config from the server that may hold it", slog.String("peer", peer), slog.Any("error", err))
		w.Header().Set("Retry-After", "5")
		answer(w, http.StatusServiceUnavailable, s.text.borrowFailed)
		return
	}
	defer clear(l.Config)
	if r.Context().Err() != nil {
		// The node left while the config was being borrowed: nothing was
		// written, and the config waits again at its lender.
		l.Settle(false, "")
		return
	}
	served, notAcknowledgedBy := s.deliver(w, r, s.contentType, l.Config, l.Device, l.Run)
	// Reported before the loan is settled: a borrower that dies between
	// the two leaves its report, and the lender reports the loan Lost.
	if notAcknowledgedBy != "" {
		s.emit(Event{Kind: NotAcknowledged, Device: l.Device, Run: l.Run, Peer: notAcknowledgedBy, Text: textNotAcknowledged, Borrowed: true})
	}
	if served {
		s.emit(Event{Kind: Served, Device: l.Device, Run: l.Run, Text: s.text.served(l.Run), Borrowed: true})
	}
	l.Settle(served, notAcknowledgedBy)
}
