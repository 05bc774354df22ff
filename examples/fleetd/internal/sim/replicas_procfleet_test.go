package sim

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/testproc"
	"github.com/fleetkit/fleet/inventory"
)

// buildFleetd builds fleetd with go build and flags into dir, and returns
// its path.
func buildFleetd(tb testing.TB, dir string, flags ...string) string {
	tb.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		testenv.Unavailable(tb, "cannot build fleetd: go env GOMOD: %v", err)
	}
	t0 := time.Now()
	args := slices.Concat([]string{"build"}, flags, []string{"-o", dir + "/", "./examples/fleetd"})
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	tb.Logf("built fleetd (go %s) in %v", strings.Join(args, " "), time.Since(t0).Round(10*time.Millisecond))
	return filepath.Join(dir, "fleetd")
}

// A replicaProc is one fleetd process, configured by its environment.
type replicaProc struct {
	name    string
	addr    string // its HTTPS listener, 127.0.0.1:port
	metrics string // its metrics listener, 127.0.0.1:port
	peers   string // its peers' API listener, 127.0.0.1:port
	bin     string
	env     []string
	log     *lockedBuffer

	mu     sync.Mutex
	proc   *testproc.Process // nil before start
	killed bool              // the test killed it
}

// start runs the process and waits until its metrics listener answers
// /healthz: fleetd binds it just after its HTTPS listener, so both serve
// then.
func (r *replicaProc) start(tb testing.TB) {
	tb.Helper()
	cmd := exec.Command(r.bin)
	cmd.Env, cmd.Stdout, cmd.Stderr = r.env, r.log, r.log
	p, err := testproc.Start(r.name, cmd, r.log.String)
	if err != nil {
		tb.Fatal(err)
	}
	r.mu.Lock()
	r.proc, r.killed = p, false
	r.mu.Unlock()
	healthz := testproc.HTTPReady(&http.Client{Timeout: time.Second}, "http://"+r.metrics+"/healthz", "")
	if err := p.WaitReady(context.Background(), time.Minute, healthz); err != nil {
		tb.Fatal(err)
	}
}

// process is the running process, started last.
func (r *replicaProc) process() *testproc.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// sigkill kills the process at once, as a node's failure does.
func (r *replicaProc) sigkill(tb testing.TB) {
	tb.Helper()
	r.mu.Lock()
	p := r.proc
	r.killed = true
	r.mu.Unlock()
	if err := p.Kill(); err != nil {
		tb.Fatal(err)
	}
}

// stop ends the process with SIGTERM, as Kubernetes does, and reports an
// unclean exit; a process the test killed has ended already.
func (r *replicaProc) stop(tb testing.TB) {
	r.mu.Lock()
	p, killed := r.proc, r.killed
	r.mu.Unlock()
	if p == nil || killed {
		return
	}
	if err := p.Stop(40 * time.Second); err != nil {
		tb.Error(err)
	} else if err := p.ExitError(); err != nil {
		l := strings.TrimRight(r.log.String(), "\n")
		l = l[strings.LastIndexByte(l, '\n')+1:]
		tb.Errorf("%s exited with %v: %s", r.name, err, l[:min(len(l), 500)])
	}
}

// leading reports whether the process's metrics say it runs the provision
// loop (fleet_provision_leader 1).
func (r *replicaProc) leading(ctx context.Context) bool {
	return metricValue(r.scrape(ctx), "fleet_provision_leader") == 1
}

// scrape is what the process's /metrics answers; "" when it does not.
func (r *replicaProc) scrape(ctx context.Context) string {
	if status, body := r.get(ctx, "/metrics"); status != 0 {
		return body
	}
	return ""
}

// get is the status and the body of the answer to a GET of path at the
// process's metrics listener; 0 and the error when it does not answer.
func (r *replicaProc) get(ctx context.Context, path string) (int, string) {
	// A replica busy with a storm on two shared cores can take seconds to
	// answer a scrape.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metrics+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return rsp.StatusCode, string(b)
}

