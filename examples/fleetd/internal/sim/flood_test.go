package sim

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// A flood of asks for configs fleetd does not hold, from thousands of
// addresses, while NetBox is so slow that fleetd's requests time out: the
// node that then fetches its config, while NetBox answers slowly, is
// journaled and taken active once NetBox heals, its own vain asks in the
// minute after its first stamp the alert's metric and are not journaled
// again, the metric series stay few, and the flood costs NetBox a bounded
// number of requests. (That the node's next ask after the minute journals
// one line that counts them is TestMissingConfigAsksJournalEvery's, in
// package daemon, on a clock a test can move.)
func TestConfigAskFlood(t *testing.T) {
	// provision's loop reads every device each pass; this test counts what
	// the flood costs NetBox, so the loop makes its first pass alone.
	f, url := attestedWorker(t, func(s *daemon.Settings) { s.PollInterval = time.Hour })
	node := f.machines["w-01"].client
	ask := func() {
		t.Helper()
		status, _, err := fetch(f.ctx, node, f.url+configserve.PathPrefix+configserve.NewCode())
		if err != nil || status != http.StatusNotFound {
			t.Fatalf("a fetch of an unknown code from the node = %d, %v; want 404", status, err)
		}
	}
	// The node asks once with a code that is not its own: fleetd reads
	// NetBox's devices, and journals the ask on the node's device.
	const missingText = "warning: the node asked for its Talos config, and fleetd holds none for it"
	firstAsk := time.Now()
	ask()
	f.waitJournal("w-01", missingText)
	// The flood comes once the devices fleetd read for that ask are older
	// than the address book reads again for an address it does not know:
	// the flood's asks then read NetBox, and time out.
	time.Sleep(time.Until(firstAsk.Add(inventory.DefaultAddressBookMissEvery)))

	f.nbsrv.ResetRequests()
	f.nbsrv.Inject(netboxtest.Fault{Kind: netboxtest.Slow, Delay: time.Minute})

	// 40,000 asks with codes fleetd never made, from 8,000 addresses that
	// are no device's, straight into fleetd's HTTPS handler.
	const asks, peers, workers = 40000, 8000, 4
	before := countSeries(f.metrics())
	h := f.d.Handler()
	t0 := time.Now()
	var wg sync.WaitGroup
	var bad sync.Map
	for w := range workers {
		wg.Go(func() {
			for i := w; i < asks; i += workers {
				p := i % peers
				req := httptest.NewRequest(http.MethodGet, configserve.PathPrefix+configserve.NewCode(), nil)
				req.RemoteAddr = fmt.Sprintf("10.77.%d.%d:%d", p/250, p%250+1, 40000+i%20000)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusNotFound {
					bad.Store(rec.Code, true)
				}
			}
		})
	}
	// Meanwhile the node asks again and again, over HTTPS from its own
	// address: each ask stamps the alert's metric, though fleetd journals
	// none of them before a minute has passed.
	const nodeAsks = 100
	asked := time.Now().Unix()
	for range nodeAsks {
		ask()
	}
	if got := metricValue(f.metrics(), `fleet_install_config_missing_last_timestamp_seconds{node="w-01"}`); got < float64(asked) {
		t.Errorf("w-01's missing-config metric is %v, before its last ask at %d", got, asked)
	}
	wg.Wait()
	bad.Range(func(k, _ any) bool { t.Errorf("a flood ask was answered %v, want 404", k); return true })
	t.Logf("%d asks from %d addresses in %v", asks, peers, time.Since(t0))

	// The node fetches its config while NetBox answers, slowly.
	f.nbsrv.Inject(netboxtest.Fault{Kind: netboxtest.Slow, Delay: 500 * time.Millisecond})
	f.wantServed(node, url, "the node's fetch")
	f.nbsrv.Inject(netboxtest.Fault{Kind: netboxtest.Healthy})
	f.waitJournal("w-01", "success: fleetd served the config of provision-w-01-")
	f.wait("w-01 active", func() bool { return f.status("w-01") == inventory.StatusActive })

	// The node's vain asks during the flood wait for the minute after its
	// first one: its journal holds the first ask's line alone.
	if err := f.d.Journal().Flush(f.ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(firstAsk); took >= time.Minute {
		t.Fatalf("the flood took %v from the node's first ask, past the minute in which its asks journal nothing", took)
	}
	lines := f.journalWith("w-01", missingText)
	if len(lines) != 1 || lines[0] != missingText {
		t.Errorf("the node's %d asks made the journal lines\n%s\nwant the first ask's alone", nodeAsks+1, strings.Join(lines, "\n"))
	}
	if all, others := f.d.TrackedAsks(); others > daemon.AskPeers || all > others+1 {
		t.Errorf("%d addresses tracked, %d of them not devices'", all, others)
	}

	// The metrics: the alert's gauge names the node alone, and the series
	// stay few whatever the number of asking addresses.
	m := f.metrics()
	if got := grep(m, "fleet_install_config_missing_last_timestamp_seconds{"); !strings.HasPrefix(got, `fleet_install_config_missing_last_timestamp_seconds{node="w-01"} `) || strings.Count(got, "\n") != 0 {
		t.Errorf("missing-config series:\n%s", got)
	}
	// The flood adds none to those before it: every labelled series
	// fleetd starts with, and the node's gauge of its first ask.
	if series := countSeries(m); series > before {
		t.Errorf("%d fleet series after the flood, %d before:\n%s", series, before, grep(m, "fleet"))
	}
	unknown := metricValue(m, "fleet_install_config_unknown_asks_total")
	untracked := metricValue(m, "fleet_install_config_untracked_asks_total")
	if untracked == 0 || unknown+untracked > asks {
		t.Errorf("unknown asks %v, untracked %v: want some untracked, and no more than %d in all", unknown, untracked, asks)
	}
	if lost := metricValue(m, "fleet_journal_lines_lost_total"); lost != 0 {
		t.Errorf("%v journal lines lost", lost)
	}

	// What the flood cost NetBox: the address book's reads (two requests
	// each, at most one read in 10 s for addresses it does not know, a try
	// that timed out included), the node's line of asks, and the fetch's
	// gate, line and status.
	var reqs []string
	for _, r := range f.nbsrv.Requests() {
		if r.User == userFleetd {
			reqs = append(reqs, r.Method+" "+r.URI)
		}
	}
	t.Logf("%d NetBox requests by fleetd", len(reqs))
	if len(reqs) > 30 {
		t.Errorf("%d NetBox requests:\n%s", len(reqs), strings.Join(reqs, "\n"))
	}
}

// A served config takes its device active while the journal's queue is
// full: the status does not wait behind journal lines, and is not dropped
// with them.
func TestServedWhileJournalFull(t *testing.T) {
	f, url := attestedWorker(t, nil)
	fillJournal(t, f)
	f.wantServed(f.machines["w-01"].client, url, "the node's fetch")
	f.wait("w-01 active", func() bool { return f.status("w-01") == inventory.StatusActive })
	if lost := metricValue(f.metrics(), "fleet_journal_lines_lost_total"); lost != 2 {
		t.Errorf("%v journal lines lost, want 2: the one beyond the full queue, and the served line", lost)
	}
}

// metricValue is the value of a series, name and labels as a scrape
// writes them; 0 when absent.
func metricValue(scrape, name string) float64 {
	for _, l := range strings.Split(scrape, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// Device statuses have a lane of their own: while fleetd's journal queue
// is full and NetBox is down, statuses wanted again and again are not lost,
// and NetBox takes the latest of each device once it answers.
func TestStatusLane(t *testing.T) {
	f := newTestFleet(t, nil, testNode{name: "w-01", class: "worker"}, testNode{name: "w-02", class: "worker"})
	fillJournal(t, f)
	j := f.d.Journal()
	f.nbsrv.Inject(netboxtest.Fault{Kind: netboxtest.Down})
	w1, w2 := f.devices["w-01"].ID, f.devices["w-02"].ID
	for range 1000 {
		j.SetStatus(w1, "w-01", inventory.StatusOffline)
		j.SetStatus(w1, "w-01", inventory.StatusActive)
		j.SetStatus(w2, "w-02", inventory.StatusActive)
	}
	f.nbsrv.Inject(netboxtest.Fault{Kind: netboxtest.Healthy})
	f.wait("w-01 and w-02 active", func() bool {
		return f.status("w-01") == inventory.StatusActive && f.status("w-02") == inventory.StatusActive
	})
	if lost := metricValue(f.metrics(), "fleet_device_status_writes_lost_total"); lost != 0 {
		t.Errorf("%v device statuses lost", lost)
	}
}

// fillJournal holds the worker of fleetd's journal queue until t ends,
// and, once the worker took the job that holds it, fills the queue: one
// line more is lost.
func fillJournal(t *testing.T, f *testFleet) {
	release, held := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	j := f.d.Journal()
	j.Do(func(context.Context) error { close(held); <-release; return nil })
	<-held
	for j.Do(func(context.Context) error { return nil }) {
	}
}

// A status NetBox has not taken when fleetd shuts down, or one wanted
// after, is logged with its device for the operator, and counted. The line
// says what the runbook says of a device that stays planned: set
// desired_action to provision (when the node did not register; when it
// did, the loop takes the device active: provision's
// TestRegisteredNodeTakenActive), not that the status be set by hand.
func TestStatusLostAtShutdown(t *testing.T) {
	const action = "fleetd takes the device active once its node registers in the cluster; if no Node of that name registers, set desired_action to provision"
	f := newTestFleet(t, nil, testNode{name: "w-01", class: "worker"})
	j := f.d.Journal()
	f.nbsrv.Inject(netboxtest.Fault{Kind: netboxtest.Down})
	id := f.devices["w-01"].ID
	j.SetStatus(id, "w-01", inventory.StatusActive)
	ctx, cancel := context.WithTimeout(f.ctx, 300*time.Millisecond)
	defer cancel()
	j.Close(ctx)
	j.SetStatus(id, "w-01", inventory.StatusActive)
	if n := metricValue(f.metrics(), "fleet_device_status_writes_lost_total"); n != 2 {
		t.Errorf("%v statuses counted lost, want 2", n)
	}
	for _, want := range []string{
		fmt.Sprintf(`"msg":"inventory: NetBox did not take a device status; %s","device_id":%d,"device":"w-01","status":"active"`, action, id),
		fmt.Sprintf(`"msg":"inventory: a device status came after shutdown, and NetBox does not hold it; %s","device_id":%d,"device":"w-01","status":"active"`, action, id),
	} {
		if !strings.Contains(f.audit.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, f.audit.String())
		}
	}
	// A try cut short by the shutdown may still reach NetBox: heal it only
	// once no request has come for a while.
	for n := -1; n != f.nbsrv.RequestCount(); time.Sleep(200 * time.Millisecond) {
		n = f.nbsrv.RequestCount()
	}
	f.nbsrv.Inject(netboxtest.Fault{Kind: netboxtest.Healthy})
	if got := f.status("w-01"); got != inventory.StatusPlanned {
		t.Errorf("w-01 is %s", got)
	}
}

// countSeries is the number of fleet series in a scrape: its lines that
// begin with "fleet".
func countSeries(scrape string) int { return strings.Count("\n"+scrape, "\nfleet") }
