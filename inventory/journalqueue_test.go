package inventory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// journalOf returns the texts of device id's journal lines that start with
// prefix, oldest first.
func journalOf(srv *netboxtest.Server, id int64, prefix string) []string {
	var out []string
	for _, e := range srv.Journal(id) {
		if strings.HasPrefix(e.Text, prefix) {
			out = append(out, e.Text)
		}
	}
	return out
}

// Lines queued together go to NetBox in bulk creates of Batch, in their
// order; a batch NetBox refuses (one line names a device it does not have)
// is written again line by line, so only that line is lost; a batch NetBox
// did not answer is tried again.
func TestJournalQueueBatches(t *testing.T) {
	srv, nb, devs := generatedFleet(t, 3)
	var lost atomic.Int32
	q := NewJournalQueue(nb, &JournalQueueConfig{
		Backoff: func(int) time.Duration { return 100 * time.Millisecond },
		Lost:    func() { lost.Add(1) },
	})
	defer q.Close(t.Context())

	srv.ResetRequests()
	const n = 150
	for i := range n {
		q.Line(devs[i%3].ID, JournalInfo, fmt.Sprintf("queued %03d", i))
	}
	noErr(t, q.Flush(t.Context()))
	if c := requestsBy(srv); c["POST /api/extras/journal-entries/"] != 2 || len(c) != 1 {
		t.Errorf("%d queued lines took %v, want 2 requests (bulk creates of %d)", n, c, DefaultJournalBatch)
	}
	var want []string
	for i := 0; i < n; i += 3 {
		want = append(want, fmt.Sprintf("queued %03d", i))
	}
	if got := journalOf(srv, devs[0].ID, "queued "); !slices.Equal(got, want) {
		t.Errorf("%s's journal: %q, want %q", devs[0].Name, got, want)
	}

	// One line on a device NetBox does not have: only it is lost.
	for i := range 10 {
		id := devs[1].ID
		if i == 4 {
			id = 99999
		}
		q.Line(id, JournalInfo, fmt.Sprintf("queued again %d", i))
	}
	// flushed checks, once the queue is flushed, that one line in all was
	// lost and that dev holds want queued lines.
	flushed := func(dev Device, want int) {
		t.Helper()
		noErr(t, q.Flush(t.Context()))
		if l := lost.Load(); l != 1 {
			t.Errorf("%d lines lost, want 1", l)
		}
		if got := len(journalOf(srv, dev.ID, "queued ")); got != want {
			t.Errorf("%s holds %d queued lines, want %d", dev.Name, got, want)
		}
	}
	flushed(devs[1], n/3+9)

	// NetBox answers 503 for a while: the batch is tried again, whole.
	srv.Inject(netboxtest.Fault{Kind: netboxtest.Failing})
	for i := range 5 {
		q.Line(devs[2].ID, JournalInfo, fmt.Sprintf("queued late %d", i))
	}
	time.Sleep(DefaultJournalLinger + 150*time.Millisecond)
	srv.Inject(netboxtest.Fault{})
	flushed(devs[2], n/3+5)
}

// A job runs in the queue's order and is tried again while NetBox does
// not answer; a job that finds the queue full, or comes after Close, is
// lost and counted, and Flush says so.
func TestJournalQueueJobsAndFull(t *testing.T) {
	_, nb, devs := generatedFleet(t, 1)
	var lost atomic.Int32
	q := NewJournalQueue(nb, &JournalQueueConfig{
		Size:    4,
		Backoff: func(int) time.Duration { return time.Millisecond },
		Lost:    func() { lost.Add(1) },
	})
	tries := 0
	q.Do(func(context.Context) error {
		tries++
		if tries < 3 {
			return fmt.Errorf("look-up: %w", ErrUnavailable)
		}
		return nil
	})
	noErr(t, q.Flush(t.Context()))
	if tries != 3 || lost.Load() != 0 {
		t.Errorf("a job NetBox answered on the third try ran %d times, %d lost", tries, lost.Load())
	}

	release, running := make(chan struct{}), make(chan struct{})
	q.Do(func(context.Context) error { close(running); <-release; return nil })
	<-running
	queued := 0
	for q.Do(func(context.Context) error { return nil }) {
		queued++
	}
	q.Line(devs[0].ID, JournalInfo, "beyond the full queue")
	if queued != 4 || lost.Load() != 2 {
		t.Errorf("%d jobs queued behind a running one, %d lost; want 4 and 2 (a job and a line)", queued, lost.Load())
	}
	if err := q.Flush(t.Context()); !errors.Is(err, ErrJournalLost) {
		t.Errorf("Flush with the queue full: %v, want ErrJournalLost", err)
	}
	close(release)
	q.Close(t.Context())
	if q.Do(func(context.Context) error { return nil }) || lost.Load() != 4 {
		t.Errorf("a job after Close was queued, or not counted (%d lost)", lost.Load())
	}
	if err := q.Flush(t.Context()); !errors.Is(err, ErrJournalLost) {
		t.Errorf("Flush after Close: %v, want ErrJournalLost", err)
	}
	q.Close(t.Context()) // twice is fine
}

