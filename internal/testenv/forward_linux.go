package testenv

import (
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// A Forwarder listens on an address in a network namespace and forwards
// each connection to an address in the test's. Its methods are safe for
// concurrent use.
type Forwarder struct {
	ln net.Listener
	to string // the address in the test's network namespace

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// Forward listens on listen in the network namespace netns ("": the
// test's own) and forwards every connection to the address to as the
// test's own namespace has it: how a machine's programs reach the registry
// and tink-server, which listen on the test's loopback only; plumbing in
// place of a provisioning network. The listening socket stays in netns;
// every other goroutine's thread, and so each forwarded connection's dial,
// is in the test's namespace. The caller closes it.
func Forward(netns, listen, to string) (*Forwarder, error) {
	f := &Forwarder{to: to, conns: map[net.Conn]bool{}}
	listenIn := func() error {
		ln, err := net.Listen("tcp", listen)
		f.ln = ln
		return err
	}
	var err error
	if netns == "" {
		err = listenIn()
	} else {
		err = InNetns(netns, listenIn)
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s in network namespace %s: %w", listen, netns, err)
	}
	f.wg.Go(f.serve)
	return f, nil
}

// Addr returns the address f listens on: listen, its port chosen when
// listen named port 0.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

func (f *Forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Go(func() { f.pipe(c) })
	}
}

// pipe joins c to a new connection to f.to until either side closes.
func (f *Forwarder) pipe(c net.Conn) {
	up, err := net.DialTimeout("tcp", f.to, 10*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !f.track(c, up) {
		return
	}
	var wg sync.WaitGroup
	for _, p := range [][2]net.Conn{{up, c}, {c, up}} {
		wg.Go(func() {
			_, _ = io.Copy(p[0], p[1])
			if tc, ok := p[0].(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
		})
	}
	wg.Wait()
	f.untrack(c, up)
}

// track records conns for close, or closes them when f is closed.
func (f *Forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = true
	}
	return true
}

func (f *Forwarder) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(f.conns, c)
	}
}

// Close stops listening, closes every forwarded connection, and waits for
// f's goroutines. A peer that vanished mid-stream (a machine killed, which
// sends no FIN) would otherwise hold its connection for as long as TCP
// tries.
func (f *Forwarder) Close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}
