package main

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// stormFleet is a fleet of n workers whose entries approve their ECC EK;
// the machines share 8 RSA EKs that no entry approves, so that every
// attestation still proves an RSA EK too, without 0.1 s of key generation
// per machine.
func stormFleet(tb testing.TB, n int) *testFleet {
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
	return newTestFleetWith(tb, nil, func(s *settings) { s.ConfigTTL = time.Hour }, nodes...)
}

// storm attests every machine of f at once, attest to install code, and
// returns each machine's latency.
func storm(tb testing.TB, f *testFleet) []time.Duration {
	tb.Helper()
	names := make([]string, 0, len(f.machines))
	for n := range f.machines {
		names = append(names, n)
	}
	slices.Sort(names)
	lat := make([]time.Duration, len(names))
	var start, done sync.WaitGroup
	start.Add(1)
	for i, n := range names {
		m := f.machines[n]
		m.say = func(string, string, string) {}
		done.Go(func() {
			start.Wait()
			t0 := time.Now()
			m.hookOS(f.ctx)
			lat[i] = time.Since(t0)
		})
	}
	start.Done()
	done.Wait()
	for _, n := range names {
		res, ok, _, _, _ := f.machines[n].state()
		if !ok || res.Verdict != attest.Attested || res.InstallCode == "" {
			tb.Fatalf("%s: %+v (attested %v)", n, res, ok)
		}
	}
	slices.Sort(lat)
	return lat
}

