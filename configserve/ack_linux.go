package configserve

import (
	"fmt"
	"os"
	"runtime"
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

// Polling: after the first query, yield the processor between queries for
// up to twice the connection's smoothed round-trip time (at most maxSpin),
// then sleep, doubling the nap from minNap to maxNap.
const (
	maxSpin = time.Millisecond
	minNap  = time.Millisecond
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
	var spinUntil time.Time
	nap := minNap
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
		if !now.Before(deadline) {
			return res, os.ErrDeadlineExceeded
		}
		if spinUntil.IsZero() {
			rtt := time.Duration(info.Rtt) * time.Microsecond
			spinUntil = now.Add(min(2*rtt, maxSpin))
		}
		if now.Before(spinUntil) {
			runtime.Gosched()
			continue
		}
		time.Sleep(min(nap, deadline.Sub(now)))
		nap = min(2*nap, maxNap)
	}
}
