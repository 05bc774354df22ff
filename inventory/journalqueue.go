package inventory

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Defaults of JournalQueueConfig.
const (
	DefaultJournalQueueSize  = 4096
	DefaultJournalBatch      = 100
	DefaultJournalLinger     = 200 * time.Millisecond
	DefaultJournalBackoffMax = 30 * time.Second
)

// journalWriteTimeout bounds one try of a queued write.
const journalWriteTimeout = 30 * time.Second

// JournalQueueConfig holds a JournalQueue's optional settings. A nil
// *JournalQueueConfig means every default. It must not change after
// NewJournalQueue is given it.
type JournalQueueConfig struct {
	// Size is how many lines and jobs wait at most; one more is lost.
	// Zero: DefaultJournalQueueSize.
	Size int
	// Batch is how many lines queued one after another go to NetBox in one
	// bulk create. Zero: DefaultJournalBatch.
	Batch int
	// Linger is how long a line waits for others to join its bulk create.
	// Zero: DefaultJournalLinger.
	Linger time.Duration
	// Backoff is the wait after failed try number try (from 1) of a line,
	// batch, job or status. Nil: try seconds.
	Backoff func(try int) time.Duration
	// BackoffMax caps Backoff: every write NetBox does not answer
	// (ErrUnavailable) is tried again until NetBox answers or Close gives
	// up, at most BackoffMax apart. Zero: DefaultJournalBackoffMax.
	BackoffMax time.Duration
	// Logger gets a line for each lost write, a status with its device.
	// Nil: no logs.
	Logger *slog.Logger
	// StatusLostAction is what the operator does about a status NetBox
	// does not hold: it ends the log line of each such status, after
	// "; ". The owner knows what its statuses stand for, and so what
	// repairs one that is lost (fleetd's active, for a served config, is
	// repaired by a new run, not by hand). Empty: the line says what was
	// lost, and no action.
	StatusLostAction string
	// Lost, when set, is called once for each line or job that is lost,
	// from any goroutine: a counter's Inc fits.
	Lost func()
	// StatusLost, when set, is called once for each status that NetBox
	// does not hold, from any goroutine.
	StatusLost func()
}

// A JournalQueue writes journal lines and device statuses to NetBox in the
// background, so that a caller who must answer quickly (an attestation, a
// config fetch) never waits for NetBox. It has two lanes:
//
//   - Journal lines, and jobs that write lines themselves (Do), go through
//     one queue of JournalQueueConfig.Size. Lines queued one after another
//     are written together, in their order, up to Batch in one bulk create
//     (NetBox.JournalEntries); a line waits up to Linger for others to join
//     it. A job or batch that fails because NetBox did not answer is tried
//     again, with backoff (at most BackoffMax apart), until NetBox answers
//     or Close gives up: an outage of NetBox delays the journal, and loses
//     none of it while the queue has room. A batch NetBox refuses is
//     written again line by line, so that only the line it refuses is
//     lost. A line or job NetBox refuses, one still unwritten when Close
//     gives up, or one that finds the queue full, is logged and counted
//     (Lost), each line of a batch on its own.
//   - Device statuses (SetStatus) go through a lane of their own that holds
//     the latest status wanted for each device: it is bounded by the number
//     of devices, so it is never full, and no journal line delays or drops
//     a status. A status NetBox did not take because it did not answer is
//     tried again, with backoff (at most BackoffMax apart), until
//     NetBox takes it or Close gives up. A status NetBox refuses, or one
//     still unwritten when Close gives up, is logged with its device and
//     the operator's action (StatusLostAction), and counted (StatusLost).
//
// A JournalQueue is safe for concurrent use. It holds two goroutines until
// Close, which its owner must call.
type JournalQueue struct {
	nb         *NetBox
	log        *slog.Logger
	batch      int
	linger     time.Duration
	backoff    func(try int) time.Duration
	backoffMax time.Duration
	lost       func()
	statusLost func()
	// The log messages of a status lost, with StatusLostAction.
	statusNotTaken, statusAfterClose string

	jobs chan journalJob
	done chan struct{}
	ctx  context.Context
	stop context.CancelFunc

	mu     sync.Mutex // guards closed, and sends on jobs against Close
	closed bool

	smu      sync.Mutex // guards wanted, order and sclosed
	wanted   map[int64]wantedStatus
	order    []int64 // the devices of wanted, oldest first
	sclosed  bool
	wake     chan struct{} // one slot: the status lane has work, or closed
	statuses chan struct{} // closed when the status lane stops
}

// journalJob is a queued journal line, or a job (fn) that writes lines
// itself.
type journalJob struct {
	line JournalEntry
	fn   func(context.Context) error
}

// wantedStatus is a status wanted for a device.
type wantedStatus struct {
	device string // its name, for the log
	status Status
}

