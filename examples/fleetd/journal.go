package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fleetkit/fleet/inventory"
)

// journal writes to NetBox in the background, so that a fetch or an
// attestation never waits for NetBox, in two lanes:
//
//   - Journal lines, and the look-ups some of them need, go through a queue
//     of journalQueue jobs. Lines queued one after another are written
//     together, up to journalBatch in one bulk create
//     (inventory.NetBox.JournalEntries), in their order: a line waits up
//     to journalLinger for others to join it. A job or a batch
//     that fails because NetBox did not answer is tried again, up to
//     journalTries times; a batch NetBox refuses is written again line by
//     line, so that only the line it refuses is lost. A line or job that
//     still fails, or that finds the queue full, is logged and counted
//     (lost), each line of a batch on its own.
//   - Device statuses go through a lane of their own that holds the latest
//     status wanted for each device: it is bounded by the number of
//     devices, so it is never full, and no journal line delays or drops a
//     status. A status NetBox did not take because it did not answer is
//     tried again, with backoff (at most statusBackoffMax apart), until
//     NetBox takes it or fleetd shuts down. A status NetBox refuses, or one
//     still unwritten when close gives up, is logged with its device, for
//     the operator to set by hand, and counted (statusLost).
//
// Its methods are safe for concurrent use; lost and statusLost are set
// before the first job.
type journal struct {
	nb         *inventory.NetBox
	log        *slog.Logger
	backoff    func(try int) time.Duration
	lost       func()
	statusLost func()

	jobs chan journalJob
	done chan struct{}
	ctx  context.Context
	stop context.CancelFunc

	mu     sync.Mutex // guards closed, and sends on jobs against close
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
	line inventory.JournalEntry
	fn   func(context.Context) error
}

// wantedStatus is a status wanted for a device.
type wantedStatus struct {
	device string // its name, for the log
	status inventory.Status
}

const (
	journalQueue     = 4096
	journalBatch     = 100
	journalLinger    = 200 * time.Millisecond
	journalTries     = 5
	statusBackoffMax = 30 * time.Second
)

func newJournal(nb *inventory.NetBox, log *slog.Logger, backoff func(int) time.Duration) *journal {
	if backoff == nil {
		backoff = func(try int) time.Duration { return time.Duration(try) * time.Second }
	}
	ctx, stop := context.WithCancel(context.Background())
	j := &journal{
		nb: nb, log: log, backoff: backoff, lost: func() {}, statusLost: func() {},
		jobs:     make(chan journalJob, journalQueue),
		done:     make(chan struct{}),
		ctx:      ctx,
		stop:     stop,
		wanted:   map[int64]wantedStatus{},
		wake:     make(chan struct{}, 1),
		statuses: make(chan struct{}),
	}
	go j.work()
	go j.workStatuses()
	return j
}

// line queues one journal entry on device id. It never blocks.
func (j *journal) line(id int64, kind inventory.JournalKind, text string) {
	j.queue(journalJob{line: inventory.JournalEntry{Device: id, Kind: kind, Text: text}})
}

// do queues a job that writes journal lines to NetBox, and reports whether
// it did. A job that finds the queue full, or that comes after close, is
// lost, and logged as such. Device statuses go through setStatus.
func (j *journal) do(job func(context.Context) error) bool {
	return j.queue(journalJob{fn: job})
}

func (j *journal) queue(job journalJob) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		j.lost()
		j.log.Error("fleetd: a NetBox write came after shutdown and is lost")
		return false
	}
	select {
	case j.jobs <- job:
		return true
	default:
		j.lost()
		j.log.Error("fleetd: the journal queue is full; a NetBox write is lost")
		return false
	}
}

func (j *journal) work() {
	defer close(j.done)
	var next *journalJob // taken from the queue, after a batch of lines
	for {
		var job journalJob
		if next != nil {
			job, next = *next, nil
		} else {
			var ok bool
			if job, ok = <-j.jobs; !ok {
				return
			}
		}
		if job.fn != nil {
			j.run(job.fn)
			continue
		}
		lines := []inventory.JournalEntry{job.line}
		linger := time.NewTimer(journalLinger)
	batch:
		for len(lines) < journalBatch {
			select {
			case more, ok := <-j.jobs:
				if !ok {
					break batch
				}
				if more.fn != nil {
					next = &more
					break batch
				}
				lines = append(lines, more.line)
			case <-linger.C:
				break batch
			case <-j.ctx.Done():
				break batch
			}
		}
		linger.Stop()
		j.writeLines(lines)
	}
}