// Device statuses have a lane of their own: while the journal queue is
// full and NetBox is down, a status wanted again and again is held once
// per device, and NetBox takes the latest once it answers.
func TestJournalQueueStatusLane(t *testing.T) {
	srv, nb, devs := generatedFleet(t, 2)
	q := NewJournalQueue(nb, &JournalQueueConfig{Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	release := make(chan struct{})
	q.Do(func(context.Context) error { <-release; return nil })
	for q.Do(func(context.Context) error { return nil }) {
	}
	srv.Inject(netboxtest.Fault{Kind: netboxtest.Down})
	a, b := devs[0], devs[1]
	for range 1000 {
		q.SetStatus(a.ID, a.Name, StatusOffline)
		q.SetStatus(a.ID, a.Name, StatusActive)
		q.SetStatus(b.ID, b.Name, StatusActive)
	}
	q.smu.Lock()
	held := len(q.order)
	q.smu.Unlock()
	if held > 2 {
		t.Errorf("the status lane holds %d statuses for 2 devices", held)
	}
	srv.Inject(netboxtest.Fault{Kind: netboxtest.Healthy})
	testenv.WaitFor(t, 10*time.Second, "both devices active", func() bool {
		return deviceOf(t, nb, a.ID).Status == StatusActive && deviceOf(t, nb, b.ID).Status == StatusActive
	})
	close(release)
	q.Close(t.Context())
}

// A status NetBox has not taken when Close gives up, or one wanted after,
// is logged with its device and the owner's action for the operator
// (none by default), and counted.
func TestJournalQueueStatusLostAtClose(t *testing.T) {
	for _, action := range []string{"", "set desired_action to provision"} {
		t.Run(fmt.Sprintf("action %q", action), func(t *testing.T) {
			srv, nb, devs := generatedFleet(t, 1)
			var logs bytes.Buffer // the JSON handler serialises its writes
			var lost atomic.Int32
			q := NewJournalQueue(nb, &JournalQueueConfig{
				Backoff:          func(int) time.Duration { return 10 * time.Millisecond },
				Logger:           slog.New(slog.NewJSONHandler(&logs, nil)),
				StatusLost:       func() { lost.Add(1) },
				StatusLostAction: action,
			})
			srv.Inject(netboxtest.Fault{Kind: netboxtest.Down})
			dev := devs[0]
			q.SetStatus(dev.ID, dev.Name, StatusActive)
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			q.Close(ctx)
			q.SetStatus(dev.ID, dev.Name, StatusActive)
			if n := lost.Load(); n != 2 {
				t.Errorf("%d statuses counted lost, want 2", n)
			}
			end := ""
			if action != "" {
				end = "; " + action
			}
			for _, want := range []string{
				fmt.Sprintf(`"msg":"inventory: NetBox did not take a device status%s","device_id":%d,"device":%q,"status":"active"`, end, dev.ID, dev.Name),
				fmt.Sprintf(`"msg":"inventory: a device status came after shutdown, and NetBox does not hold it%s","device_id":%d,"device":%q,"status":"active"`, end, dev.ID, dev.Name),
			} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the log lacks %s:\n%s", want, logs.String())
				}
			}
			// A try cut short by Close may still reach NetBox: heal it only once
			// no request has come for a while.
			for n := -1; n != srv.RequestCount(); time.Sleep(200 * time.Millisecond) {
				n = srv.RequestCount()
			}
			srv.Inject(netboxtest.Fault{Kind: netboxtest.Healthy})
			if got := deviceOf(t, nb, dev.ID).Status; got != StatusPlanned {
				t.Errorf("%s is %s", dev.Name, got)
			}
		})
	}
}

// An outage of NetBox delays the journal and loses none of it: lines and
// jobs are tried again, however many times, until NetBox answers; only
// those still unwritten when Close gives up are lost, and counted.
func TestJournalQueueWaitsOutAnOutage(t *testing.T) {
	srv, nb, devs := generatedFleet(t, 1)
	var lost atomic.Int32
	q := NewJournalQueue(nb, &JournalQueueConfig{
		Backoff:    func(int) time.Duration { return 5 * time.Millisecond },
		BackoffMax: 20 * time.Millisecond,
		Lost:       func() { lost.Add(1) },
	})
	dev := devs[0]
	srv.Inject(netboxtest.Fault{Kind: netboxtest.Failing})
	for i := range 3 {
		q.Line(dev.ID, JournalInfo, fmt.Sprintf("outage %d", i))
	}
	q.Do(func(ctx context.Context) error {
		return nb.Journal(ctx, dev.ID, JournalInfo, "outage job")
	})
	// Far more tries than a bounded retry would allow.
	srv.ResetRequests()
	testenv.WaitFor(t, 10*time.Second, "50 tries", func() bool { return srv.RequestCount() >= 50 })
	srv.Inject(netboxtest.Fault{})
	noErr(t, q.Flush(t.Context()))
	want := []string{"outage 0", "outage 1", "outage 2", "outage job"}
	if got := journalOf(srv, dev.ID, "outage "); !slices.Equal(got, want) || lost.Load() != 0 {
		t.Errorf("after an outage: journal %q, %d lost; want %q, none lost", got, lost.Load(), want)
	}

	srv.Inject(netboxtest.Fault{Kind: netboxtest.Failing})
	q.Line(dev.ID, JournalInfo, "outage at close")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	q.Close(ctx)
	if n := lost.Load(); n != 1 {
		t.Errorf("a line unwritten when Close gave up: %d lost, want 1", n)
	}
}
