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
	conn tcpConn
	raw  syscall.RawConn
}

// tcpConn is what the Server needs of the connection that owns the socket;
// *net.TCPConn has it.
type tcpConn interface {
	net.Conn
	syscall.Conn
	SetLinger(sec int) error
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
	tc, ok := in.(tcpConn)
	if !ok {
		return socket{}, fmt.Errorf("the connection (%T) is not a TCP connection", in)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return socket{}, err
	}
	s := socket{conn: tc, raw: raw}
	if err := checkTCP(s); err != nil {
		return socket{}, err
	}
	return s, nil
}

// resetOnClose makes a close of the socket reset the connection (SO_LINGER
// 0): the kernel then drops whatever of an answer it still holds, so no
// copy of a config reaches anyone after the Server let go of it. net/http
// closes a connection itself when a write fails, which is why this is set
// before the answer is written, and lifted (gracefulClose) once the answer
// is acknowledged.
func (s socket) resetOnClose() error { return s.conn.SetLinger(0) }

// gracefulClose undoes resetOnClose.
func (s socket) gracefulClose() error { return s.conn.SetLinger(-1) }

// abort resets the connection.
func (s socket) abort() {
	s.conn.SetLinger(0)
	s.conn.Close()
}