// try calls write until it succeeds, fails other than by NetBox not
// answering, has failed journalTries times, or the journal stops; it
// returns write's last error.
func (j *journal) try(write func(context.Context) error) error {
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(j.ctx, 30*time.Second)
		err := write(ctx)
		cancel()
		if err == nil || !errors.Is(err, inventory.ErrUnavailable) || try == journalTries || j.ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(j.backoff(try)):
		case <-j.ctx.Done():
		}
	}
}

// lose counts and logs n writes NetBox did not take.
func (j *journal) lose(n int, err error) {
	for range n {
		j.lost()
		j.log.Error("fleetd: a NetBox write is lost", "error", err.Error())
	}
}

// run does one job, trying again while NetBox does not answer, up to
// journalTries times.
func (j *journal) run(job func(context.Context) error) {
	if err := j.try(job); err != nil {
		j.lose(1, err)
	}
}

// writeLines writes lines, in order, in bulk creates, trying again what
// NetBox did not take while it does not answer, up to journalTries times.
// Lines NetBox refuses are written again one by one, so that only the line
// it refuses is lost.
func (j *journal) writeLines(lines []inventory.JournalEntry) {
	err := j.try(func(ctx context.Context) error {
		n, err := j.nb.JournalEntries(ctx, lines)
		lines = lines[n:]
		return err
	})
	switch {
	case err == nil:
	case !errors.Is(err, inventory.ErrUnavailable) && len(lines) > 1:
		for _, l := range lines {
			j.run(func(ctx context.Context) error { return j.nb.Journal(ctx, l.Device, l.Kind, l.Text) })
		}
	default:
		j.lose(len(lines), err)
	}
}

// setStatus has NetBox set device id's status to s, in the status lane:
// it replaces a status wanted for the device and not yet written. A status
// set after close is lost, and logged with its device.
func (j *journal) setStatus(id int64, device string, s inventory.Status) {
	j.smu.Lock()
	if j.sclosed {
		j.smu.Unlock()
		j.statusLost()
		j.log.Error("fleetd: a device status came after shutdown, and NetBox does not hold it; set it by hand",
			"device_id", id, "device", device, "status", string(s))
		return
	}
	if _, ok := j.wanted[id]; !ok {
		j.order = append(j.order, id)
	}
	j.wanted[id] = wantedStatus{device: device, status: s}
	j.smu.Unlock()
	j.signal()
}

// signal wakes the status lane.
func (j *journal) signal() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// workStatuses writes the wanted statuses, oldest device first, until
// close and the lane is empty.
func (j *journal) workStatuses() {
	defer close(j.statuses)
	for {
		j.smu.Lock()
		for len(j.order) == 0 {
			if j.sclosed {
				j.smu.Unlock()
				return
			}
			j.smu.Unlock()
			<-j.wake
			j.smu.Lock()
		}
		id := j.order[0]
		w := j.wanted[id]
		j.smu.Unlock()

		err := j.writeStatus(id, w.status)

		j.smu.Lock()
		if j.wanted[id] == w { // else a newer status waits: write it next
			delete(j.wanted, id)
			j.order = j.order[1:]
		}
		j.smu.Unlock()
		if err != nil {
			j.statusLost()
			j.log.Error("fleetd: NetBox did not take a device status; set it by hand",
				"device_id", id, "device", w.device, "status", string(w.status), "error", err.Error())
		}
	}
}

// writeStatus sets device id's status, trying again while NetBox does not
// answer, until close gives up.
func (j *journal) writeStatus(id int64, s inventory.Status) error {
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(j.ctx, 30*time.Second)
		err := j.nb.SetStatus(ctx, id, s)
		cancel()
		if err == nil || !errors.Is(err, inventory.ErrUnavailable) || j.ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(min(j.backoff(try), statusBackoffMax)):
		case <-j.ctx.Done():
			return err
		}
	}
}

// close writes what is queued and wanted, until ctx ends, and stops both
// lanes. What is still unwritten then is lost, and logged.
func (j *journal) close(ctx context.Context) {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.closed = true
	close(j.jobs)
	j.mu.Unlock()
	j.smu.Lock()
	j.sclosed = true
	j.smu.Unlock()
	j.signal()
	for _, done := range []chan struct{}{j.done, j.statuses} {
		select {
		case <-done:
		case <-ctx.Done():
			j.stop()
			<-done
		}
	}
	j.stop()
}

// flush waits until every journal job queued so far is done (tests and the
// demo); it does not wait for the status lane.
func (j *journal) flush(ctx context.Context) error {
	done := make(chan struct{})
	j.do(func(context.Context) error { close(done); return nil })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
