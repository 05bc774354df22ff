package sim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/provision"
)

// journalIndex is the NetBox journal read once: the lines of each device,
// oldest first.
type journalIndex map[string][]string

func (pf *procFleet) journalIndex() journalIndex {
	ix := journalIndex{}
	for _, e := range pf.journal() {
		ix[e.Device] = append(ix[e.Device], e.Text)
	}
	return ix
}

// count is how many of the device's lines start with prefix.
func (ix journalIndex) count(device, prefix string) int {
	n := 0
	for _, l := range ix[device] {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// envCount is the machine count the environment variable name sets, or
// def.
func envCount(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q is not a positive number", name, v)
	}
	return n
}

// reportPace reports a storm's pace, its machines' latencies lat
// (sorted) in wall: the metrics <kind>-machines/s, -p50-ms and -p99-ms.
// It returns them as a log says them.
func reportPace(b *testing.B, kind string, wall time.Duration, lat []time.Duration) string {
	n := float64(len(lat))
	b.ReportMetric(n/wall.Seconds(), kind+"-machines/s")
	b.ReportMetric(float64(percentile(lat, 50).Milliseconds()), kind+"-p50-ms")
	b.ReportMetric(float64(percentile(lat, 99).Milliseconds()), kind+"-p99-ms")
	return fmt.Sprintf("%d machines in %v, %.1f machines/s, p50 %v, p99 %v", len(lat), wall.Round(time.Millisecond), n/wall.Seconds(),
		percentile(lat, 50).Round(time.Millisecond), percentile(lat, 99).Round(time.Millisecond))
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// leaderOf waits for exactly one leader among the processes, and returns it.
func (pf *procFleet) leaderOf(limit time.Duration) (int, error) {
	var l []int
	err := eventually(pf.ctx, limit, func() (bool, error) {
		l = pf.leaders()
		return len(l) == 1, nil
	})
	if err != nil {
		return -1, fmt.Errorf("no replica leads within %v: leaders %v", limit, l)
	}
	return l[0], nil
}

// defaultReplicaMachines is TestIntegrationReplicas's machine count when
// FLEET_REPLICAS_MACHINES sets none: a storm that fits beside every other
// package of a plain `go test ./...` within go test's 10 minutes on two
// cores. scripts/test (CI) runs it with 1,000.
const defaultReplicaMachines = 100

// TestIntegrationReplicas: three fleetd processes, built with go build,
// on the real kube-apiserver and NetBox (netboxtest), behind one balancer
// that spreads connections round-robin over them, so that a machine's
// claim, proof and config fetch each may reach another replica. Every
// machine (FLEET_REPLICAS_MACHINES: 1,000 in CI, 100 when unset) boots at
// once, and the simulated Tinkerbell runs their Workflows. The leader is
// killed with SIGKILL twice: once a third of the machines have their code,
// and once a tenth have their config; each time it comes back once another
// replica leads, empty, as its StatefulSet's pod does. The storm and its
// checks are runStorm's (faults_test.go): every machine ends active, no
// code or config twice, every journal line once, nothing left behind.
func TestIntegrationReplicas(t *testing.T) {
	runStorm(t, stormConfig{machines: envCount(t, "FLEET_REPLICAS_MACHINES", defaultReplicaMachines), faults: leaderKills})
}

// checkCodesAndConfigs checks that no install code was answered to two
// machines, and that no config was served twice: each code's config came
// whole at most once, and one more fetch of each code, from its machine's
// address, gets 410 or 404. A machine may be answered its run's code in
// more than one boot: power-cycled while the run waits for it (as the
// storm's operator does when the journal says the device lacks its MAC),
// it attests again and gets the code of the run it started ("run ...
// waits for the machine").
func (pf *procFleet) checkCodesAndConfigs() error {
	var errs []error
	owner := map[string]string{}
	for name, m := range pf.machines {
		for _, c := range m.receivedCodes() {
			if o, ok := owner[c]; ok && o != name {
				errs = append(errs, fmt.Errorf("an install code was answered to %s and to %s", o, name))
			}
			owner[c] = name
		}
	}
	pf.fetches.mu.Lock()
	for c, n := range pf.fetches.whole {
		if n > 1 {
			errs = append(errs, fmt.Errorf("%s's config was served whole %d times under one code", owner[c], n))
		}
	}
	pf.fetches.mu.Unlock()
	var wg sync.WaitGroup
	var emu sync.Mutex
	sem := make(chan struct{}, 32)
	for c, name := range owner {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			status, err := furtherFetch(pf.ctx, pf.machines[name].client, pf.url+configserve.PathPrefix+c)
			if err != nil || status != http.StatusGone && status != http.StatusNotFound {
				emu.Lock()
				errs = append(errs, fmt.Errorf("a further fetch of %s's config: %d, %v; want 410 or 404", name, status, err))
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// furtherFetch fetches a config that was served, or that a killed replica
// was answering, as a node that asks again does: told to try again (503),
// it does, every second, until the loan a killed borrower held is lost
// (the lender waits configserve.DefaultLoanGrace past the write timeout
// for its outcome, then drops the config). It returns the last answer.
func furtherFetch(ctx context.Context, c *http.Client, url string) (int, error) {
	deadline := time.Now().Add(configserve.DefaultWriteTimeout + configserve.DefaultLoanGrace + 10*time.Second)
	for {
		status, _, err := fetch(ctx, c, url)
		if err != nil || status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return status, err
		}
		time.Sleep(time.Second)
	}
}

// killAt is the SIGKILL of a replica: which one, and when it was dead.
type killAt struct {
	replica int
	at      time.Time
}

// servedLineWindow is how long before a SIGKILL a node may have read its
// config whole from the killed replica while that replica held the served
// line in memory alone (daemon.ServedLineHeld: the write at once, and,
// when NetBox under the storm did not answer it in time, the settle before
// the queue writes it), with a second for the node's acknowledgement and
// the queue's try to reach NetBox.
const servedLineWindow = daemon.ServedLineHeld + time.Second

// checkJournal checks that NetBox's journal lost nothing, and repeated
// nothing: every run a Workflow or a device's last_run names has one
// started line; every ended run has its started line, and one ended line;
// every served config one served line, the last run's included, but a
// config whose answer the killed replica was finishing when it died: the
// node read it whole through a connection to that replica at most
// servedLineWindow before the kill.
func (pf *procFleet) checkJournal(devs []inventory.Device, kills []killAt) {
	t := pf.t
	t.Helper()
	ix := pf.journalIndex()
	runs := map[string]string{} // run -> node
	for _, d := range devs {
		runs[d.LastRun] = d.Name
	}
	for _, u := range pf.list(provision.WorkflowResource) {
		run := u.GetName()
		node := strings.TrimPrefix(run[:strings.LastIndexByte(run, '-')], "provision-")
		runs[run] = node
	}
	var missing, twice []string
	for run, node := range runs {
		if n := ix.count(node, "started Workflow "+run+";"); n != 1 {
			missing = append(missing, fmt.Sprintf("%s: %d started lines", run, n))
		}
	}
	for node, lines := range ix {
		seen := map[string]int{}
		for _, l := range lines {
			for _, p := range []string{"fleetd served the config of ", "Workflow "} {
				if rest, ok := strings.CutPrefix(l, p); ok {
					run, _, _ := strings.Cut(rest, " ")
					if p == "Workflow " && !strings.HasPrefix(rest, run+" ended ") {
						continue
					}
					seen[p+run]++
					if ix.count(node, "started Workflow "+run+";") != 1 {
						missing = append(missing, fmt.Sprintf("%s: %q, but no one started line", run, l))
					}
				}
			}
		}
		for k, n := range seen {
			if n > 1 {
				twice = append(twice, fmt.Sprintf("%s: %q %d times", node, k, n))
			}
		}
	}
	for _, d := range devs {
		if ix.count(d.Name, "fleetd served the config of "+d.LastRun) == 1 {
			continue
		}
		// A replica killed between the node's acknowledgement and NetBox's
		// answer to its writes takes the line with it, while the node has
		// its config: its node registers, and the leader takes the device
		// active with a line of its own.
		if why, ok := pf.servedAtKill(d.Name, kills); ok {
			registered := fmt.Sprintf("%s registered in the cluster while NetBox showed it planned: a fleetd served the config of %s", d.Name, d.LastRun)
			if ix.count(d.Name, registered) != 1 {
				missing = append(missing, fmt.Sprintf("%s: neither the served line of %s (%s) nor one registered line", d.Name, d.LastRun, why))
				continue
			}
			t.Logf("a kill took %s's served line with it (%s); the leader found the node registered", d.Name, why)
			continue
		}
		missing = append(missing, fmt.Sprintf("%s: the served line of its last run %s", d.Name, d.LastRun))
	}
	slices.Sort(missing)
	slices.Sort(twice)
	if len(missing) > 0 {
		t.Errorf("NetBox's journal lost %d lines: %v", len(missing), missing[:min(len(missing), 20)])
	}
	if len(twice) > 0 {
		t.Errorf("NetBox's journal repeated %d lines: %v", len(twice), twice[:min(len(twice), 20)])
	}
}

// servedAtKill reports whether node's last whole config came through a
// connection to the killed replica at most servedLineWindow before it was
// dead, and says when.
func (pf *procFleet) servedAtKill(node string, kills []killAt) (string, bool) {
	codes := pf.machines[node].receivedCodes()
	pf.fetches.mu.Lock()
	var last wholeFetch
	for _, c := range codes {
		if f, ok := pf.fetches.last[c]; ok && f.at.After(last.at) {
			last = f
		}
	}
	pf.fetches.mu.Unlock()
	if last.at.IsZero() {
		return "", false
	}
	replica, ok := pf.lb.route(last.from)
	for _, kill := range kills {
		before := kill.at.Sub(last.at)
		if ok && replica == kill.replica && before <= servedLineWindow && before >= -time.Second {
			return fmt.Sprintf("it read its config whole from %s %v before it was dead", pf.replicas[replica].name, before.Round(time.Millisecond)), true
		}
	}
	return "", false
}

// BenchmarkFleetdReplicas: FLEET_REPLICAS_MACHINES machines (default
// 1,000) attest at once, attest to install code, through the balancer, to
// fleetd built with go build and run as processes on the test binary's
// kube-apiserver and an in-process NetBox: one fleetd alone, one replica
// (spent sessions as Leases, the loop under the Lease), and three
// replicas, one after another in each round, each fleet stopped before the
// next starts. Metrics carry the prefix alone-, replicas-1- or replicas-3-:
// machines/s, p50 and p99 of each machine's attest to code, the Kubernetes
// API writes per machine (kube-apiserver's own count, less the test
// process's), and the fleetd processes' CPU per machine. A machine that
// gets no code fails the benchmark after its round's figures are logged.
func BenchmarkFleetdReplicas(b *testing.B) {
	n := envCount(b, "FLEET_REPLICAS_MACHINES", 1000)
	bin := buildFleetd(b, b.TempDir())
	kinds := []struct {
		name string
		pc   procFleetConfig
	}{
		{"alone", procFleetConfig{replicas: 1, alone: true, bin: bin}},
		{"replicas-1", procFleetConfig{replicas: 1, bin: bin}},
		{"replicas-3", procFleetConfig{replicas: 3, bin: bin}},
	}
	for b.Loop() {
		for _, k := range kinds {
			b.StopTimer()
			pf := newProcFleet(b, k.pc, stormNodes(b, n)...)
			if !k.pc.alone {
				if _, err := pf.leaderOf(30 * time.Second); err != nil {
					b.Fatal(err)
				}
			}
			writes0 := apiserverWrites(b, pf.env.Admin())
			pf.calls.reset()
			cpu0 := childCPU(b)["fleetd"]
			b.StartTimer()
			t0 := time.Now()
			lat, failed := stormAll(pf.testFleet)
			wall := time.Since(t0)
			b.StopTimer()
			cpu := childCPU(b)["fleetd"] - cpu0
			byRes, writes := fleetdWrites(writes0, apiserverWrites(b, pf.env.Admin()), pf.calls.reset())
			b.Logf("%s: %s; %.2f Kubernetes writes per machine %v; fleetd CPU %.2f ms per machine; %d got no install code",
				k.name, reportPace(b, k.name, wall, lat), writes/float64(n), byRes, float64(cpu.Microseconds())/1000/float64(n), len(failed))
			b.ReportMetric(writes/float64(n), k.name+"-kube-writes/machine")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), k.name+"-fleetd-cpu-ms/machine")
			if len(failed) > 0 {
				b.Errorf("%s: %d machines got no install code; the first: %s", k.name, len(failed), failed[0])
			}
			pf.close()
			b.StartTimer()
		}
	}
}
