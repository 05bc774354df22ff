package sim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/inventory/netboxtest"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// stormFleet is a fleet of n workers whose entries approve their ECC EK;
// the machines share 8 RSA EKs that no entry approves, so that every
// attestation still proves an RSA EK too, without 0.1 s of key generation
// per machine.
func stormFleet(tb testing.TB, n int) *testFleet {
	tb.Helper()
	return newFleet(tb, worldConfig{Edit: func(s *daemon.Settings) { s.ConfigTTL, s.PollInterval = time.Hour, stormPoll }}, stormNodes(tb, n)...)
}

// stormPoll is a storm's poll interval: fleetd's default. A storm measures
// admissions, which the run loop takes no part in; at the simulation's
// 100 ms a loop pass, which reads all n devices and their interfaces from
// NetBox, would run back to back through the storm, and its cost per
// machine would grow with the storm's length.
const stormPoll = 15 * time.Second

// stormNodes are stormFleet's n workers.
func stormNodes(tb testing.TB, n int) []testNode {
	tb.Helper()
	var rsaKeys []*rsa.PrivateKey
	for range 8 {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			tb.Fatal(err)
		}
		rsaKeys = append(rsaKeys, k)
	}
	nodes := make([]testNode, n)
	for i := range nodes {
		tpm, err := attesttest.NewSoftTPM(&attesttest.SoftConfig{RSAEK: rsaKeys[i%8]})
		if err != nil {
			tb.Fatal(err)
		}
		nodes[i] = testNode{name: fmt.Sprintf("w-%04d", i), class: "worker", approve: true, eccOnly: true, tpm: tpm}
	}
	return nodes
}

// countedClients makes a namespace of its own on env and Kubernetes
// clients as fleetd makes them (its kubeconfig, client-side rate limits
// included), whose requests calls counts.
func countedClients(tb testing.TB, env *kubetest.Env, calls *kubeCalls) (ns string, kube kubernetes.Interface, tink dynamic.Interface) {
	tb.Helper()
	ns = env.Namespace(tb)
	cfg, err := daemon.Kubeconfig(env.Kubeconfig())
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Wrap(calls.wrap)
	kube, tink = kubetest.Clientset(tb, cfg), kubetest.Dynamic(tb, cfg)
	return ns, kube, tink
}

// kubeCalls counts Kubernetes API requests by method and resource.
type kubeCalls struct {
	mu sync.Mutex
	by map[string]int
}

func (c *kubeCalls) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		res := r.URL.Path
		if i := slices.Index(parts, "namespaces"); i >= 0 && i+2 < len(parts) {
			res = parts[i+2]
		} else if len(parts) >= 3 && parts[0] == "api" {
			res = parts[2] // a cluster-scoped resource: /api/v1/<resource>[/<name>]
		}
		c.mu.Lock()
		if c.by == nil {
			c.by = map[string]int{}
		}
		c.by[r.Method+" "+res]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// reset returns the counts so far and starts again from zero.
func (c *kubeCalls) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	by := c.by
	c.by = nil
	return by
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// selfCPU is the CPU time (user and system) of this process so far:
// fleetd, its NetBox, the simulated machines and client-go's fakes.
func selfCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childCPU is the CPU time (user and system) of this process's children so
// far, by command name: the kube-apiserver and etcd kubetest started (etcd
// runs as "server", the name go tool gives its binary).
func childCPU(tb testing.TB) map[string]time.Duration {
	tb.Helper()
	const tick = 100 // USER_HZ, the unit of /proc/<pid>/stat's times
	out := map[string]time.Duration{}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		tb.Skipf("no /proc to read the control plane's CPU from: %v", err)
	}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15)
		i := bytes.LastIndexByte(b, ')')
		j := bytes.IndexByte(b, '(')
		if i < 0 || j < 0 {
			continue
		}
		f := strings.Fields(string(b[i+2:]))
		if len(f) < 13 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[string(b[j+1:i])] += time.Duration(ut+st) * time.Second / tick
	}
	return out
}

func (f *testFleet) sortedNames() []string {
	return slices.Sorted(maps.Keys(f.machines))
}

