package configserve

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

const ackSupported = true

// TCP states (include/net/tcp_states.h) in which the peer may still
// acknowledge data: ours is open for writing.
const (
	tcpEstablished = 1
	tcpCloseWait   = 8
)

// Polling. The first query comes at once, after the last write: on
// loopback, and for an answer the peer acknowledged while it was still
// being written, that is the only one. Otherwise the acknowledgement of the
// last byte is due about one round trip after it was sent, so the second
// query comes after 7/8 of the connection's round-trip time (rtt: the
// smallest the kernel measured, which delayed acknowledgements do not
// inflate; the smoothed one on kernels without it), and the next ones every
// rtt/8 until 2 rtt have passed. Then the gap doubles with each query, up
// to maxNap, for a peer whose kernel delays its acknowledgement or whose
// window is closed. No gap is shorter than minStep.
const (
	minStep = 5 * time.Microsecond
	maxNap  = 10 * time.Millisecond
)

// checkTCP reports an error unless s is a TCP socket.
func checkTCP(s socket) error {
	var serr error
	if err := s.raw.Control(func(fd uintptr) {
		_, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("not a TCP socket: %w", os.NewSyscallError("getsockopt TCP_INFO", serr))
	}
	return nil
}

// awaitAck waits until the peer's kernel has acknowledged every byte
// written on s, that is until the socket's outgoing queue (SIOCOUTQ:
// bytes written but not acknowledged, sent or not) is empty. It fails
// with os.ErrDeadlineExceeded at deadline, and with errPeerGone as soon as
// the connection closes with bytes unacknowledged.
func awaitAck(s socket, deadline time.Time) (res ackResult, err error) {
	start := time.Now()
	defer func() { res.wait = time.Since(start) }()
	var (
		step time.Duration // gap between queries after the second
		fine time.Time     // until then, step stays fine
	)
	for {
		var (
			outq int
			info *unix.TCPInfo
			serr error
		)
		if err := s.raw.Control(func(fd uintptr) {
			outq, serr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
			if serr != nil {
				serr = os.NewSyscallError("ioctl SIOCOUTQ", serr)
				return
			}
			if outq > 0 {
				info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
				if serr != nil {
					serr = os.NewSyscallError("getsockopt TCP_INFO", serr)
				}
			}
		}); err != nil {
			return res, err
		}
		res.polls++
		if serr != nil {
			return res, serr
		}
		res.unacked = outq
		if outq == 0 {
			return res, nil
		}
		if info.State != tcpEstablished && info.State != tcpCloseWait {
			return res, errPeerGone
		}
		now := time.Now()
		left := deadline.Sub(now)
		if left <= 0 {
			return res, os.ErrDeadlineExceeded
		}
		var gap time.Duration
		switch {
		case step == 0:
			rtt := time.Duration(info.Min_rtt) * time.Microsecond
			if rtt == 0 {
				rtt = time.Duration(info.Rtt) * time.Microsecond
			}
			step = max(rtt/8, minStep)
			fine = start.Add(2 * rtt)
			gap = max(rtt-step, minStep)
		case now.Before(fine):
			gap = step
		default:
			step = min(2*step, maxNap)
			gap = step
		}
		nap(min(gap, left))
	}
}

// nap sleeps for d. Go's timers wake an idle process up to about a
// millisecond late, so the last millisecond is slept in the kernel
// (nanosleep), which holds a thread, not a processor.
func nap(d time.Duration) {
	until := time.Now().Add(d)
	if d > time.Millisecond {
		time.Sleep(d - time.Millisecond)
	}
	if left := time.Until(until); left > 0 {
		ts := unix.NsecToTimespec(left.Nanoseconds())
		unix.Nanosleep(&ts, nil) // EINTR only makes the next query come early
	}
}