// freeAddr is a free port of 127.0.0.1, for a process to listen on. The
// port is below the kernel's ephemeral range, where it has one: between
// this check and the process's listen, one of the storm's thousands of
// outgoing connections could take a free port of that range ("bind:
// address already in use"), and none takes a port below it.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	lo := ephemeralLow()
	if lo < 2048 {
		ln := listen(tb)
		defer ln.Close()
		return ln.Addr().String()
	}
	for range 100 {
		port := lo/2 + mrand.IntN(lo/2)
		if _, taken := handedOut.LoadOrStore(port, true); taken {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ln.Close()
		return ln.Addr().String()
	}
	tb.Fatalf("no free port of 127.0.0.1 in %d-%d after 100 tries", lo/2, lo-1)
	return ""
}

// handedOut are the ports freeAddr returned, which it does not return
// again.
var handedOut sync.Map

// ephemeralLow is the lowest port of Linux's ephemeral range, or 0 where
// the kernel does not say.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return lo
}

// A proxy forwards each TCP connection it accepts to an upstream that
// dial opens for it, copying both ways, and keeps both ends, so that close
// ends them. A cut proxy takes new connections and holds them unanswered,
// as a network that drops packets does, and its open connections go
// silent; restoring it closes what the cut held.
type proxy struct {
	ln   net.Listener
	dial func(c net.Conn) (net.Conn, error)
	wg   sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]bool
	held   []net.Conn
	cut    bool
	closed bool
}

func newProxy(tb testing.TB, dial func(net.Conn) (net.Conn, error)) *proxy {
	tb.Helper()
	p := &proxy{ln: listen(tb), dial: dial, conns: map[net.Conn]bool{}}
	p.wg.Go(p.serve)
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		switch {
		case p.closed:
			c.Close()
		case p.cut:
			p.held = append(p.held, c)
		default:
			p.wg.Go(func() { p.forward(c) })
		}
		p.mu.Unlock()
	}
}