// storm attests every machine of f at once, attest to install code, and
// returns each machine's latency; it fails tb if a machine got no code.
func storm(tb testing.TB, f *testFleet) []time.Duration {
	tb.Helper()
	lat, failed := stormAll(f)
	if len(failed) > 0 {
		tb.Fatalf("%d machines got no install code; the first: %s", len(failed), failed[0])
	}
	return lat
}

// stormAll attests every machine of f at once, attest to install code, and
// returns each machine's latency, sorted, and what the machines that got no
// code were told.
func stormAll(f *testFleet) (lat []time.Duration, failed []string) {
	names := f.sortedNames()
	lat = make([]time.Duration, len(names))
	var start, done sync.WaitGroup
	start.Add(1)
	for i, n := range names {
		m := f.machines[n]
		m.say = func(string, string, string) {}
		done.Go(func() {
			start.Wait()
			t0 := time.Now()
			// Labelled for a CPU profile: the machines' side (their TPMs,
			// TLS and HTTP clients) apart from fleetd's and NetBox's.
			pprof.Do(f.ctx, pprof.Labels("side", "machine"), m.hookOS)
			lat[i] = time.Since(t0)
		})
	}
	start.Done()
	done.Wait()
	for _, n := range names {
		res, ok, _, _, _ := f.machines[n].state()
		if !ok || res.Verdict != attest.Attested || res.InstallCode == "" {
			failed = append(failed, fmt.Sprintf("%s: %+v (attested %v)", n, res, ok))
		}
	}
	slices.Sort(lat)
	return lat, failed
}

// TestFleetdStorm runs a small storm through the whole fleetd: every
// machine gets its code, and costs at most 4 NetBox requests, its journal
// line included: its changelog (the binding), and its shares of the
// device reads by serial, the interface reads and, on first sight, of the
// MAC objects and primary MACs (with the machines proven at the same
// time), the one write of the attestation with last_run (alone or in
// bulk), and its share of a bulk create of journal lines.
func TestFleetdStorm(t *testing.T) {
	const n = 20
	f := stormFleet(t, n)
	f.nbsrv.ResetRequests()
	lat := storm(t, f)
	if err := f.d.Journal().Flush(f.ctx); err != nil {
		t.Fatal(err)
	}
	by := requestsBy(f.nbsrv)
	perMachine := float64(sum(by)) / n
	t.Logf("%d machines: p50 %v, p99 %v; %.2f NetBox requests per machine (%.2f with the run loop's passes): %v",
		n, percentile(lat, 50), percentile(lat, 99), perMachine, float64(f.nbsrv.RequestCount())/n, by)
	if perMachine > 4 {
		t.Errorf("%.2f NetBox requests per admitted machine, want at most 4", perMachine)
	}
	lines := 0
	for _, e := range f.journal() {
		if strings.HasPrefix(e.Text, "started Workflow provision-") {
			lines++
		}
	}
	if lines != n {
		t.Errorf("%d journal lines of a started run, want %d", lines, n)
	}
}

// TestFleetdAttestationRequests counts what one machine attesting alone
// costs NetBox, first sight and repeat: the binding (device and
// changelog), the interface, the MAC object and primary MAC on first sight
// only, the one write of the attestation (with last_run when a run
// starts), and the journal line of a started run. A repeat redoes no MAC
// write.
func TestFleetdAttestationRequests(t *testing.T) {
	f := stormFleet(t, 1)
	m := f.machines["w-0000"]
	m.say = func(string, string, string) {}
	count := func(what string) map[string]int {
		t.Helper()
		f.nbsrv.ResetRequests()
		m.hookOS(f.ctx)
		if res, ok, _, _, _ := m.state(); !ok || res.Verdict != attest.Attested {
			t.Fatalf("%s attestation: %+v", what, res)
		}
		if err := f.d.Journal().Flush(f.ctx); err != nil {
			t.Fatal(err)
		}
		return requestsBy(f.nbsrv)
	}
	first := count("first")
	if res, _, _, _, _ := m.state(); res.InstallCode == "" {
		t.Fatalf("the first attestation got no code: %+v", res)
	}
	repeat := count("repeat")
	t.Logf("first attestation: %d NetBox requests %v; repeat: %d %v", sum(first), first, sum(repeat), repeat)
	if sum(first) > 7 {
		t.Errorf("a first attestation took %d NetBox requests, want at most 7", sum(first))
	}
	if sum(repeat) > 4 {
		t.Errorf("a repeat attestation took %d NetBox requests, want at most 4", sum(repeat))
	}
	for k, v := range repeat {
		if strings.Contains(k, "mac-addresses") || strings.HasPrefix(k, "PATCH /api/dcim/interfaces/") {
			t.Errorf("a repeat attestation wrote the MAC again: %s x%d", k, v)
		}
	}
}