// The log messages of a device status NetBox does not hold, before
// JournalQueueConfig.StatusLostAction.
const (
	msgStatusNotTaken   = "inventory: NetBox did not take a device status"
	msgStatusAfterClose = "inventory: a device status came after shutdown, and NetBox does not hold it"
)

// withAction is msg, then "; " and action when there is one.
func withAction(msg, action string) string {
	if action == "" {
		return msg
	}
	return msg + "; " + action
}

// NewJournalQueue returns a JournalQueue that writes to nb. cfg may be nil
// for the defaults.
func NewJournalQueue(nb *NetBox, cfg *JournalQueueConfig) *JournalQueue {
	var c JournalQueueConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Backoff == nil {
		c.Backoff = func(try int) time.Duration { return time.Duration(try) * time.Second }
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Lost == nil {
		c.Lost = func() {}
	}
	if c.StatusLost == nil {
		c.StatusLost = func() {}
	}
	ctx, stop := context.WithCancel(context.Background())
	q := &JournalQueue{
		nb:         nb,
		log:        c.Logger,
		batch:      cmp.Or(c.Batch, DefaultJournalBatch),
		linger:     cmp.Or(c.Linger, DefaultJournalLinger),
		backoff:    c.Backoff,
		backoffMax: cmp.Or(c.BackoffMax, DefaultJournalBackoffMax),
		lost:       c.Lost,
		statusLost: c.StatusLost,
		jobs:       make(chan journalJob, cmp.Or(c.Size, DefaultJournalQueueSize)),
		done:       make(chan struct{}),
		ctx:        ctx,
		stop:       stop,
		wanted:     map[int64]wantedStatus{},
		wake:       make(chan struct{}, 1),
		statuses:   make(chan struct{}),

		statusNotTaken:   withAction(msgStatusNotTaken, c.StatusLostAction),
		statusAfterClose: withAction(msgStatusAfterClose, c.StatusLostAction),
	}
	go q.work()
	go q.workStatuses()
	return q
}

// Line queues one journal entry of kind on device id. It never blocks; a
// line that finds the queue full, or comes after Close, is lost.
func (q *JournalQueue) Line(id int64, kind JournalKind, text string) {
	q.queue(journalJob{line: JournalEntry{Device: id, Kind: kind, Text: text}})
}

// Do queues a job that writes journal lines to NetBox (after the look-ups
// it needs), and reports whether it was queued. A job that finds the queue
// full, or comes after Close, is lost. A job that returns an error wrapping
// ErrUnavailable is called again, with backoff, until it succeeds or Close
// gives up; its context ends when Close gives up. A job that found NetBox
// slow may find its own earlier write there: a job that writes a line
// checks first when it can (NetBox.JournalHas). Device statuses go through SetStatus.
func (q *JournalQueue) Do(job func(context.Context) error) bool {
	return q.queue(journalJob{fn: job})
}

func (q *JournalQueue) queue(job journalJob) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.lost()
		q.log.Error("inventory: a NetBox write came after shutdown and is lost")
		return false
	}
	select {
	case q.jobs <- job:
		return true
	default:
		q.lost()
		q.log.Error("inventory: the journal queue is full; a NetBox write is lost")
		return false
	}
}

// work writes the queue: a job on its own, lines queued together in bulk.
func (q *JournalQueue) work() {
	defer close(q.done)
	var next *journalJob // taken from the queue, after a batch of lines
	for {
		var job journalJob
		if next != nil {
			job, next = *next, nil
		} else {
			var ok bool
			if job, ok = <-q.jobs; !ok {
				return
			}
		}
		if job.fn != nil {
			q.run(job.fn)
			continue
		}
		var lines []JournalEntry
		lines, next = q.gather(job.line)
		q.writeLines(lines)
	}
}

// gather collects the lines queued after first, until Batch lines, Linger
// passed, a job, or the queue closed; it returns the job it took, if any.
func (q *JournalQueue) gather(first JournalEntry) ([]JournalEntry, *journalJob) {
	lines := []JournalEntry{first}
	linger := time.NewTimer(q.linger)
	defer linger.Stop()
	for len(lines) < q.batch {
		select {
		case more, ok := <-q.jobs:
			if !ok {
				return lines, nil
			}
			if more.fn != nil {
				return lines, &more
			}
			lines = append(lines, more.line)
		case <-linger.C:
			return lines, nil
		case <-q.ctx.Done():
			return lines, nil
		}
	}
	return lines, nil
}

// try calls write until it succeeds, fails other than by NetBox not
// answering, or the queue stops; it returns write's last error.
func (q *JournalQueue) try(write func(context.Context) error) error {
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(q.ctx, journalWriteTimeout)
		err := write(ctx)
		cancel()
		if err == nil || !errors.Is(err, ErrUnavailable) || q.ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(min(q.backoff(try), q.backoffMax)):
		case <-q.ctx.Done():
			return err
		}
	}
}