func (p *proxy) forward(c net.Conn) {
	up, err := p.dial(c)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut || p.closed {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// setCut cuts the proxy (true) or restores it (false).
func (p *proxy) setCut(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = on
	if on {
		// Open connections go silent: closed here, their peers learn
		// nothing until their own timeouts (they are not told).
		for c := range p.conns {
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
		return
	}
	for _, c := range p.held {
		c.Close()
	}
	p.held = nil
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	for _, c := range p.held {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A balancer is a TCP load balancer: each connection it accepts goes to
// the next backend in turn, and to the one after it when that one does not
// take the connection. It dials each backend from the client's own
// address, as a balancer that keeps the source address does, so fleetd
// sees the node's address.
type balancer struct {
	*proxy
	backends []string
	next     atomic.Uint64
	refused  atomic.Int64 // dials a backend refused
	routes   sync.Map     // a client's address (ip:port) -> the backend its connection reached
}

func newBalancer(tb testing.TB, backends []string) *balancer {
	tb.Helper()
	b := &balancer{backends: backends}
	b.proxy = newProxy(tb, b.dialNext)
	tb.Cleanup(b.close)
	return b
}

func (b *balancer) url() string { return "https://" + b.ln.Addr().String() }

// dialNext dials, from c's address, the next backend that takes the
// connection.
func (b *balancer) dialNext(c net.Conn) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: c.RemoteAddr().(*net.TCPAddr).IP}, Timeout: 5 * time.Second}
	first := b.next.Add(1) - 1
	var err error
	for i := range uint64(len(b.backends)) {
		backend := int((first + i) % uint64(len(b.backends)))
		var up net.Conn
		if up, err = d.Dial("tcp", b.backends[backend]); err == nil {
			b.routes.Store(c.RemoteAddr().String(), backend)
			return up, nil
		}
		b.refused.Add(1)
	}
	return nil, err
}

// route returns the backend that the connection from client (ip:port)
// reached.
func (b *balancer) route(client string) (int, bool) {
	i, ok := b.routes.Load(client)
	if !ok {
		return 0, false
	}
	return i.(int), true
}

// A procFleet is a fleet whose fleetd runs as processes (one alone, or
// replicas) on the test binary's kube-apiserver, behind a balancer that
// every machine reaches them through, with its keep-alives off so that
// each request may reach another process.
type procFleet struct {
	*testFleet
	replicas []*replicaProc
	lb       *balancer
	calls    *kubeCalls // the test process's own Kubernetes requests
	env      *kubetest.Env
	links    *peerLinks // the replicas' links to each other (procFleetConfig.cuttable)
	// ownControlPlane: env is the fleet's alone (procFleetConfig.own).
	ownControlPlane bool
	fetches         *fetchLog
	close           func() // stops the processes, the machines and NetBox; t's Cleanup calls it
}

// procFleetConfig says how many fleetd processes run, and how.
type procFleetConfig struct {
	replicas int    // fleetd processes; 1 with alone runs fleetd without FLEET_REPLICA
	alone    bool   // one fleetd, not a replica
	bin      string // the built fleetd; "": built for the fleet
	// own: a control plane of the fleet's own (kubetest.StartOwn), which
	// the test may kill and restart, and whose kube-system holds only this
	// fleet's tokens; false: the test binary's.
	own bool
	// cuttable: each replica reaches each other through a proxy of its
	// own (peerLinks), which the test cuts to partition a replica.
	cuttable bool
	// settings, when set, edits each replica's settings (i its index)
	// before it starts, as a test's own deployment would.
	settings func(i int, s map[string]string)
	// skewed is 1 + the index of a replica whose clock runs ahead by
	// clockSkew (its fleetd built with a time package that says so); 0:
	// none.
	skewed int
}

// newProcFleet seeds NetBox with the nodes as Terraform does, and runs
// fleetd's processes against it and the test binary's kube-apiserver, in
// a namespace of t's own, until t ends.
func newProcFleet(tb testing.TB, pc procFleetConfig, nodes ...testNode) *procFleet {
	tb.Helper()
	testenv.Short(tb)
	var env *kubetest.Env
	if pc.own {
		env = kubetest.StartOwn(tb)
	} else {
		env = kubetest.Start(tb)
	}
	bin := pc.bin
	if bin == "" {
		bin = buildFleetd(tb, tb.TempDir())
	}
	skewedBin := ""
	if pc.skewed > 0 {
		skewedBin = buildSkewedFleetd(tb, tb.TempDir(), clockSkew)
	}
	ns := env.Namespace(tb)
	raiseFileLimit(tb, len(nodes))
	calls := &kubeCalls{}
	cfg := env.Config()
	cfg.QPS, cfg.Burst = 3000, 6000
	cfg.Wrap(calls.wrap)
	kube, tink := kubetest.Clientset(tb, cfg), kubetest.Dynamic(tb, cfg)
	dir := tb.TempDir()
	nodesFile, topoFile, tpms := writeInventory(tb, dir, nodes)
	inv, err := inventory.Load(nodesFile, topoFile)
	if err != nil {
		tb.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	w := &world{inv: inv, kube: kube, tink: tink, audit: &lockedBuffer{}}
	if err := w.startNetBox(ctx, nil, observerTimeout); err != nil {
		tb.Fatal(err)
	}

	cert, err := testcert.New("127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	certFile, keyFile, err := cert.WriteFiles(dir)
	if err != nil {
		tb.Fatal(err)
	}
	bundleFile := filepath.Join(dir, "secrets.yaml")
	b, err := yaml.Marshal(testBundle(tb))
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(bundleFile, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	key := make([]byte, 32)
	rand.Read(key)
	procs := make([]*replicaProc, pc.replicas)
	var backends []string
	for i := range procs {
		procs[i] = &replicaProc{name: fmt.Sprint("fleetd-", i), addr: freeAddr(tb), metrics: freeAddr(tb), peers: freeAddr(tb), bin: bin, log: &lockedBuffer{}}
		if skewedBin != "" && i == pc.skewed-1 {
			procs[i].bin = skewedBin
		}
		backends = append(backends, procs[i].addr)
	}
	// peersOf is FLEET_PEERS for replica i: each other replica at its
	// peers' listener, or through a link of i's own to it.
	links := newPeerLinks(tb)
	peersOf := func(i int) string {
		var l []string
		for j, q := range procs {
			addr := q.peers
			if pc.cuttable && j != i {
				addr = links.link(tb, i, j, q.peers)
			}
			l = append(l, q.name+"=https://"+addr)
		}
		return strings.Join(l, ",")
	}
	lb := newBalancer(tb, backends)
	for i, p := range procs {
		settings := map[string]string{
			"FLEET_LISTEN":          p.addr,
			"FLEET_METRICS_LISTEN":  p.metrics,
			"FLEET_TLS_CERT":        certFile,
			"FLEET_TLS_KEY":         keyFile,
			"FLEET_PUBLIC_URL":      lb.url(),
			"FLEET_SECRETS_BUNDLE":  bundleFile,
			"FLEET_NODES":           nodesFile,
			"FLEET_TOPOLOGY":        topoFile,
			"NETBOX_URL":            w.nbsrv.URL,
			"NETBOX_TOKEN":          w.nbsrv.Token(userFleetd),
			"FLEET_BINDING_AUTHOR":  userTerraform,
			"NETBOX_SWITCH":         demoSwitch,
			"TINKERBELL_KUBECONFIG": env.Kubeconfig(),
			"CLUSTER_KUBECONFIG":    env.Kubeconfig(),
			"TINKERBELL_NAMESPACE":  ns,
			"FLEET_POLL_INTERVAL":   "200ms",
			"FLEET_CONFIG_TTL":      "1h",
		}
		// To measure another admission limit.
		if v := os.Getenv("FLEET_MAX_ADMISSIONS"); v != "" {
			settings["FLEET_MAX_ADMISSIONS"] = v
		}
		if !pc.alone {
			settings["FLEET_REPLICA"] = p.name
			settings["FLEET_PEERS"] = peersOf(i)
			settings["FLEET_PEERS_LISTEN"] = p.peers
			settings["FLEET_SEALING_KEY"] = hex.EncodeToString(key)
		}
		if pc.settings != nil {
			pc.settings(i, settings)
		}
		p.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		for k, v := range settings {
			p.env = append(p.env, k+"="+v)
		}
	}

	w.url, w.cert = lb.url(), cert.TLS
	w.settings.PublicURL, w.settings.Namespace, w.settings.SealingKey = lb.url(), ns, key
	w.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}}, Timeout: 30 * time.Second}
	f := fleetOf(tb, ctx, w, ns, nodes, tpms, func(string, string, string) {})
	f.sim.every = 250 * time.Millisecond
	pf := &procFleet{testFleet: f, replicas: procs, lb: lb, calls: calls, env: env, links: links, ownControlPlane: pc.own,
		fetches: &fetchLog{whole: map[string]int{}, last: map[string]wholeFetch{}}}
	for _, m := range f.machines {
		tr := m.client.Transport.(*http.Transport)
		tr.DisableKeepAlives = true
		m.client.Transport = pf.fetches.wrap(tr)
		// The installed Talos asks for its config until it gets an answer,
		// and, once it has it, its kubelet registers the node.
		m.fetchTries = 1500
		m.registers = true
	}
	var wg sync.WaitGroup
	f.wg = &wg
	pf.close = sync.OnceFunc(func() {
		cancel()
		wg.Wait()
		var stop sync.WaitGroup
		for _, p := range procs {
			stop.Go(func() { p.stop(tb) })
		}
		stop.Wait()
		if tb.Failed() {
			// The whole logs go to files that outlive the test.
			dir, err := os.MkdirTemp("", "fleetd-logs-")
			for _, p := range procs {
				l := p.log.String()
				tb.Logf("%s's log (last 2 KB):\n%s", p.name, l[max(0, len(l)-2048):])
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, p.name+".log"), []byte(l), 0o644)
				}
			}
			if err == nil {
				tb.Logf("the fleetd processes' whole logs: %s", dir)
			}
		}
		lb.close()
		links.close()
		w.nbsrv.Close()
	})
	tb.Cleanup(pf.close)
	var start sync.WaitGroup
	for _, p := range procs {
		start.Go(func() { p.start(tb) })
	}
	start.Wait()
	return pf
}

