package sim

import (
	"encoding/json"
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
	if err := syscall.Kill(r.process().Pid(), sig); err != nil {
		tb.Errorf("%v %s: %v", sig, r.name, err)
	}
}

// peerLinks are the replicas' links to each other's peers' API: for each
// ordered pair (from, to), a TCP proxy that from's FLEET_PEERS names for to.
// Cutting a replica's links partitions its peers' network: it reaches no
// other replica, and none reaches it.
type peerLinks struct {
	mu    sync.Mutex
	links map[[2]int]*proxy
}

func newPeerLinks(tb testing.TB) *peerLinks { return &peerLinks{links: map[[2]int]*proxy{}} }

// link returns the address of from's link to to, at upstream.
func (p *peerLinks) link(tb testing.TB, from, to int, upstream string) string {
	tb.Helper()
	l := newProxy(tb, func(net.Conn) (net.Conn, error) { return net.DialTimeout("tcp", upstream, 5*time.Second) })
	p.mu.Lock()
	p.links[[2]int{from, to}] = l
	p.mu.Unlock()
	return l.ln.Addr().String()
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
		l.close()
	}
}