// lose counts and logs n writes NetBox did not take.
func (q *JournalQueue) lose(n int, err error) {
	for range n {
		q.lost()
		q.log.Error("inventory: a NetBox write is lost", "error", err.Error())
	}
}

// run does one job, trying again while NetBox does not answer.
func (q *JournalQueue) run(job func(context.Context) error) {
	if err := q.try(job); err != nil {
		q.lose(1, err)
	}
}

// writeLines writes lines, in order, in bulk creates, trying again what
// NetBox did not take while it does not answer. Lines NetBox refuses are
// written again one by one, so that only the line it refuses is lost.
func (q *JournalQueue) writeLines(lines []JournalEntry) {
	err := q.try(func(ctx context.Context) error {
		n, err := q.nb.JournalEntries(ctx, lines)
		lines = lines[n:]
		return err
	})
	switch {
	case err == nil:
	case !errors.Is(err, ErrUnavailable) && len(lines) > 1:
		for _, l := range lines {
			q.run(func(ctx context.Context) error { return q.nb.Journal(ctx, l.Device, l.Kind, l.Text) })
		}
	default:
		q.lose(len(lines), err)
	}
}

// SetStatus has NetBox set device id's status to s, in the status lane: it
// replaces a status wanted for the device and not yet written. device is
// the device's name, for the log. A status set after Close is lost, and
// logged with its device.
func (q *JournalQueue) SetStatus(id int64, device string, s Status) {
	q.smu.Lock()
	if q.sclosed {
		q.smu.Unlock()
		q.statusLost()
		q.log.Error(q.statusAfterClose,
			"device_id", id, "device", device, "status", string(s))
		return
	}
	if _, ok := q.wanted[id]; !ok {
		q.order = append(q.order, id)
	}
	q.wanted[id] = wantedStatus{device: device, status: s}
	q.smu.Unlock()
	q.signal()
}

// signal wakes the status lane.
func (q *JournalQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// workStatuses writes the wanted statuses, oldest device first, until
// Close and the lane is empty.
func (q *JournalQueue) workStatuses() {
	defer close(q.statuses)
	for {
		id, w, ok := q.nextStatus()
		if !ok {
			return
		}
		err := q.writeStatus(id, w.status)
		q.smu.Lock()
		if q.wanted[id] == w { // else a newer status waits: write it next
			delete(q.wanted, id)
			q.order = q.order[1:]
		}
		q.smu.Unlock()
		if err != nil {
			q.statusLost()
			q.log.Error(q.statusNotTaken,
				"device_id", id, "device", w.device, "status", string(w.status), "error", err.Error())
		}
	}
}

// nextStatus waits for the oldest wanted status; ok is false once the lane
// is closed and empty.
func (q *JournalQueue) nextStatus() (id int64, w wantedStatus, ok bool) {
	q.smu.Lock()
	defer q.smu.Unlock()
	for len(q.order) == 0 {
		if q.sclosed {
			return 0, wantedStatus{}, false
		}
		q.smu.Unlock()
		<-q.wake
		q.smu.Lock()
	}
	id = q.order[0]
	return id, q.wanted[id], true
}

// writeStatus sets device id's status, trying again while NetBox does not
// answer, until Close gives up.
func (q *JournalQueue) writeStatus(id int64, s Status) error {
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(q.ctx, journalWriteTimeout)
		err := q.nb.SetStatus(ctx, id, s)
		cancel()
		if err == nil || !errors.Is(err, ErrUnavailable) || q.ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(min(q.backoff(try), q.backoffMax)):
		case <-q.ctx.Done():
			return err
		}
	}
}

// Close writes what is queued and wanted, until ctx ends, and stops both
// lanes. What is still unwritten then is lost, and logged. Lines, jobs and
// statuses after Close are lost. Close is safe to call more than once.
func (q *JournalQueue) Close(ctx context.Context) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	close(q.jobs)
	q.mu.Unlock()
	q.smu.Lock()
	q.sclosed = true
	q.smu.Unlock()
	q.signal()
	for _, done := range []chan struct{}{q.done, q.statuses} {
		select {
		case <-done:
		case <-ctx.Done():
			q.stop()
			<-done
		}
	}
	q.stop()
}

// Flush waits until every line and job queued before it is done, or ctx
// ends; it does not wait for the status lane. It returns ErrJournalLost
// when its own mark could not be queued (the queue is full or closed), and
// ctx's error when ctx ends first.
func (q *JournalQueue) Flush(ctx context.Context) error {
	done := make(chan struct{})
	if !q.Do(func(context.Context) error { close(done); return nil }) {
		return ErrJournalLost
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