// logLines returns the last lines of the fleetd processes' logs that
// name name, at most n, each prefixed with its process's name and cut to
// 500 bytes: what a stalled storm reports of its first waiting machine.
func (pf *procFleet) logLines(name string, n int) []string {
	var out []string
	for _, p := range pf.replicas {
		var lines []string
		for _, l := range strings.Split(p.log.String(), "\n") {
			if strings.Contains(l, name) {
				lines = append(lines, p.name+": "+l[:min(len(l), 500)])
			}
		}
		out = append(out, lines[max(0, len(lines)-n/len(pf.replicas)):]...)
	}
	return out
}

// fetchLog counts, by install code, the config fetches whose answer was
// 200 and carried a whole body, and keeps the last of them.
type fetchLog struct {
	mu    sync.Mutex
	whole map[string]int
	last  map[string]wholeFetch
}

// A wholeFetch is a fetch whose answer carried a whole config: when the
// body's end was read, and the address its connection came from.
type wholeFetch struct {
	at   time.Time
	from string
}

func (l *fetchLog) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		code, ok := strings.CutPrefix(r.URL.Path, configserve.PathPrefix)
		if !ok {
			return next.RoundTrip(r)
		}
		var from string
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) { from = ci.Conn.LocalAddr().String() },
		}))
		rsp, err := next.RoundTrip(r)
		if err != nil || rsp.StatusCode != http.StatusOK {
			return rsp, err
		}
		rsp.Body = &eofBody{ReadCloser: rsp.Body, eof: func() {
			l.mu.Lock()
			l.whole[code]++
			l.last[code] = wholeFetch{at: time.Now(), from: from}
			l.mu.Unlock()
		}}
		return rsp, nil
	})
}

