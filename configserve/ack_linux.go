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

// Polling. The first query comes at once, after the last write. Until
// twice the connection's smoothed round-trip time (srtt) has passed, the
// queries come every srtt/4 (within [minStep, maxStep]): the
// acknowledgement of the last byte is due about one srtt after it was
// sent. Then the gap doubles with each query, up to maxNap, for a peer
// whose kernel delays its acknowledgement or whose window is closed.
const (
	minStep = 5 * time.Microsecond
	maxStep = 250 * time.Microsecond
	maxNap  = 50 * time.Millisecond
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
		step time.Duration // gap between queries
		fine time.Time     // until then, queries come every step
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
		if step == 0 {
			srtt := time.Duration(info.Rtt) * time.Microsecond
			step = min(max(srtt/4, minStep), maxStep)
			fine = now.Add(2 * srtt)
		} else if !now.Before(fine) {
			step = min(2*step, maxNap)
		}
		nap(min(step, left))
	}
}

// nap sleeps for d. Go's timers wake an idle process about a millisecond
// late, so a gap shorter than that is slept in the kernel (nanosleep): it
// holds a thread, not a processor, for that long.
func nap(d time.Duration) {
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	unix.Nanosleep(&ts, nil) // EINTR only makes the next query come early
}
