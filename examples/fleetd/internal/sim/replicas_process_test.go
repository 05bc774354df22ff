package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/provision"
)

// journalIndex is the NetBox journal read once: the lines of each device,
// oldest first.
type journalIndex struct {
	byDevice map[string][]string
}

func (pf *procFleet) journalIndex() journalIndex {
	pf.t.Helper()
	entries, err := pf.journal(pf.ctx)
	if err != nil {
		pf.t.Fatal(err)
	}
	ix := journalIndex{byDevice: map[string][]string{}}
	for _, e := range entries {
		ix.byDevice[e.Device] = append(ix.byDevice[e.Device], e.Text)
	}
	return ix
}

// count is how many of the device's lines start with prefix.
func (ix journalIndex) count(device, prefix string) int {
	n := 0
	for _, l := range ix.byDevice[device] {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// machinesCount is FLEET_REPLICAS_MACHINES, or def.
func machinesCount(tb testing.TB, def int) int {
	tb.Helper()
	v := os.Getenv("FLEET_REPLICAS_MACHINES")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("FLEET_REPLICAS_MACHINES=%q is not a positive number", v)
	}
	return n
}

// percentile is the p'th percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

var errNoLeader = errors.New("no replica leads")

// leaderOf waits for exactly one leader among the processes, and returns it.
func (pf *procFleet) leaderOf(limit time.Duration) (int, error) {
	var l []int
	err := eventually(pf.ctx, limit, func() (bool, error) {
		l = pf.leaders()
		return len(l) == 1, nil
	})
	if err != nil {
		return -1, fmt.Errorf("%w within %v: leaders %v", errNoLeader, limit, l)
	}
	return l[0], nil
}

// sortedNames is the fleet's machine names, sorted.
func (pf *procFleet) sortedNames() []string {
	names := make([]string, 0, len(pf.machines))
	for n := range pf.machines {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
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
// machine (FLEET_REPLICAS_MACHINES: 1,000 in CI, 100 when unset) boots at once, and the
// simulated Tinkerbell runs their Workflows. The leader is killed with
// SIGKILL twice: once a third of the machines have their code, and once a
// tenth have their config; each time it comes back once another replica
// leads, empty, as its StatefulSet's pod does. A machine whose config died
// with it asks in vain, and the
// test, as the operator, sets desired_action=provision as the runbook's
// FleetInstallConfigMissing row says; a machine whose attestation got no
// verdict is power-cycled. Then every machine ends active; no install code
// was answered twice; no config was served twice (each code's config came
// whole at most once, and a further fetch gets 410 or 404, once a loan
// the killed replica held is settled or lost); NetBox's
// journal lost nothing (every run a Workflow or a device names has its
// started line, every ended run its ended SUCCESS line, every served
// config its served line, each once, but the served line of a config the
// killed replica was answering as it died, which its node read whole
// through it just before); and
// a proof the replicas accepted, replayed to each of them, is refused
// with 409.
func TestIntegrationReplicas(t *testing.T) {
	t0 := time.Now()
	n := machinesCount(t, defaultReplicaMachines)
	pf := newProcFleet(t, procFleetConfig{replicas: 3}, stormNodes(t, n)...)
	ctx := pf.ctx
	t.Logf("%d machines, 3 fleetd processes ready in %v", n, time.Since(t0).Round(time.Millisecond))
	if _, err := pf.leaderOf(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	op, err := inventory.NewNetBox(pf.nbsrv.URL, pf.nbsrv.Token(userOperator), nil)
	if err != nil {
		t.Fatal(err)
	}

	names := pf.sortedNames()
	var mu sync.Mutex
	admittedAt := map[string]time.Time{}
	noVerdict := map[string]bool{}
	noCode := map[string]bool{} // passed, and got no code: the admission failed
	gaveUp := fmt.Sprintf("attest: try %d failed", attest.DefaultTries)
	for _, name := range names {
		pf.machines[name].say = func(who, _, text string) {
			switch {
			case text == "install code written":
				mu.Lock()
				if _, ok := admittedAt[who]; !ok {
					admittedAt[who] = time.Now()
				}
				mu.Unlock()
			case text == gaveUp:
				mu.Lock()
				noVerdict[who] = true
				mu.Unlock()
			case text == "attest: "+attest.ReasonAdmissionFailed:
				mu.Lock()
				noCode[who] = true
				mu.Unlock()
			}
		}
	}
	admitted := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(admittedAt)
	}
	writes0 := apiserverWrites(t, pf.env.Admin())
	pf.calls.reset()
	start := time.Now()
	pf.startTinkerbell()
	pf.powerOn(names...)

	served := func() int {
		pf.fetches.mu.Lock()
		defer pf.fetches.mu.Unlock()
		return len(pf.fetches.whole)
	}
	ended := func() int {
		n := 0
		for _, lines := range pf.journalIndex().byDevice {
			for _, line := range lines {
				if strings.Contains(line, " ended SUCCESS") {
					n++
				}
			}
		}
		return n
	}
	// killLeader kills the leader with SIGKILL once ready, waits for
	// another replica to lead and journal a run's end, and brings the
	// killed one back, with nothing in its memory, as its StatefulSet's
	// pod comes back.
	killLeader := func(when string) killAt {
		l := pf.leaders()
		if len(l) != 1 {
			t.Fatalf("replicas leading at the kill: %v, want one", l)
		}
		killed := pf.replicas[l[0]]
		atKill, endedAtKill := admitted(), ended()
		killed.sigkill(t)
		kill := killAt{replica: l[0], at: time.Now()}
		t.Logf("%v after the storm began, %s: SIGKILL %s, the leader, with %d of %d machines admitted, %d configs served and %d ended lines journaled",
			kill.at.Sub(start).Round(time.Millisecond), when, killed.name, atKill, n, served(), endedAtKill)
		var elected, resumed time.Time
		pf.waitFor("a new leader", time.Minute, func() bool {
			for _, p := range pf.replicas {
				if p != killed && p.leading(ctx) {
					elected = time.Now()
					return true
				}
			}
			return false
		})
		if endedAtKill >= n {
			// A small storm: every machine's run had ended before the
			// kill, and the new leader has none left to journal.
			t.Logf("failover: a new leader %v after the kill; every run had ended before it", elected.Sub(kill.at).Round(time.Millisecond))
			killed.start(t)
			return kill
		}
		pf.waitFor("the new leader's first ended line", 2*time.Minute, func() bool {
			if ended() > endedAtKill {
				resumed = time.Now()
				return true
			}
			time.Sleep(200 * time.Millisecond)
			return false
		})
		t.Logf("failover: a new leader %v after the kill; its first ended line journaled %v after the kill",
			elected.Sub(kill.at).Round(time.Millisecond), resumed.Sub(kill.at).Round(time.Millisecond))
		killed.start(t)
		return kill
	}
	// The leader dies twice: while machines are admitted, and while
	// machines fetch their configs.
	plan := []struct {
		when  string
		ready func() bool
	}{
		{"a third of the machines admitted", func() bool { return admitted() >= n/3 }},
		{"a tenth of the configs served", func() bool { return served() >= n/10 }},
	}
	var kills []killAt

	// The operator, from the start: a node that asks in vain for its
	// config gets a new run (FleetInstallConfigMissing), and so does a run
	// that never reported its first action, and a machine whose
	// attestation passed with no install code ("Read the attest.install
	// audit line, then set desired_action again"); a machine whose
	// attestation got no verdict (every try failed) is power-cycled.
	retried := map[string]string{} // node -> the run it was retried after
	var retries, cycles int
	allAdmitted := false
	deadline := time.Now().Add(time.Duration(n)*300*time.Millisecond + 5*time.Minute)
	for {
		if len(kills) < len(plan) && plan[len(kills)].ready() {
			kills = append(kills, killLeader(plan[len(kills)].when))
		}
		allAdmitted = allAdmitted || admitted() == n
		devs, err := pf.admin.Devices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var waiting []string
		for _, d := range devs {
			if d.Status != inventory.StatusActive {
				waiting = append(waiting, d.Name)
			}
		}
		if len(waiting) == 0 && allAdmitted && len(kills) == len(plan) {
			break
		}
		if time.Now().After(deadline) {
			ix := pf.journalIndex()
			for _, name := range waiting[:min(len(waiting), 5)] {
				m := pf.machines[name]
				res, attested, inHookOS, installed, fetched := m.state()
				t.Logf("%s: %+v; attested %v (%q), in HookOS %v, installed %v, fetched %d; journal:\n\t%s", name, deviceNamed(devs, name),
					attested, res.Reason, inHookOS, installed, fetched, strings.Join(ix.byDevice[name], "\n\t"))
			}
			t.Fatalf("after %v, %d of %d machines admitted, %d nodes not active (%v), %d of %d kills done",
				time.Since(start).Round(time.Second), admitted(), n, len(waiting), waiting[:min(len(waiting), 20)], len(kills), len(plan))
		}
		ix := pf.journalIndex()
		byName := map[string]inventory.Device{}
		for _, d := range devs {
			byName[d.Name] = d
		}
		for _, name := range waiting {
			mu.Lock()
			cycle, again := noVerdict[name], noCode[name]
			delete(noVerdict, name)
			delete(noCode, name)
			mu.Unlock()
			if cycle {
				cycles++
				pf.machines[name].powerCycle()
				continue
			}
			if again && byName[name].DesiredAction == "" {
				if err := op.SetDesiredAction(ctx, byName[name].ID, inventory.DesiredActionProvision); err != nil {
					t.Fatal(err)
				}
				retries++
				continue
			}
			run := byName[name].LastRun
			if run == "" || retried[name] == run || byName[name].DesiredAction != "" {
				continue
			}
			after := false
			for _, line := range ix.byDevice[name] {
				if strings.HasPrefix(line, "started Workflow "+run+";") {
					after = true
				}
				if after && (strings.Contains(line, "the node asked for its Talos config, and fleetd holds none for it") ||
					strings.Contains(line, "never reported its first action within its global timeout")) {
					if err := op.SetDesiredAction(ctx, byName[name].ID, inventory.DesiredActionProvision); err != nil {
						t.Fatal(err)
					}
					retried[name] = run
					retries++
					break
				}
			}
		}
		time.Sleep(time.Second)
	}
	active := time.Now()
	writes1 := apiserverWrites(t, pf.env.Admin())
	byRes, writes := fleetdWrites(writes0, writes1, pf.calls.reset())

	// Every node's last run ends journaled.
	devs, err := pf.admin.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pf.waitFor("every last run's ended line", time.Minute, func() bool {
		ix := pf.journalIndex()
		for _, d := range devs {
			if ix.count(d.Name, "Workflow "+d.LastRun+" ended SUCCESS") == 0 {
				return false
			}
		}
		return true
	})
	if err := pf.checkCodesAndConfigs(); err != nil {
		t.Error(err)
	}
	pf.checkJournal(devs, kills)

	// Each machine's first code, from the storm's start.
	var lat []time.Duration
	mu.Lock()
	for _, at := range admittedAt {
		lat = append(lat, at.Sub(start))
	}
	mu.Unlock()
	slices.Sort(lat)
	var admissions int
	for _, m := range pf.machines {
		m.mu.Lock()
		admissions += len(m.codes)
		m.mu.Unlock()
	}
	t.Logf("%d machines admitted %v after the storm began (p50 %v, p99 %v), all active after %v; %d admissions, %d runs retried by the operator, %d machines power-cycled, %d balancer dials refused",
		n, lat[len(lat)-1].Round(time.Millisecond), percentile(lat, 50).Round(time.Millisecond), percentile(lat, 99).Round(time.Millisecond),
		active.Sub(start).Round(time.Millisecond), admissions, retries, cycles, pf.lb.refused.Load())
	t.Logf("Kubernetes API writes of the fleetd processes: %.0f, %.2f per admission: %v", writes, writes/float64(admissions), byRes)

	// A proof the replicas accepted, replayed to each of them (the one
	// that was killed and came back included), is refused.
	m := pf.machines[names[0]]
	rec := &proofRecorder{next: m.client.Transport}
	res, err := attest.Run(ctx, pf.url+"/attest", m.tpm, m.claim(), &attest.ClientConfig{
		HTTPClient: &http.Client{Transport: rec, Timeout: 30 * time.Second}, Console: io.Discard,
	})
	if err != nil || res.Verdict != attest.Attested || len(rec.body) == 0 {
		t.Fatalf("%s attesting again: %+v, %v", m.name, res, err)
	}
	for _, p := range pf.replicas {
		rsp, err := pf.client.Post("https://"+p.addr+"/attest/proof", "application/json", bytes.NewReader(rec.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rsp.Body)
		rsp.Body.Close()
		if rsp.StatusCode != http.StatusConflict || res.InstallCode != "" && bytes.Contains(body, []byte(res.InstallCode)) {
			t.Errorf("the proof replayed to %s: %d %s; want 409 and no code", p.name, rsp.StatusCode, body)
		}
	}
	t.Logf("wall time %v", time.Since(t0).Round(time.Second))
}

// checkCodesAndConfigs checks that no install code was answered to two
// machines, or twice, and that no config was served twice: each code's
// config came whole at most once, and one more fetch of each code, from
// its machine's address, gets 410 or 404.
func (pf *procFleet) checkCodesAndConfigs() error {
	var errs []error
	owner := map[string]string{}
	for name, m := range pf.machines {
		m.mu.Lock()
		codes := slices.Clone(m.codes)
		m.mu.Unlock()
		for _, c := range codes {
			if o, ok := owner[c]; ok {
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

// deviceNamed returns the device named name among devs.
func deviceNamed(devs []inventory.Device, name string) inventory.Device {
	for _, d := range devs {
		if d.Name == name {
			return d
		}
	}
	return inventory.Device{}
}

// killAt is the SIGKILL of a replica: which one, and when it was dead.
type killAt struct {
	replica int
	at      time.Time
}

// servedLineWindow is how long before a SIGKILL a node may have read its
// config whole from the killed replica while that replica had not yet
// written the served line: the node's acknowledgement, then the status
// and the line, each a NetBox write of at most 5 s together
// (servedWriteTimeout in fleetd), and the queue's linger for a line
// NetBox refused at once.
const servedLineWindow = 6 * time.Second

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
	wfs, err := pf.tink.Resource(provision.WorkflowResource).Namespace(pf.settings.Namespace).List(pf.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range wfs.Items {
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
	for node, lines := range ix.byDevice {
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
		// its config.
		if why, ok := pf.servedAtKill(d.Name, kills); ok {
			t.Logf("a kill took %s's served line with it: %s", d.Name, why)
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
	m := pf.machines[node]
	m.mu.Lock()
	codes := slices.Clone(m.codes)
	m.mu.Unlock()
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
	n := machinesCount(b, 1000)
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
			b.Logf("%s: %d machines in %v, %.1f machines/s, p50 %v, p99 %v; %.2f Kubernetes writes per machine %v; fleetd CPU %.2f ms per machine; %d got no install code",
				k.name, n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), percentile(lat, 50).Round(time.Millisecond), percentile(lat, 99).Round(time.Millisecond),
				writes/float64(n), byRes, float64(cpu.Microseconds())/1000/float64(n), len(failed))
			b.ReportMetric(float64(n)/wall.Seconds(), k.name+"-machines/s")
			b.ReportMetric(float64(percentile(lat, 50).Milliseconds()), k.name+"-p50-ms")
			b.ReportMetric(float64(percentile(lat, 99).Milliseconds()), k.name+"-p99-ms")
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
