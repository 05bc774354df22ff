package daemon

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/examples/fleetd/internal/alerttest"
	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/inventory"
)

// alertRules are fleetd's alert rules, from this package's directory.
const alertRules = "../../alerts/fleet.rules.yaml"

// scrape is what d's /metrics answers.
func scrape(d *Daemon) string {
	rec := httptest.NewRecorder()
	d.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// Before fleetd holds a certificate it exports no expiry, so
// EnrollmentNameNotServed does not fire on a zero; once it holds one,
// FleetServingCertificateExpiresSoon fires within 14 days of its expiry,
// and EnrollmentNameNotServed once it lapsed. Each certificate after the
// first is a renewal on disk, which fleetd reports at the next scrape
// though no machine connected since: an alert clears without a handshake.
func TestAlertCertificateExpiry(t *testing.T) {
	now := time.Now()
	daemon := func(expiry func() time.Time) *Daemon {
		m := newMetrics(expiry, func() int { return 0 })
		m.leader.Set(1) // a fleetd that runs its loop
		return &Daemon{metrics: m}
	}
	alerttest.Want(t, alertRules, "", scrape(daemon(func() time.Time { return time.Time{} })), now) // none loaded
	dir := t.TempDir()
	var d *Daemon
	for i, c := range []struct {
		notAfter time.Time
		want     []alerttest.Firing
	}{
		{now.Add(13 * 24 * time.Hour), []alerttest.Firing{{Alert: "FleetServingCertificateExpiresSoon"}}},
		{now.Add(90 * 24 * time.Hour), nil},
		{now.Add(15 * 24 * time.Hour), nil},
		{now.Add(-time.Hour), []alerttest.Firing{{Alert: "EnrollmentNameNotServed"}}},
	} {
		tc, err := testcert.NewUntil(c.notAfter, "fleetd.test")
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile, err := tc.WriteFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		mtime := now.Add(time.Duration(i-10) * time.Minute) // each write newer than the last
		for _, f := range []string{certFile, keyFile} {
			if err := os.Chtimes(f, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
		if d == nil {
			r, err := newCertReloader(certFile, keyFile, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.recheck = 0 // every scrape looks at the files
			d = daemon(r.expiry)
		}
		t.Logf("a certificate valid until %v", c.notAfter)
		alerttest.Want(t, alertRules, "", scrape(d), now, c.want...)
	}
}

// runLoop runs d's provision loop, as Serve does, until stop is called or
// t ends.
func runLoop(t *testing.T, d *Daemon) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { d.runLoop(ctx) })
	stop = func() {
		cancel()
		wg.Wait()
	}
	t.Cleanup(stop)
	synctest.Wait()
	return stop
}

// The alerts fire from what one fleetd exports. Running alone, it leads
// the provision loop while it runs it: FleetNoProvisionLeader fires before
// its loop starts and after it stops, not while it runs. A claim whose
// entry approves no EK fires nothing (that an ek-hash-mismatch refusal,
// the first after fleetd started included, fires FleetEKHashMismatch is
// sim's TestAlertsFromFleetd, on the real API server). A journal line
// NetBox refuses is given up: FleetNetBoxWritesGivenUp fires; one NetBox
// did not answer for a while is written once it does, and fires nothing.
func TestAlertsOfOneFleetd(t *testing.T) {
	w := newMemWorld(t, "w-01", "w-02")
	tpm, err := attesttest.NewSoftTPM(nil)
	if err != nil {
		t.Fatal(err)
	}
	var status atomic.Int64 // what NetBox answers fleetd's journal writes; 0: as NetBox does
	w.answerJournalWrites(func() int { return int(status.Load()) })
	var notRunning, before, pending, delayed, refused, stopped string
	var at time.Time
	synctest.Test(t, func(t *testing.T) {
		d, audit := w.fleetd(t)
		notRunning = scrape(d)
		stop := runLoop(t, d)
		before = scrape(d)

		// A pending claim waits: no error.
		var console strings.Builder
		_, err := attest.Run(context.Background(), "https://fleetd.test/attest", tpm,
			attest.Machine{Serial: "SN-w-01", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}},
			&attest.ClientConfig{HTTPClient: memClient(d.Handler(), nodeAddr(0)+":40000"), Console: &console})
		if err != nil || !strings.Contains(console.String(), "attest: FAILED "+attest.PendingApproval.String()) {
			t.Fatalf("a pending claim: %v, console %q\n%s", err, console.String(), audit.String())
		}
		pending = scrape(d)
		flush(t, d)

		id := w.devices["w-02"].ID
		status.Store(http.StatusServiceUnavailable)
		d.Journal().Line(id, inventory.JournalInfo, "a line NetBox takes late")
		time.Sleep(10 * time.Second)
		status.Store(0)
		flush(t, d)
		delayed = scrape(d)

		status.Store(http.StatusBadRequest)
		d.Journal().Line(id, inventory.JournalInfo, "a line NetBox refuses")
		flush(t, d)
		refused = scrape(d)

		stop()
		stopped = scrape(d)
		at = time.Now()
	})
	noLeader := alerttest.Firing{Alert: "FleetNoProvisionLeader"}
	alerttest.Want(t, alertRules, "", notRunning, at, noLeader)
	alerttest.Want(t, alertRules, "", before, at)
	alerttest.Want(t, alertRules, before, pending, at)
	w.wantJournal(t, "w-02", "the delayed line taken, the refused one given up", "info: a line NetBox takes late")
	alerttest.Want(t, alertRules, pending, delayed, at)
	alerttest.Want(t, alertRules, pending, refused, at, alerttest.Firing{Alert: "FleetNetBoxWritesGivenUp"})
	alerttest.Want(t, alertRules, refused, stopped, at, noLeader)
}
