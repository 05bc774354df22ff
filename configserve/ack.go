package configserve

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// How the Server knows an answer arrived.
//
// The acknowledgement is the peer's kernel's, not its application's: a
// kernel acknowledges every byte that reaches it, read or not. A client
// that reads half an answer and closes the connection spends the code all
// the same if its kernel had received the whole answer, as it has a config
// of a few kilobytes, which fits in its receive buffer; only an answer
// that had not all arrived goes unacknowledged, and its config stays. A
// node that loses the config after its kernel received it (a power loss
// before Talos writes it to STATE) has spent its code too: its next fetch
// gets 410 and the event Refetched, and a new run renders a new code.
//
// After the last byte of the answer is written and flushed, the Server
// queries the TCP socket under the connection (through *tls.Conn's
// NetConn) for its outgoing queue, SIOCOUTQ: bytes written but not yet
// acknowledged by the peer. Zero means the peer's kernel holds the whole
// answer. The polling schedule is in ack_linux.go; over a link with a 40 ms
// round trip the check ends about one round trip after the last write,
// after three queries, and on loopback mostly after the first.
//
// The peer's kernel acknowledges at once on a new connection, and when the
// client closes the connection: the answer that carries a config says
// Connection: close, and a client closes once it has read it. On a
// connection that stays open, a kernel may hold its acknowledgement back
// for its delayed-ACK timer (40 ms or more on Linux); the check then lasts
// that long. HTTP/2 would share the connection between answers, which is
// why ConfigureServer makes the http.Server speak HTTP/1.1 only.

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
