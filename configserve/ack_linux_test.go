package configserve

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

func mustSocket(t *testing.T, c net.Conn) socket {
	t.Helper()
	s, err := tcpSocket(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stuffedPair returns a pair whose server end has 256 KiB written to a
// client end with a small receive buffer, which it cannot take at once.
func stuffedPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	server, client = tcpPair(t, 16<<10)
	server.SetWriteBuffer(1 << 20)
	if _, err := server.Write(make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
	return server, client
}

// A peer that starts reading late: the check waits for it, sleeping
// between queries rather than spinning, and sees every byte acknowledged.
func TestAwaitAckLateReader(t *testing.T) {
	server, client := stuffedPair(t)
	reading := make(chan time.Time, 1)
	time.AfterFunc(200*time.Millisecond, func() { reading <- time.Now(); io.Copy(io.Discard, client) })
	res, err := awaitAck(mustSocket(t, server), time.Now().Add(5*time.Second))
	acked := time.Now()
	if err != nil || res.unacked != 0 || res.polls < 1 {
		t.Fatalf("a reading peer: %+v, %v; want every byte acknowledged", res, err)
	}
	if read := <-reading; acked.Before(read) {
		t.Errorf("acknowledged %v before the peer read", read.Sub(acked))
	}
	if res.polls > 60 {
		t.Errorf("%d queries in %v: the check spins", res.polls, res.wait)
	}
}

func TestAwaitAckStalledPeer(t *testing.T) {
	server, _ := stuffedPair(t)
	start := time.Now()
	res, err := awaitAck(mustSocket(t, server), start.Add(200*time.Millisecond))
	if !errors.Is(err, os.ErrDeadlineExceeded) || res.unacked == 0 {
		t.Fatalf("a stalled peer: %+v, %v; want the deadline with bytes unacknowledged", res, err)
	}
	if el := time.Since(start); el < 200*time.Millisecond || el > 5*time.Second {
		t.Errorf("the check ended after %v, want at the 200 ms deadline", el)
	}
}

func TestAwaitAckPeerResets(t *testing.T) {
	server, client := stuffedPair(t)
	time.AfterFunc(50*time.Millisecond, func() {
		client.SetLinger(0)
		client.Close()
	})
	start := time.Now()
	res, err := awaitAck(mustSocket(t, server), start.Add(10*time.Second))
	if !errors.Is(err, errPeerGone) {
		t.Fatalf("a peer that resets: %+v, %v; want errPeerGone", res, err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the check noticed the reset after %v", el)
	}
}

func TestTCPSocketRefusesOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	// A connection with no SetLinger (a net.Pipe, or a unix socket) is
	// refused by its type.
	if _, err := tcpSocket(a); err == nil {
		t.Error("tcpSocket accepted a net.Pipe")
	}
	// A socket that is not TCP fails the TCP_INFO query.
	uc2, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer uc2.Close()
	raw, err := uc2.(*net.UDPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkTCP(socket{raw: raw}); err == nil {
		t.Error("checkTCP accepted a UDP socket")
	}
}