// TestFleetdStorm runs a small storm through the whole fleetd: every
// machine gets its code, and costs at most 4 NetBox requests, its journal
// line included: the device by serial and its changelog (the binding), the
// interface read and, on first sight, the MAC object and primary MAC
// (shared with the machines admitted at the same time), the one write of
// the attestation with last_run, and its share of a bulk create of
// journal lines.
func TestFleetdStorm(t *testing.T) {
	const n = 20
	f := stormFleet(t, n)
	f.nbsrv.ResetRequests()
	lat := storm(t, f)
	if err := f.d.journal.flush(f.ctx); err != nil {
		t.Fatal(err)
	}
	by := requestsBy(f.nbsrv)
	var admitted int
	for _, c := range by {
		admitted += c
	}
	perMachine := float64(admitted) / n
	t.Logf("%d machines: p50 %v, p99 %v; %.2f NetBox requests per machine (%.2f with the run loop's passes): %v",
		n, lat[n/2], lat[n*99/100], perMachine, float64(f.nbsrv.RequestCount())/n, by)
	if perMachine > 4 {
		t.Errorf("%.2f NetBox requests per admitted machine, want at most 4", perMachine)
	}
	if lines := journalLines(t, f, "started Workflow provision-"); lines != n {
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
	var m *simMachine
	for _, m = range f.machines {
	}
	m.say = func(string, string, string) {}
	count := func(what string) map[string]int {
		t.Helper()
		f.nbsrv.ResetRequests()
		m.hookOS(f.ctx)
		if res, ok, _, _, _ := m.state(); !ok || res.Verdict != attest.Attested {
			t.Fatalf("%s attestation: %+v", what, res)
		}
		if err := f.d.journal.flush(f.ctx); err != nil {
			t.Fatal(err)
		}
		return requestsBy(f.nbsrv)
	}
	first := count("first")
	if res, _, _, _, _ := m.state(); res.InstallCode == "" {
		t.Fatalf("the first attestation got no code: %+v", res)
	}
	repeat := count("repeat")
	total := func(by map[string]int) (n int) {
		for _, v := range by {
			n += v
		}
		return n
	}
	t.Logf("first attestation: %d NetBox requests %v; repeat: %d %v", total(first), first, total(repeat), repeat)
	if total(first) > 7 {
		t.Errorf("a first attestation took %d NetBox requests, want at most 7", total(first))
	}
	if total(repeat) > 4 {
		t.Errorf("a repeat attestation took %d NetBox requests, want at most 4", total(repeat))
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

// journalLines counts the journal entries in f's NetBox whose text starts
// with prefix.
func journalLines(t *testing.T, f *testFleet, prefix string) int {
	t.Helper()
	entries, err := f.journal(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lines int
	for _, e := range entries {
		if strings.HasPrefix(e.Text, prefix) {
			lines++
		}
	}
	return lines
}

// BenchmarkFleetdStorm: 1,000 machines attest at once through the whole
// fleetd (attest, provision's render, token and Workflow, configserve,
// NetBox), attest to install code, over loopback HTTPS.
func BenchmarkFleetdStorm(b *testing.B) {
	const n = 1000
	for b.Loop() {
		b.StopTimer()
		f := stormFleet(b, n)
		f.nbsrv.ResetRequests()
		b.StartTimer()
		t0 := time.Now()
		lat := storm(b, f)
		wall := time.Since(t0)
		b.StopTimer()
		b.ReportMetric(float64(n)/wall.Seconds(), "machines/s")
		b.ReportMetric(float64(lat[n/2].Milliseconds()), "p50-ms")
		b.ReportMetric(float64(lat[n*99/100].Milliseconds()), "p99-ms")
		if err := f.d.journal.flush(f.ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(f.nbsrv.RequestCount())/n, "netbox-requests/machine")
		b.StartTimer()
	}
}

// TestJournalQueueBatches: lines queued together go to NetBox in bulk
// creates of journalBatch, in their order; a batch NetBox refuses (one line
// names a device it does not have) is written again line by line, so only
// that line is lost; a batch NetBox did not answer is tried again.
func TestJournalQueueBatches(t *testing.T) {
	f := stormFleet(t, 3)
	names := []string{"w-0000", "w-0001", "w-0002"}
	ids := make([]int64, 0, 3)
	for _, name := range names {
		ids = append(ids, f.devices[name].ID)
	}
	j := newJournal(f.nb, slog.New(slog.DiscardHandler), func(int) time.Duration { return 100 * time.Millisecond })
	var lost atomic.Int32
	j.lost = func() { lost.Add(1) }
	defer j.close(f.ctx)
	linesOf := func(name string) []string {
		entries, err := f.journal(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			if e.Device == name && strings.HasPrefix(e.Text, "queued ") {
				out = append(out, e.Text)
			}
		}
		return out
	}

	f.nbsrv.ResetRequests()
	const n = 150
	for i := range n {
		j.line(ids[i%3], inventory.JournalInfo, fmt.Sprintf("queued %03d", i))
	}
	if err := j.flush(f.ctx); err != nil {
		t.Fatal(err)
	}
	if c := requestsBy(f.nbsrv); c["POST /api/extras/journal-entries/"] != 2 || len(c) != 1 {
		t.Errorf("%d queued lines took %v, want 2 requests (bulk creates of %d)", n, c, journalBatch)
	}
	var want []string
	for i := 0; i < n; i += 3 {
		want = append(want, fmt.Sprintf("queued %03d", i))
	}
	if got := linesOf(names[0]); !slices.Equal(got, want) {
		t.Errorf("w-0000's journal: %q, want %q", got, want)
	}

	// One line on a device NetBox does not have: only it is lost.
	for i := range 10 {
		id := ids[1]
		if i == 4 {
			id = 99999
		}
		j.line(id, inventory.JournalInfo, fmt.Sprintf("queued again %d", i))
	}
	if err := j.flush(f.ctx); err != nil {
		t.Fatal(err)
	}
	if l := lost.Load(); l != 1 {
		t.Errorf("%d lines lost, want 1", l)
	}
	if got := len(linesOf(names[1])); got != n/3+9 {
		t.Errorf("w-0001 holds %d queued lines, want %d", got, n/3+9)
	}

	// NetBox answers 503 for a while: the batch is tried again, whole.
	f.nbsrv.Inject(netboxtest.Fault{Kind: netboxtest.Failing})
	for i := range 5 {
		j.line(ids[2], inventory.JournalInfo, fmt.Sprintf("queued late %d", i))
	}
	time.Sleep(journalLinger + 150*time.Millisecond)
	f.nbsrv.Inject(netboxtest.Fault{})
	if err := j.flush(f.ctx); err != nil {
		t.Fatal(err)
	}
	if l := lost.Load(); l != 1 {
		t.Errorf("%d lines lost after NetBox healed, want 1", l)
	}
	if got := len(linesOf(names[2])); got != n/3+5 {
		t.Errorf("w-0002 holds %d queued lines, want %d", got, n/3+5)
	}
}
