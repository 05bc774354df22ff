package lldpwait

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeConn is a frame source with the socket's semantics: ReadFrom blocks
// until a frame is pushed, the read deadline passes, or Close; a changed
// deadline or Close wakes a blocked read.
type fakeConn struct {
	mu       sync.Mutex
	frames   [][]byte
	deadline time.Time
	closed   bool
	wake     chan struct{} // closed and replaced on every change
}

func newFakeConn() *fakeConn { return &fakeConn{wake: make(chan struct{})} }

// change applies f, and wakes a blocked read; once closed, it fails.
func (c *fakeConn) change(f func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return os.ErrClosed
	}
	f()
	close(c.wake)
	c.wake = make(chan struct{})
	return nil
}

func (c *fakeConn) push(frames ...[]byte) {
	c.change(func() { c.frames = append(c.frames, frames...) })
}

func (c *fakeConn) SetReadDeadline(t time.Time) error { return c.change(func() { c.deadline = t }) }

func (c *fakeConn) Close() error { return c.change(func() { c.closed = true }) }

func (c *fakeConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return 0, nil, os.ErrClosed
		}
		if len(c.frames) > 0 {
			f := c.frames[0]
			c.frames = c.frames[1:]
			c.mu.Unlock()
			return copy(b, f), nil, nil
		}
		var timer *time.Timer
		var timeout <-chan time.Time
		if !c.deadline.IsZero() {
			d := time.Until(c.deadline)
			if d <= 0 {
				c.mu.Unlock()
				return 0, nil, os.ErrDeadlineExceeded
			}
			timer = time.NewTimer(d)
			timeout = timer.C
		}
		wake := c.wake
		c.mu.Unlock()
		select {
		case <-wake:
		case <-timeout:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// fakeListener returns a Listener on eth0 that reads from a fresh
// fakeConn, closed when the test ends. A zero wait is DefaultWait; a nil
// log discards.
func fakeListener(t *testing.T, wait time.Duration, log *slog.Logger) (*fakeConn, *Listener) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if wait == 0 {
		wait = DefaultWait
	}
	c := newFakeConn()
	l := newListener("eth0", c, wait, log)
	t.Cleanup(func() { l.Close() })
	return c, l
}

type result struct {
	n   *Neighbor
	err error
	at  time.Duration // since the start of the bubble
}

func waitAsync(ctx context.Context, l *Listener, start time.Time) <-chan result {
	ch := make(chan result, 1)
	go func() {
		n, err := l.Wait(ctx)
		ch <- result{n, err, time.Since(start)}
	}()
	return ch
}

func TestWaitSkipsUntilValid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c, l := fakeListener(t, 0, log)
		start := time.Now()
		ch := waitAsync(t.Context(), l, start)

		synctest.Wait() // Wait is blocked on an empty socket
		time.Sleep(3 * time.Second)
		c.push(
			lldpFrame(cat(chassisTLV(ChassisMACAddress, switchMAC), portTLV(PortLocal, []byte("Port 5")))),            // no TTL
			cat(dstNearest, switchMAC, []byte{0x08, 0x00}, make([]byte, 46)),                                          // not LLDP
			lldpFrame(cat(chassisTLV(ChassisMACAddress, switchMAC), portTLV(PortLocal, []byte("Port 5")), ttlTLV(0))), // shutdown
			lldpFrame(cat(mandatory("Port 6"), make([]byte, maxFrame))),                                               // too large
			unifiFrame("Port 7"),
			unifiFrame("Port 8"),
		)
		r := <-ch
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.n.PortID != "Port 7" {
			t.Errorf("Wait returned port %q, want the first valid frame's, Port 7", r.n.PortID)
		}
		if r.at != 3*time.Second {
			t.Errorf("Wait returned after %v, want 3s (when the frame came)", r.at)
		}
		if got := l.reads.Load(); got != 5 {
			t.Errorf("reads = %d, want 5", got)
		}
		for _, want := range []string{"ends after 2 TLVs", "Ethernet type 0x0800", "TTL 0", "larger than the largest accepted"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log does not say %q:\n%s", want, logs.String())
			}
		}

		// The next Wait returns the frame queued after it.
		n, err := l.Wait(t.Context())
		if err != nil || n.PortID != "Port 8" {
			t.Errorf("second Wait = %+v, %v; want Port 8", n, err)
		}
	})
}