// requestsBy counts srv's requests by method and path, leaving out the
// run loop's passes (Reconcile's lists of every device and interface),
// which no attestation makes.
func requestsBy(srv *netboxtest.Server) map[string]int {
	n := map[string]int{}
	for _, r := range srv.Requests() {
		path, query, _ := strings.Cut(r.URI, "?")
		q, _ := url.ParseQuery(query)
		if r.Method == "GET" && (path == "/api/dcim/devices/" && !q.Has("serial") || path == "/api/dcim/interfaces/" && q.Has("device_role")) {
			continue
		}
		if id := strings.TrimRight(strings.TrimPrefix(path, "/api/dcim/devices/"), "/"); path != "/api/dcim/devices/" && strings.HasPrefix(path, "/api/dcim/devices/") && id != "" {
			path = "/api/dcim/devices/{id}/"
		} else if strings.HasPrefix(path, "/api/dcim/interfaces/") && path != "/api/dcim/interfaces/" {
			path = "/api/dcim/interfaces/{id}/"
		}
		n[r.Method+" "+path]++
	}
	return n
}

func sum(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// raiseFileLimit makes room for n machines' connections in this process,
// both ends of each and NetBox's: about 4 descriptors a machine. Raising
// the hard limit needs root; without it the benchmark runs with what it
// has, and a machine that cannot connect fails it.
func raiseFileLimit(tb testing.TB, n int) {
	want := uint64(4*n + 4096)
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur >= want {
		return
	}
	l.Cur, l.Max = want, max(want, l.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		tb.Logf("open files limit: %v; %d machines may need %d", err, n, want)
	}
}

// bareRound runs bareAdmissions for n machines, at most fleetd's default
// number of admissions at once (16, FLEET_MAX_ADMISSIONS), on the test
// binary's kube-apiserver before any fleet uses it, reports its pace and
// returns its wall time. It fails b when the machines made fewer than
// five requests each (more are client-go's retries, which the storm may
// meet too).
func bareRound(b *testing.B, n int, calls *kubeCalls) time.Duration {
	env := kubetest.Start(b)
	calls.reset()
	cpu0, self0 := childCPU(b), selfCPU(b)
	wall := bareAdmissions(b, env, n, 16, calls)
	cpu1, self1 := childCPU(b), selfCPU(b)
	by := calls.reset()
	total := sum(by)
	if total < 5*n {
		b.Fatalf("the bare loop made %d Kubernetes requests for %d machines, want 5 each: %v", total, n, by)
	}
	var control time.Duration
	for name, d := range cpu1 {
		control += d - cpu0[name]
	}
	b.Logf("bare: %d machines in %v, %.1f machines/s; Kubernetes requests %v", n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), by)
	b.ReportMetric(float64(n)/wall.Seconds(), "bare-machines/s")
	b.ReportMetric(float64(total)/float64(n), "bare-kube-requests/machine")
	b.ReportMetric(float64((self1-self0).Microseconds())/1000/float64(n), "bare-test-process-cpu-ms/machine")
	b.ReportMetric(float64(control.Microseconds())/1000/float64(n), "bare-control-plane-cpu-ms/machine")
	return wall
}