// eofBody calls eof once when its body is read to its end without error.
type eofBody struct {
	io.ReadCloser
	eof  func()
	once sync.Once
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.eof)
	}
	return n, err
}

// urls are the processes' HTTPS listeners, which the balancer spreads
// connections over.
func (pf *procFleet) urls() []string {
	var u []string
	for _, p := range pf.replicas {
		u = append(u, "https://"+p.addr)
	}
	return u
}

// leaders returns the processes whose metrics say they run the loop.
func (pf *procFleet) leaders() []int {
	var l []int
	for i, p := range pf.replicas {
		if p.leading(pf.ctx) {
			l = append(l, i)
		}
	}
	return l
}

// waitFor polls cond every 50 ms for up to limit.
func (pf *procFleet) waitFor(what string, limit time.Duration, cond func() bool) {
	pf.t.Helper()
	if err := eventually(pf.ctx, limit, func() (bool, error) { return cond(), nil }); err != nil {
		pf.t.Fatalf("%s: not within %v", what, limit)
	}
}

// apiserverWrites reads kube-apiserver's own count of write requests
// (create, update, patch, delete) by resource, from its /metrics.
func apiserverWrites(tb testing.TB, kube kubernetes.Interface) map[string]float64 {
	tb.Helper()
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatalf("kube-apiserver's metrics: %v", err)
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(raw), "\n") {
		rest, ok := strings.CutPrefix(l, "apiserver_request_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		var verb, resource string
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "verb":
				verb = v
			case "resource":
				resource = v
			}
		}
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
			n, _ := strconv.ParseFloat(value, 64)
			out[resource] += n
		}
	}
	return out
}

// fleetdWrites is the writes kube-apiserver counted between before and
// after, less those the test process made itself (calls, counted by
// method and resource), by resource.
func fleetdWrites(before, after map[string]float64, own map[string]int) (map[string]float64, float64) {
	by := map[string]float64{}
	var total float64
	for res, n := range after {
		by[res] = n - before[res]
	}
	for k, n := range own {
		method, res, _ := strings.Cut(k, " ")
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			// A status subresource's path ends in "status": its resource
			// is the one before it, which kubeCalls names.
			by[res] -= float64(n)
		}
	}
	for res, n := range by {
		if n <= 0 {
			delete(by, res)
			continue
		}
		total += n
	}
	return by, total
}