func TestWaitContext(t *testing.T) {
	t.Run("cancel while blocked", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, l := fakeListener(t, 0, nil)
			ctx, cancel := context.WithCancel(t.Context())
			start := time.Now()
			ch := waitAsync(ctx, l, start)
			time.Sleep(time.Second)
			cancel()
			r := <-ch
			if !errors.Is(r.err, context.Canceled) || errors.Is(r.err, ErrTimeout) {
				t.Errorf("Wait = %v; want context.Canceled", r.err)
			}
			if r.at != time.Second {
				t.Errorf("Wait returned after %v, want 1s", r.at)
			}
			// The Listener still works, with a fresh deadline, and the
			// ended context's deadline change cannot reach it.
			time.Sleep(time.Minute)
			ch = waitAsync(t.Context(), l, start)
			time.Sleep(34 * time.Second)
			c.push(unifiFrame("Port 2"))
			r = <-ch
			if r.err != nil || r.n.PortID != "Port 2" {
				t.Errorf("Wait after a cancelled Wait = %+v, %v", r.n, r.err)
			}
		})
	})
	t.Run("context deadline before the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, l := fakeListener(t, 0, nil)
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := l.Wait(ctx)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
				t.Errorf("Wait = %v; want context.DeadlineExceeded", err)
			}
			if got := time.Since(start); got != 100*time.Millisecond {
				t.Errorf("Wait returned after %v, want 100ms", got)
			}
		})
	})
	t.Run("already cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, l := fakeListener(t, 0, nil)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := l.Wait(ctx); !errors.Is(err, context.Canceled) {
				t.Errorf("Wait = %v; want context.Canceled", err)
			}
		})
	})
}

func TestWaitClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := fakeListener(t, 0, nil)
		start := time.Now()
		ch := waitAsync(t.Context(), l, start)
		time.Sleep(2 * time.Second)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		r := <-ch
		if !errors.Is(r.err, net.ErrClosed) {
			t.Errorf("Wait = %v; want net.ErrClosed", r.err)
		}
		if r.at != 2*time.Second {
			t.Errorf("Wait returned after %v, want 2s", r.at)
		}
		if _, err := l.Wait(t.Context()); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Wait after Close = %v; want net.ErrClosed", err)
		}
		if err := l.Close(); err != nil {
			t.Errorf("second Close = %v, want the first's result (nil)", err)
		}
	})
}

func TestWaitSerialised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, l := fakeListener(t, 0, nil)
		start := time.Now()
		a, b := waitAsync(t.Context(), l, start), waitAsync(t.Context(), l, start)
		synctest.Wait()
		c.push(unifiFrame("Port 1"))
		synctest.Wait()
		c.push(unifiFrame("Port 2"))
		ra, rb := <-a, <-b
		if ra.err != nil || rb.err != nil {
			t.Fatal(ra.err, rb.err)
		}
		got := []string{ra.n.PortID, rb.n.PortID}
		if !(got[0] == "Port 1" && got[1] == "Port 2" || got[0] == "Port 2" && got[1] == "Port 1") {
			t.Errorf("two Waits got %q; want one frame each", got)
		}

		// A Wait that waits its turn still honours its context.
		blocker := waitAsync(t.Context(), l, start)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := l.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("queued Wait = %v; want context.DeadlineExceeded", err)
		}
		c.push(unifiFrame("Port 3"))
		if r := <-blocker; r.err != nil || r.n.PortID != "Port 3" {
			t.Errorf("blocking Wait = %+v, %v", r.n, r.err)
		}
	})
}

func TestConfig(t *testing.T) {
	if _, err := Listen("eth0", &Config{Wait: -time.Second}); err == nil || !strings.Contains(err.Error(), "Config.Wait is -1s") {
		t.Errorf("Listen with a negative wait = %v", err)
	}
	wait, log, err := (*Config)(nil).resolve()
	if wait != DefaultWait || log == nil || err != nil {
		t.Errorf("nil Config resolves to %v, %v, %v", wait, log, err)
	}
	wait, _, _ = (&Config{Wait: 2 * time.Second}).resolve()
	if wait != 2*time.Second {
		t.Errorf("Config{Wait: 2s} resolves to %v", wait)
	}
	if DefaultWait != 35*time.Second {
		t.Errorf("DefaultWait = %v, want the runbook's 35 seconds", DefaultWait)
	}
}