// BenchmarkFleetdStorm: 1,000 machines attest at once through the whole
// fleetd (attest, provision's render, token and Workflow, configserve,
// NetBox), attest to install code, over loopback HTTPS: on client-go's
// fakes, then on internal/kubetest's real kube-apiserver and etcd, in each
// round, so that both share the same load of the machine. Metrics carry
// the prefix fakes- or apiserver-, and include the test process's CPU per
// machine (fleetd, NetBox, the machines, the fakes); the apiserver round
// also reports its Kubernetes requests per machine and the CPU kube-apiserver
// and etcd spent per machine. Each round starts with bareRound, the five
// Kubernetes requests of each machine's admission and nothing else, on the
// same kube-apiserver (metrics bare-); apiserver-vs-bare is the storm's
// pace on the apiserver over the bare loop's. A machine that gets no code fails the
// benchmark after its round's figures are logged. FLEET_STORM_MACHINES sets
// another count, FLEET_STORM_ROUNDS one round alone (fakes or apiserver).
func BenchmarkFleetdStorm(b *testing.B) {
	n := envCount(b, "FLEET_STORM_MACHINES", 1000)
	kinds := stormKinds(b)
	raiseFileLimit(b, n)
	var calls kubeCalls
	for b.Loop() {
		b.StopTimer()
		bare := bareRound(b, n, &calls)
		for _, kind := range kinds {
			// Labelled for a CPU profile (-test.cpuprofile, then pprof
			// -tagfocus storm=apiserver): the goroutines of the round's
			// fleetd and NetBox carry the label; the machines' carry
			// side=machine (stormAll).
			pprof.Do(b.Context(), pprof.Labels("storm", kind), func(context.Context) { stormRound(b, kind, n, bare, &calls) })
		}
		b.StartTimer()
	}
}

// stormKinds are the rounds BenchmarkFleetdStorm runs: both, or those
// FLEET_STORM_ROUNDS names (fakes, apiserver, or both, comma-separated).
func stormKinds(b *testing.B) []string {
	v := os.Getenv("FLEET_STORM_ROUNDS")
	if v == "" {
		return []string{"fakes", "apiserver"}
	}
	kinds := strings.Split(v, ",")
	for _, k := range kinds {
		if k != "fakes" && k != "apiserver" {
			b.Fatalf("FLEET_STORM_ROUNDS=%q: %q is neither fakes nor apiserver", v, k)
		}
	}
	return kinds
}

// stormRound runs one round of BenchmarkFleetdStorm on kind's cluster, and
// reports its figures; bare is the round's bare loop's wall time.
func stormRound(b *testing.B, kind string, n int, bare time.Duration, calls *kubeCalls) {
	b.StopTimer()
	var f *testFleet
	if kind == "fakes" {
		f = stormFleet(b, n)
	} else {
		// stormFleet on internal/kubetest's real kube-apiserver and etcd,
		// its requests counted by calls.
		ns, kube, tink := countedClients(b, kubetest.Start(b), calls)
		edit := func(s *daemon.Settings) { s.ConfigTTL, s.Namespace, s.PollInterval = time.Hour, ns, stormPoll }
		f = newFleet(b, worldConfig{Edit: edit, Kube: kube, Tink: tink}, stormNodes(b, n)...)
	}
	f.nbsrv.ResetRequests()
	calls.reset()
	cpu0, self0 := childCPU(b), selfCPU(b)
	b.StartTimer()
	t0 := time.Now()
	lat, failed := stormAll(f)
	wall := time.Since(t0)
	b.StopTimer()
	b.Logf("%s: %s; %d got no install code", kind, reportPace(b, kind, wall, lat), len(failed))
	if len(failed) > 0 {
		b.Errorf("%s: %d machines got no install code; the first: %s", kind, len(failed), failed[0])
	}
	cpu1, self1 := childCPU(b), selfCPU(b)
	b.ReportMetric(float64((self1-self0).Microseconds())/1000/float64(n), kind+"-test-process-cpu-ms/machine")
	by := calls.reset()
	if err := f.d.Journal().Flush(f.ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(f.nbsrv.RequestCount())/float64(n), kind+"-netbox-requests/machine")
	nbBy := requestsBy(f.nbsrv)
	b.Logf("%s: NetBox requests %v, and %d of the run loop's lists", kind, nbBy, f.nbsrv.RequestCount()-sum(nbBy))
	if kind == "apiserver" {
		b.ReportMetric(float64(sum(by))/float64(n), "apiserver-kube-requests/machine")
		spent := map[string]time.Duration{}
		var all time.Duration
		for name, d := range cpu1 {
			spent[name] = d - cpu0[name]
			all += spent[name]
		}
		b.ReportMetric(float64(all.Microseconds())/1000/float64(n), "apiserver-control-plane-cpu-ms/machine")
		b.Logf("apiserver: Kubernetes requests %v; CPU of the control plane's processes %v", by, spent)
		b.ReportMetric(bare.Seconds()/wall.Seconds(), "apiserver-vs-bare")
	}
}
