package sim

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// clockSkew is how far ahead the clock of the fault matrix's skewed
// replica runs.
const clockSkew = 2 * time.Minute

// buildSkewedFleetd builds fleetd into dir with a time package whose wall
// clock (time.Now) runs skew ahead of the machine's, as a replica whose
// host's clock is off; its monotonic clock is the machine's. Debian's
// faketime cannot do this to a Go program: it replaces libc's clock calls,
// and Go reads the clock through the kernel's vDSO. The time package's
// source is the toolchain's own, read from GOROOT and given to go build
// as an overlay with one line added; nothing of it is kept.
func buildSkewedFleetd(tb testing.TB, dir string, skew time.Duration) string {
	tb.Helper()
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		tb.Fatalf("go env GOROOT: %v", err)
	}
	orig := filepath.Join(strings.TrimSpace(string(goroot)), "src", "time", "time.go")
	src, err := os.ReadFile(orig)
	if err != nil {
		tb.Fatal(err)
	}
	const call = "\tsec, nsec, mono := runtimeNow()\n"
	if strings.Count(string(src), call) != 1 {
		tb.Fatalf("%s: time.Now does not read the clock as %q; the skewed build needs another edit", orig, strings.TrimSpace(call))
	}
	patched := strings.Replace(string(src), call, call+"\tsec += "+strconv.FormatInt(int64(skew/time.Second), 10)+"\n", 1)
	file := filepath.Join(dir, "time.go")
	if err := os.WriteFile(file, []byte(patched), 0o600); err != nil {
		tb.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{orig: file}})
	if err != nil {
		tb.Fatal(err)
	}
	ovl := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovl, overlay, 0o600); err != nil {
		tb.Fatal(err)
	}
	return buildFleetd(tb, dir, "-overlay", ovl)
}

// freeze stops the process with SIGSTOP, as a host that stalls does;
// thaw lets it go on (SIGCONT).
func (r *replicaProc) freeze(tb testing.TB) { r.signal(tb, syscall.SIGSTOP) }
func (r *replicaProc) thaw(tb testing.TB)   { r.signal(tb, syscall.SIGCONT) }

func (r *replicaProc) signal(tb testing.TB, sig syscall.Signal) {
	r.mu.Lock()
	cmd := r.cmd
	r.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		tb.Errorf("%v %s: %v", sig, r.name, err)
	}
}

// peerLinks are the replicas' links to each other's peers' API: for each
// ordered pair (from, to), a TCP proxy that from's FLEET_PEERS names for to.
// Cutting a replica's links partitions its peers' network: it reaches no
// other replica, and none reaches it. A cut link takes new connections and
// holds them unanswered, as a network that drops packets does, and its
// open connections go silent; restore closes what the cut held.
type peerLinks struct {
	mu    sync.Mutex
	links map[[2]int]*peerLink
}

func newPeerLinks(tb testing.TB) *peerLinks { return &peerLinks{links: map[[2]int]*peerLink{}} }

type peerLink struct {
	ln     net.Listener
	to     string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
	held   []net.Conn
	closed bool
}

// link returns the address of from's link to to, at upstream.
func (p *peerLinks) link(tb testing.TB, from, to int, upstream string) string {
	tb.Helper()
	ln := listen(tb)
	l := &peerLink{ln: ln, to: upstream, conns: map[net.Conn]bool{}}
	p.mu.Lock()
	p.links[[2]int{from, to}] = l
	p.mu.Unlock()
	go l.serve()
	return ln.Addr().String()
}

// cut partitions replica i (true) or restores it (false).
func (p *peerLinks) cut(i int, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, l := range p.links {
		if k[0] == i || k[1] == i {
			l.setCut(on)
		}
	}
}

func (p *peerLinks) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		l.ln.Close()
		l.mu.Lock()
		l.closed = true
		for c := range l.conns {
			c.Close()
		}
		for _, c := range l.held {
			c.Close()
		}
		l.mu.Unlock()
	}
}

func (l *peerLink) setCut(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = on
	if on {
		// Open connections go silent: closed here, their peers learn
		// nothing until their own timeouts (they are not told).
		for c := range l.conns {
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
		return
	}
	for _, c := range l.held {
		c.Close()
	}
	l.held = nil
}

func (l *peerLink) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		if l.cut {
			l.held = append(l.held, c)
			l.mu.Unlock()
			continue
		}
		l.mu.Unlock()
		go l.forward(c)
	}
}

func (l *peerLink) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", l.to, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	l.mu.Lock()
	if l.cut || l.closed {
		l.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	l.conns[c], l.conns[up] = true, true
	l.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	l.mu.Lock()
	delete(l.conns, c)
	delete(l.conns, up)
	l.mu.Unlock()
}
