package lldpwait

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultWait is how long Wait waits for a frame when Config.Wait is zero:
// the runbook's 35 seconds. Switches send LLDP every 30 seconds by default,
// so a wait of 35 seconds sees at least one frame from a switch that sends.
const DefaultWait = 35 * time.Second

// ErrTimeout is returned by Wait when no valid LLDP frame arrived within
// the configured wait. The machine then attests no switch port.
var ErrTimeout = errors.New("no LLDP frame arrived in time")

// Config holds the optional settings of Listen and Wait. A nil *Config means
// the defaults. A Config is read once, by Listen; changing it afterwards has
// no effect on the Listener.
type Config struct {
	// Wait is how long each Wait call waits for a valid frame. Zero means
	// DefaultWait (35 s); a negative Wait is an error.
	Wait time.Duration

	// Logger receives a Debug record for each frame Wait skips (malformed,
	// too large, or with TTL 0). Nil means silent.
	Logger *slog.Logger
}

func (c *Config) resolve() (time.Duration, *slog.Logger, error) {
	wait, log := DefaultWait, slog.New(slog.DiscardHandler)
	if c == nil {
		return wait, log, nil
	}
	switch {
	case c.Wait < 0:
		return 0, nil, fmt.Errorf("lldpwait: Config.Wait is %s, want 0 (the default, %s) or more", c.Wait, DefaultWait)
	case c.Wait > 0:
		wait = c.Wait
	}
	if c.Logger != nil {
		log = c.Logger
	}
	return wait, log, nil
}

// conn is what a Listener reads frames from: on Linux an AF_PACKET socket
// (*packet.Conn).
type conn interface {
	ReadFrom(b []byte) (int, net.Addr, error)
	SetReadDeadline(t time.Time) error
	Close() error
}

// A Listener holds a raw socket on one interface that receives the LLDP
// frames of the switch port at the other end of the cable, and nothing else:
// a classic BPF program in the kernel drops every frame that is not an LLDP
// frame to the nearest-bridge address before it reaches the socket.
//
// Frames that arrive between Listen and Wait wait in the socket's queue, so
// a program can Listen first, do other work, and Wait later. Wait may be
// called again for a later frame. Calls to Wait are serialised: a second
// call waits for the first to return (or for its own context to end).
// Close may be called at any time, from any goroutine; it interrupts a
// blocked Wait. The caller must Close a Listener it no longer needs.
type Listener struct {
	ifname string
	conn   conn
	wait   time.Duration
	log    *slog.Logger

	sem chan struct{} // holds one token while a Wait runs
	buf []byte        // the frame buffer, used under sem

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// reads counts the frames the socket handed to this process: every
	// ReadFrom that returned a frame. With the kernel filter in place, only
	// LLDP frames to the nearest-bridge address are counted.
	reads atomic.Uint64
}

// Listen opens a raw socket on the named interface for the LLDP frames
// Wait returns. It needs CAP_NET_RAW (root has it). The interface need not
// be up yet: frames are received once it is. On platforms other than Linux
// it returns an error wrapping errors.ErrUnsupported.
func Listen(ifname string, cfg *Config) (*Listener, error) {
	wait, log, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	c, err := listen(ifname)
	if err != nil {
		return nil, err
	}
	return newListener(ifname, c, wait, log), nil
}

func newListener(ifname string, c conn, wait time.Duration, log *slog.Logger) *Listener {
	return &Listener{
		ifname: ifname,
		conn:   c,
		wait:   wait,
		log:    log,
		sem:    make(chan struct{}, 1),
		buf:    make([]byte, maxFrame+1),
	}
}

// Close closes the socket, which ends a blocked Wait with an error wrapping
// net.ErrClosed. Closing twice returns the first call's result.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		l.closeErr = l.conn.Close()
	})
	return l.closeErr
}

// Wait returns the neighbour named by the first valid LLDP frame the
// interface receives within the configured wait (Config.Wait, 35 s by
// default), counted from this call. Frames Parse rejects, frames larger than
// 9216 bytes and frames with TTL 0 (a port shutting LLDP down) are skipped
// and logged at Debug level.
//
// errors.Is finds ErrTimeout when the wait passes without a valid frame,
// ctx.Err() (context.Canceled or context.DeadlineExceeded) when ctx ends
// first, and net.ErrClosed when the Listener is or gets closed. A context
// deadline shorter than the configured wait ends the wait with
// context.DeadlineExceeded, not ErrTimeout.
func (l *Listener) Wait(ctx context.Context) (*Neighbor, error) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("lldpwait: %s: %w", l.ifname, ctx.Err())
	}
	defer func() { <-l.sem }()

	if l.closed.Load() {
		return nil, l.errClosed()
	}
	if err := l.conn.SetReadDeadline(time.Now().Add(l.wait)); err != nil {
		if l.closed.Load() {
			return nil, l.errClosed()
		}
		return nil, fmt.Errorf("lldpwait: %s: %w", l.ifname, err)
	}
	// When ctx ends, a deadline in the past wakes the blocked read. The
	// deferred function waits for that to finish, so it cannot touch the
	// deadline of a later Wait.
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		_ = l.conn.SetReadDeadline(time.Unix(1, 0))
	})
	defer func() {
		if !stop() {
			<-fired
		}
	}()

	for {
		size, _, err := l.conn.ReadFrom(l.buf)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, fmt.Errorf("lldpwait: %s: %w", l.ifname, ctx.Err())
			case l.closed.Load():
				return nil, l.errClosed()
			case errors.Is(err, os.ErrDeadlineExceeded):
				return nil, fmt.Errorf("%s: %w (waited %s)", l.ifname, ErrTimeout, l.wait)
			}
			return nil, fmt.Errorf("lldpwait: read %s: %w", l.ifname, err)
		}
		l.reads.Add(1)
		if size >= len(l.buf) {
			l.log.Debug("lldpwait: skipped a frame larger than the largest accepted", "interface", l.ifname, "max_bytes", maxFrame)
			continue
		}
		n, err := Parse(l.buf[:size])
		if err != nil {
			l.log.Debug("lldpwait: skipped a frame", "interface", l.ifname, "err", err)
			continue
		}
		if n.TTL == 0 {
			l.log.Debug("lldpwait: skipped a shutdown frame (TTL 0)", "interface", l.ifname, "chassis_id", n.ChassisID, "port_id", n.PortID)
			continue
		}
		return n, nil
	}
}

func (l *Listener) errClosed() error {
	return fmt.Errorf("lldpwait: %s: %w", l.ifname, net.ErrClosed)
}

// Wait listens on the named interface and returns the first valid
// neighbour, as Listener.Wait does, then closes the socket. Frames that
// arrived before the call are not seen; to catch those, Listen first.
func Wait(ctx context.Context, ifname string, cfg *Config) (*Neighbor, error) {
	l, err := Listen(ifname, cfg)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Wait(ctx)
}
