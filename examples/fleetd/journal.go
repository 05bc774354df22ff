package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fleetkit/fleet/inventory"
)

// journal writes to NetBox from a queue, so that a fetch or an attestation
// never waits for NetBox's journal. A job that fails because NetBox did
// not answer is tried again, up to journalTries times; a job that still
// fails, or that finds the queue full, is logged and counted.
type journal struct {
	nb      *inventory.NetBox
	log     *slog.Logger
	backoff func(try int) time.Duration
	lost    func()

	jobs chan func(context.Context) error
	done chan struct{}
	ctx  context.Context
	stop context.CancelFunc

	mu     sync.Mutex // guards closed, and sends on jobs against close
	closed bool
}

const (
	journalQueue = 4096
	journalTries = 5
)

func newJournal(nb *inventory.NetBox, log *slog.Logger, backoff func(int) time.Duration) *journal {
	if backoff == nil {
		backoff = func(try int) time.Duration { return time.Duration(try) * time.Second }
	}
	ctx, stop := context.WithCancel(context.Background())
	j := &journal{
		nb: nb, log: log, backoff: backoff, lost: func() {},
		jobs: make(chan func(context.Context) error, journalQueue),
		done: make(chan struct{}),
		ctx:  ctx, stop: stop,
	}
	go j.work()
	return j
}

// line queues one journal entry on device id.
func (j *journal) line(id int64, kind inventory.JournalKind, text string) {
	j.do(func(ctx context.Context) error { return j.nb.Journal(ctx, id, kind, text) })
}

// do queues a job that writes to NetBox. After close the job is lost, and
// logged as such.
func (j *journal) do(job func(context.Context) error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		j.lost()
		j.log.Error("fleetd: a NetBox write came after shutdown and is lost")
		return
	}
	select {
	case j.jobs <- job:
	default:
		j.lost()
		j.log.Error("fleetd: the journal queue is full; a NetBox write is lost")
	}
}

func (j *journal) work() {
	defer close(j.done)
	for job := range j.jobs {
		for try := 1; ; try++ {
			ctx, cancel := context.WithTimeout(j.ctx, 30*time.Second)
			err := job(ctx)
			cancel()
			if err == nil {
				break
			}
			if !errors.Is(err, inventory.ErrUnavailable) || try == journalTries || j.ctx.Err() != nil {
				j.lost()
				j.log.Error("fleetd: a NetBox write is lost", "error", err.Error())
				break
			}
			select {
			case <-time.After(j.backoff(try)):
			case <-j.ctx.Done():
			}
		}
	}
}

// close writes what is queued, until ctx ends, and stops the queue.
func (j *journal) close(ctx context.Context) {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.closed = true
	close(j.jobs)
	j.mu.Unlock()
	select {
	case <-j.done:
	case <-ctx.Done():
		j.stop()
		<-j.done
	}
	j.stop()
}

// flush waits until every job queued so far is done (tests and the demo).
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
