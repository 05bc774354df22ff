package configserve

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// errAckUnsupported: this platform cannot tell whether the peer
// acknowledged an answer (see ack_others.go).
var errAckUnsupported = errors.New("configserve: checking the peer's acknowledgement is not implemented on this platform")

// errPeerGone: the connection closed (as by a reset) while bytes of the
// answer were unacknowledged.
var errPeerGone = errors.New("the connection closed before the peer acknowledged the answer")

// ackResult says how an acknowledgement check went.
type ackResult struct {
	polls   int           // socket queries made
	unacked int           // bytes unacknowledged at the last query
	wait    time.Duration // time spent checking, after the last write
}

// socket is the TCP socket under an HTTP connection.
type socket struct {
	raw syscall.RawConn
}

// innermost follows NetConn (as *tls.Conn has) down to the connection that
// owns the socket.
func innermost(c net.Conn) net.Conn {
	for range 16 {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		n := u.NetConn()
		if n == nil {
			break
		}
		c = n
	}
	return c
}

// tcpSocket finds the TCP socket under c.
func tcpSocket(c net.Conn) (socket, error) {
	in := innermost(c)
	sc, ok := in.(syscall.Conn)
	if !ok {
		return socket{}, fmt.Errorf("the connection (%T) has no socket to check", in)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return socket{}, err
	}
	s := socket{raw: raw}
	if err := checkTCP(s); err != nil {
		return socket{}, err
	}
	return s, nil
}

// abort resets the connection under c (SO_LINGER 0), so that the kernel
// drops whatever of the answer it still holds and no second copy of a
// config can reach anyone after the Server let go of it.
func abort(c net.Conn) {
	in := innermost(c)
	if l, ok := in.(interface{ SetLinger(int) error }); ok {
		l.SetLinger(0)
	}
	in.Close()
}
