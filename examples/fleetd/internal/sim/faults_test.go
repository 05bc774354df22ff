package sim

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/spentlease"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
	"github.com/fleetkit/fleet/provision"
)

// The storm and the fault matrix.
//
// runStorm runs a storm of machines against three fleetd processes (as
// TestIntegrationReplicas does) and strikes its faults during it, one
// after another, each when the storm's progress says so. The test plays
// the operator throughout, as the runbook says (power-cycle a machine
// whose attestation got no verdict; set desired_action=provision for a
// node whose config fleetd holds none of, whose run never reported, or
// whose attestation passed with no code). Then one checker asserts the
// invariants every fault must leave standing (checkStorm):
//
//   - every machine is active;
//   - no install code was answered to two machines; no config was served
//     whole twice, and a further fetch gets 410 or 404;
//   - every run a Workflow or a device names has one started line; every
//     ended run one ended line; every served config one served line, but
//     that of a config a killed replica was answering as it died, whose
//     node then registered and was taken active with its own line;
//   - no Workflow is left not ended, and the nodes' cluster holds no
//     bootstrap token but a device's last run's (with a control plane of
//     the storm's own);
//   - the spent attestation sessions' Leases are no more than the proofs
//     accepted, each with its expiry, which the leader collects 5 minutes
//     after it;
//   - no run's Workflow was deleted while its machine ran its actions
//     (nothing wiped without its run);
//   - a proof the replicas accepted, replayed to each of them, is refused
//     without a code (409; 410 at a replica whose clock runs ahead).
//
// Each fault's record (when it struck, how long, time to recover, what was
// retried) is logged, and BENCHMARKS.md and SECURITY.md keep the table.

// A stormFault strikes once during a storm.
type stormFault struct {
	name string
	// ready says, from the storm's progress, when it strikes.
	ready func(s *stormRun) bool
	// strike does the fault and undoes it, and returns what happened. It
	// runs beside the operator, on a goroutine of its own (report errors
	// with t.Errorf), unless sync: then the operator waits for it.
	strike func(s *stormRun) faultRecord
	sync   bool
}

// faultRecord is what a fault did.
type faultRecord struct {
	fault     string
	struck    time.Duration // after the storm began
	lasted    time.Duration
	recovered time.Duration // from its end to the storm's next progress; 0: none was left to make
	note      string
}

// stormConfig says how a storm runs.
type stormConfig struct {
	machines int
	faults   []stormFault
	fleet    procFleetConfig // replicas 3 unless set
}

// storm is one storm's state, shared by its operator, its faults and its
// checks.
type stormRun struct {
	t     *testing.T
	pf    *procFleet
	n     int
	start time.Time

	mu         sync.Mutex
	admittedAt map[string]time.Time
	noVerdict  map[string]bool
	noCode     map[string]bool
	kills      []killAt
	records    []faultRecord
}

func (s *stormRun) admitted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.admittedAt)
}

func (s *stormRun) served() int {
	s.pf.fetches.mu.Lock()
	defer s.pf.fetches.mu.Unlock()
	return len(s.pf.fetches.whole)
}

func (s *stormRun) ended() int {
	n := 0
	for _, lines := range s.pf.journalIndex() {
		for _, line := range lines {
			if strings.Contains(line, " ended SUCCESS") {
				n++
			}
		}
	}
	return n
}

// progress counts what the storm has done: codes, configs, ended runs.
func (s *stormRun) progress() int { return s.admitted() + s.served() + s.ended() }

func (s *stormRun) since() time.Duration { return time.Since(s.start).Round(time.Millisecond) }

// recovery waits, after a fault ended, for the storm's next progress (up
// to 3 minutes), and returns how long it took; 0 when every machine was
// active already.
func (s *stormRun) recovery(from time.Time) time.Duration {
	before := s.progress()
	if s.allActive() {
		return 0
	}
	deadline := from.Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if s.progress() > before {
			return time.Since(from).Round(time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Errorf("no progress within 3 minutes of the fault's end")
	return time.Since(from).Round(time.Millisecond)
}

func (s *stormRun) allActive() bool {
	devs, err := s.pf.admin.Devices(s.pf.ctx)
	return err == nil && !slices.ContainsFunc(devs, func(d inventory.Device) bool { return d.Status != inventory.StatusActive })
}

// stormStall is how long a storm may make no progress (a code answered, a
// config served, a run ended, a node active, a fault done) before it
// fails: well past the longest fault and the operator's longest wait.
const stormStall = 4 * time.Minute

// observerTimeout bounds each request of the test's own NetBox clients (the
// one that applies the nodes and reads the devices, and the operator's).
// They read 1,000 devices and their interfaces from a NetBox busy with the
// storm, which on a loaded machine takes past inventory's 10 s default for
// one list; they watch fleet, and are not what the storm measures.
const observerTimeout = time.Minute

// runStorm runs a storm of cfg.machines machines against three fleetd
// processes, strikes cfg.faults, and checks the invariants (see above).
func runStorm(t *testing.T, cfg stormConfig) *stormRun {
	t0 := time.Now()
	n := cfg.machines
	pc := cfg.fleet
	if pc.replicas == 0 {
		pc.replicas = 3
	}
	pf := newProcFleet(t, pc, stormNodes(t, n)...)
	ctx := pf.ctx
	t.Logf("%d machines, %d fleetd processes ready in %v", n, pc.replicas, time.Since(t0).Round(time.Millisecond))
	if _, err := pf.leaderOf(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	op, err := inventory.NewNetBox(pf.nbsrv.URL, pf.nbsrv.Token(userOperator), &inventory.NetBoxConfig{Timeout: observerTimeout})
	if err != nil {
		t.Fatal(err)
	}
	s := &stormRun{t: t, pf: pf, n: n, admittedAt: map[string]time.Time{}, noVerdict: map[string]bool{}, noCode: map[string]bool{}}
	names := pf.sortedNames()
	gaveUp := fmt.Sprintf("attest: try %d failed", attest.DefaultTries)
	for _, name := range names {
		pf.machines[name].say = func(who, _, text string) {
			s.mu.Lock()
			defer s.mu.Unlock()
			switch {
			case text == "install code written":
				if _, ok := s.admittedAt[who]; !ok {
					s.admittedAt[who] = time.Now()
				}
			case text == gaveUp:
				s.noVerdict[who] = true
			case text == "attest: "+attest.ReasonAdmissionFailed,
				// A replica that read the device while another replaced
				// its run (the old Workflow deleted, the new one not yet
				// created) finds no run, and last_run naming the old one:
				// the runbook's row "The audit line says no provision".
				strings.HasPrefix(text, "attest: no provision: last run "):
				s.noCode[who] = true
			}
		}
	}
	writes0 := apiserverWrites(t, pf.env.Admin())
	pf.calls.reset()
	s.start = time.Now()
	pf.startTinkerbell()
	pf.powerOn(names...)

	// The operator, from the start: a node that asks in vain for its
	// config gets a new run (FleetInstallConfigMissing), and so does a run
	// that never reported its first action, and a machine whose
	// attestation passed with no install code ("Read the attest.install
	// audit line, then set desired_action again") or was told its last
	// run is not repeated ("The audit line says no provision"); a machine whose
	// attestation got no verdict (every try failed) is power-cycled.
	retried := map[string]string{} // node -> the run it was retried after
	portLines := map[string]int{}  // node -> the journal lines it was power-cycled for
	var retries, cycles int
	allAdmitted := false
	struck := 0
	var faults sync.WaitGroup
	// The storm fails when it stops moving, not at a time: on a loaded
	// machine it moves slower, and one stuck machine stops it anyway. It
	// says how far it got every two minutes, and fails with the same
	// report as a stall a minute before go test's -timeout would end the
	// binary without one.
	lastProgress, movedAt, readAt, saidAt := -1, time.Now(), time.Now(), time.Now()
	deadline, hasDeadline := t.Deadline()
	for {
		if struck < len(cfg.faults) && cfg.faults[struck].ready(s) {
			f := cfg.faults[struck]
			struck++
			run := func() {
				rec := f.strike(s)
				rec.fault = f.name
				s.mu.Lock()
				s.records = append(s.records, rec)
				s.mu.Unlock()
			}
			if f.sync {
				run()
			} else {
				faults.Go(run)
			}
		}
		allAdmitted = allAdmitted || s.admitted() == n
		devs, err := pf.admin.Devices(ctx)
		if err != nil {
			// A read the loaded NetBox did not answer is tried again; the
			// storm fails when nothing moves, below, or nothing is read.
			if time.Since(readAt) > stormStall {
				t.Fatalf("no read of NetBox's devices for %v: %v", stormStall, err)
			}
			t.Logf("reading NetBox's devices, tried again: %v", err)
			time.Sleep(time.Second)
			continue
		}
		readAt = time.Now()
		var waiting []string
		byName := map[string]inventory.Device{}
		for _, d := range devs {
			byName[d.Name] = d
			if d.Status != inventory.StatusActive {
				waiting = append(waiting, d.Name)
			}
		}
		s.mu.Lock()
		recorded := len(s.records)
		s.mu.Unlock()
		if len(waiting) == 0 && allAdmitted && recorded == len(cfg.faults) {
			break
		}
		if p := s.progress() + n - len(waiting) + recorded; p != lastProgress {
			lastProgress, movedAt = p, time.Now()
		}
		if time.Since(saidAt) > 2*time.Minute {
			saidAt = time.Now()
			t.Logf("%v after the storm began: %d of %d machines admitted, %d nodes not active, %d of %d faults done",
				time.Since(s.start).Round(time.Second), s.admitted(), n, len(waiting), recorded, len(cfg.faults))
		}
		ix := pf.journalIndex()
		stalled := time.Since(movedAt) > stormStall
		if stalled || hasDeadline && time.Until(deadline) < time.Minute {
			for _, name := range waiting[:min(len(waiting), 5)] {
				m := pf.machines[name]
				res, attested, inHookOS, installed, fetched := m.state()
				m.mu.Lock()
				answers := map[int]int{}
				for _, st := range m.statuses {
					answers[st]++
				}
				codes := len(m.codes)
				m.mu.Unlock()
				d := byName[name]
				// One line each: a CI excerpt keeps whole lines.
				t.Logf("%s: attested %v (%q), %d codes, in HookOS %v, installed %v, fetched %d, its config fetches answered %v; device %s, desired_action %q, last run %s; journal: %s", name,
					attested, res.Reason, codes, inHookOS, installed, fetched, answers, d.Status, d.DesiredAction, d.LastRun, strings.Join(ix[name], " | "))
			}
			if len(waiting) > 0 {
				for _, l := range pf.logLines(waiting[0], 40) {
					t.Logf("%s", l)
				}
			}
			why := fmt.Sprintf("no progress for %v", stormStall)
			if !stalled {
				why = fmt.Sprintf("go test's -timeout ends the test in %v, though it still moves", time.Until(deadline).Round(time.Second))
			}
			t.Fatalf("%s, %v after the storm began: %d of %d machines admitted, %d nodes not active (%v), %d of %d faults done",
				why, time.Since(s.start).Round(time.Second), s.admitted(), n, len(waiting), waiting[:min(len(waiting), 20)], recorded, len(cfg.faults))
		}
		for _, name := range waiting {
			s.mu.Lock()
			cycle, again := s.noVerdict[name], s.noCode[name]
			delete(s.noVerdict, name)
			// The operator sets desired_action again once it is clear:
			// until then the line waits (the admission that cleared it
			// may still be writing).
			if again && byName[name].DesiredAction == "" {
				delete(s.noCode, name)
			}
			s.mu.Unlock()
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
			// The journal says the run waits for what only an attestation
			// records: "recorded no attested switch port", or the device
			// "lacks MAC" (the attestation passed while NetBox took none
			// of it); power-cycle the machine, so that it attests again.
			if n := ix.count(name, "refused a run before rendering anything: recorded no attested switch port") +
				ix.count(name, name+" lacks MAC"); n > portLines[name] {
				portLines[name] = n
				cycles++
				pf.machines[name].powerCycle()
				continue
			}
			// The runbook's rows for a last run whose config is missing,
			// that never reported, or that ended FAILED or TIMEOUT (as a
			// wipe refused for a code whose answer a fault took): set
			// desired_action to provision, once a run.
			run := byName[name].LastRun
			if run == "" || retried[name] == run || byName[name].DesiredAction != "" {
				continue
			}
			after := false
			for _, line := range ix[name] {
				if strings.HasPrefix(line, "started Workflow "+run+";") {
					after = true
				}
				if after && (strings.Contains(line, "the node asked for its Talos config, and fleetd holds none for it") ||
					strings.Contains(line, "never reported its first action within its global timeout") ||
					strings.HasPrefix(line, "Workflow "+run+" ended FAILED") || strings.HasPrefix(line, "Workflow "+run+" ended TIMEOUT")) {
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
	faults.Wait()
	active := time.Now()
	writes1 := apiserverWrites(t, pf.env.Admin())
	own := pf.calls.reset()
	byRes, writes := fleetdWrites(writes0, writes1, own)

	// Every node's last run ends journaled. The lines come from the
	// leader's loop through a loaded NetBox: the wait lasts while they
	// come, and fails when none has come for stormStall.
	devs, err := pf.admin.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lastRun := map[string]string{}
	for _, d := range devs {
		lastRun[d.Name] = d.LastRun
	}
	lacking := func() []string {
		ix := pf.journalIndex()
		var names []string
		for name, run := range lastRun {
			if ix.count(name, "Workflow "+run+" ended SUCCESS") == 0 {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names
	}
	for left, movedAt := lacking(), time.Now(); len(left) > 0; {
		if time.Since(movedAt) > stormStall {
			ix := pf.journalIndex()
			for _, name := range left[:min(len(left), 5)] {
				t.Logf("%s: last run %s; journal: %s", name, lastRun[name], strings.Join(ix[name], " | "))
			}
			t.Fatalf("every last run's ended line: none more for %v, %d nodes lack theirs: %v", stormStall, len(left), left[:min(len(left), 20)])
		}
		time.Sleep(time.Second)
		if now := lacking(); len(now) < len(left) {
			left, movedAt = now, time.Now()
		}
	}
	s.check(devs)

	// Each machine's first code, from the storm's start.
	var lat []time.Duration
	s.mu.Lock()
	for _, at := range s.admittedAt {
		lat = append(lat, at.Sub(s.start))
	}
	s.mu.Unlock()
	slices.Sort(lat)
	var admissions, attestRetries, fetchRetries int
	for _, m := range pf.machines {
		m.mu.Lock()
		admissions += len(m.codes)
		attestRetries += m.retried
		for _, st := range m.statuses {
			if st == http.StatusServiceUnavailable {
				fetchRetries++
			}
		}
		m.mu.Unlock()
	}
	t.Logf("%d machines admitted %v after the storm began (p50 %v, p99 %v), all active after %v; %d admissions, %d runs retried by the operator, %d machines power-cycled, %d attestation requests and %d config fetches tried again, %d balancer dials refused",
		n, lat[len(lat)-1].Round(time.Millisecond), percentile(lat, 50).Round(time.Millisecond), percentile(lat, 99).Round(time.Millisecond),
		active.Sub(s.start).Round(time.Millisecond), admissions, retries, cycles, attestRetries, fetchRetries, pf.lb.refused.Load())
	t.Logf("Kubernetes API writes of the fleetd processes: %.0f, %.2f per admission: %v", writes, writes/float64(admissions), byRes)
	t.Logf("Kubernetes API requests of the test process (the simulated Tinkerbell, the operator): %v", own)
	for _, r := range s.records {
		t.Logf("fault %q: struck %v after the storm began, lasted %v, progress again %v after it ended; %s", r.fault, r.struck, r.lasted, r.recovered, r.note)
	}
	t.Logf("wall time %v", time.Since(t0).Round(time.Second))
	return s
}

// check asserts the invariants every storm must leave standing (see the
// top of this file), on devs as they stand at the end.
func (s *stormRun) check(devs []inventory.Device) {
	t, pf := s.t, s.pf
	t.Helper()
	if err := pf.checkCodesAndConfigs(); err != nil {
		t.Error(err)
	}
	pf.checkJournal(devs, s.kills)

	// Nothing left behind: every Workflow ended; with a control plane of
	// the storm's own, every bootstrap token its device's last run's.
	lastToken := map[string]bool{}
	last := map[string]bool{}
	for _, d := range devs {
		last[d.LastRun] = true
	}
	var open []string
	for _, u := range pf.list(provision.WorkflowResource) {
		state, _, _ := unstructured.NestedString(u.Object, "status", "state")
		switch state {
		case "SUCCESS", "FAILED", "TIMEOUT":
		default:
			open = append(open, u.GetName()+" "+state)
		}
		if last[u.GetName()] {
			lastToken[u.GetAnnotations()["fleet.fleetkit.dev/bootstrap-token"]] = true
		}
	}
	if len(open) > 0 {
		t.Errorf("%d Workflows left not ended: %v", len(open), open[:min(len(open), 10)])
	}
	if pf.ownControlPlane {
		secrets, err := pf.env.Admin().CoreV1().Secrets("kube-system").List(pf.ctx, metav1.ListOptions{LabelSelector: provision.LabelManagedBy + "=fleet"})
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, sec := range secrets.Items {
			if sec.Type == corev1.SecretType("bootstrap.kubernetes.io/token") && !lastToken[sec.Name] {
				left = append(left, sec.Name+" of "+sec.Annotations["fleet.fleetkit.dev/run"])
			}
		}
		if len(left) > 0 {
			t.Errorf("%d bootstrap tokens left of runs that are no device's last: %v", len(left), left[:min(len(left), 10)])
		}
	}

	// The spent sessions' Leases: one per accepted proof at most, each
	// with its expiry, so that the leader collects it.
	leases, err := pf.env.Admin().CoordinationV1().Leases(pf.settings.Namespace).List(pf.ctx, metav1.ListOptions{LabelSelector: spentlease.LabelSpent + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	proofs := 0 // proofs sent: each boot's attestation, and its tries again
	for _, m := range pf.machines {
		m.mu.Lock()
		proofs += m.boots + m.retried
		m.mu.Unlock()
	}
	for _, l := range leases.Items {
		if l.Spec.AcquireTime == nil || l.Spec.LeaseDurationSeconds == nil {
			t.Errorf("spent session Lease %s has no expiry", l.Name)
			break
		}
	}
	if len(leases.Items) > proofs+1 {
		t.Errorf("%d spent-session Leases for %d attestations sent (and one replayed proof)", len(leases.Items), proofs)
	}

	// Nothing wiped without its run.
	pf.sim.mu.Lock()
	mid := slices.Clone(pf.sim.deletedMidRun)
	pf.sim.mu.Unlock()
	if len(mid) > 0 {
		t.Errorf("%d runs deleted while their machines ran their actions: %v", len(mid), mid[:min(len(mid), 10)])
	}

	// A proof the replicas accepted, replayed to each of them (one killed
	// and back included), is refused.
	name := pf.sortedNames()[0]
	res, proof := pf.attestAt(name, pf.url)
	if res.Verdict != attest.Attested || len(proof) == 0 {
		t.Fatalf("%s attesting again: %+v", name, res)
	}
	pf.wantReplayRefused(proof, res.InstallCode, true)
}

// killLeader kills the leader with SIGKILL, waits for another replica to
// lead and, while runs remain to end, to journal a run's end, and brings
// the killed one back, with nothing in its memory, as its StatefulSet's pod
// comes back.
func (s *stormRun) killLeader(when string) faultRecord {
	t, pf := s.t, s.pf
	// A Lease may change hands, and a busy replica's scrape time out.
	leader, err := pf.leaderOf(time.Minute)
	if err != nil {
		t.Fatalf("at the kill: %v", err)
	}
	killed := pf.replicas[leader]
	atKill, endedAtKill := s.admitted(), s.ended()
	killed.sigkill(t)
	kill := killAt{replica: leader, at: time.Now()}
	s.mu.Lock()
	s.kills = append(s.kills, kill)
	s.mu.Unlock()
	rec := faultRecord{struck: s.since()}
	t.Logf("%v after the storm began, %s: SIGKILL %s, the leader, with %d of %d machines admitted, %d configs served and %d ended lines journaled",
		rec.struck, when, killed.name, atKill, s.n, s.served(), endedAtKill)
	// Like the storm, the waits fail when nothing moves for stormStall,
	// not at a time a loaded machine may pass.
	var elected, resumed time.Time
	pf.waitFor("a new leader", stormStall, func() bool {
		for _, p := range pf.replicas {
			if p != killed && p.leading(pf.ctx) {
				elected = time.Now()
				return true
			}
		}
		return false
	})
	rec.note = fmt.Sprintf("%s killed %s; a new leader %v after", killed.name, when, elected.Sub(kill.at).Round(time.Millisecond))
	if endedAtKill < s.n {
		pf.waitFor("the new leader's first ended line", stormStall, func() bool {
			if s.ended() > endedAtKill {
				resumed = time.Now()
				return true
			}
			time.Sleep(200 * time.Millisecond)
			return false
		})
		rec.note += fmt.Sprintf(", its first ended line %v after", resumed.Sub(kill.at).Round(time.Millisecond))
	}
	killed.start(t)
	rec.lasted = time.Since(kill.at).Round(time.Millisecond)
	rec.recovered = elected.Sub(kill.at).Round(time.Millisecond)
	return rec
}

// The storm's progress marks, at which faults strike.
func aThirdAdmitted(s *stormRun) bool { return s.admitted() >= s.n/3 }
func aTenthAdmitted(s *stormRun) bool { return s.admitted() >= s.n/10 }
func aTenthServed(s *stormRun) bool   { return s.served() >= s.n/10 }

// leaderKills: the leader dies twice, while machines are admitted and
// while they fetch their configs.
var leaderKills = []stormFault{
	{name: "the leader killed (a third admitted)", ready: aThirdAdmitted, sync: true,
		strike: func(s *stormRun) faultRecord { return s.killLeader("a third of the machines admitted") }},
	{name: "the leader killed (a tenth served)", ready: aTenthServed, sync: true,
		strike: func(s *stormRun) faultRecord { return s.killLeader("a tenth of the configs served") }},
}

// down strikes: f starts the fault, then after d undo ends it.
func (s *stormRun) down(d time.Duration, f, undo func() error) faultRecord {
	rec := faultRecord{struck: s.since()}
	at := time.Now()
	if err := f(); err != nil {
		s.t.Errorf("the fault: %v", err)
	}
	time.Sleep(d)
	if err := undo(); err != nil {
		s.t.Errorf("undoing the fault: %v", err)
	}
	end := time.Now()
	rec.lasted = end.Sub(at).Round(time.Millisecond)
	rec.recovered = s.recovery(end)
	return rec
}

// restarted strikes: the control plane's process c killed, and
// restarted 10 s later.
func restarted(c kubetest.Component) func(s *stormRun) faultRecord {
	return func(s *stormRun) faultRecord {
		return s.down(10*time.Second, func() error { return s.pf.env.Kill(c) }, func() error { return s.pf.env.Restart(s.pf.ctx, c) })
	}
}

// faultMatrix is each fault but the leader's kill (TestIntegrationReplicas
// has it), as TestIntegrationFaults runs them, one per storm.
var faultMatrix = []struct {
	name  string
	fleet procFleetConfig
	fault stormFault
}{
	{"apiserver", procFleetConfig{own: true}, stormFault{name: "kube-apiserver killed, and restarted 10 s later", ready: aTenthAdmitted,
		strike: restarted(kubetest.APIServer)}},
	{"etcd", procFleetConfig{own: true}, stormFault{name: "etcd killed, and restarted 10 s later", ready: aTenthAdmitted,
		strike: restarted(kubetest.Etcd)}},
	{"netbox", procFleetConfig{own: true}, stormFault{name: "NetBox answers fleetd 503 for 20 s, then takes 2 s per request for 20 s", ready: aTenthAdmitted,
		strike: func(s *stormRun) faultRecord {
			nb := s.pf.nbsrv
			rec := s.down(20*time.Second,
				func() error { nb.Inject(netboxtest.Fault{Kind: netboxtest.Failing, User: userFleetd}); return nil },
				func() error {
					nb.Inject(netboxtest.Fault{Kind: netboxtest.Slow, Delay: 2 * time.Second, User: userFleetd})
					return nil
				})
			time.Sleep(20 * time.Second)
			nb.Inject(netboxtest.Fault{})
			rec.lasted += 20 * time.Second
			rec.recovered = s.recovery(time.Now())
			return rec
		}}},
	{"freeze", procFleetConfig{own: true}, stormFault{name: "the leader frozen (SIGSTOP) past its Lease, 25 s, then SIGCONT", ready: aThirdAdmitted,
		strike: func(s *stormRun) faultRecord {
			l, err := s.pf.leaderOf(time.Minute)
			if err != nil {
				s.t.Errorf("at the freeze: %v", err)
				return faultRecord{struck: s.since()}
			}
			p := s.pf.replicas[l]
			rec := s.down(provision.DefaultLeaseDuration+10*time.Second,
				func() error { p.freeze(s.t); return nil },
				func() error { p.thaw(s.t); return nil })
			rec.note = p.name + " frozen"
			return rec
		}}},
	{"partition", procFleetConfig{own: true, cuttable: true}, stormFault{name: "a replica's peers' network cut for 20 s", ready: aTenthServed,
		strike: func(s *stormRun) faultRecord {
			rec := s.down(20*time.Second,
				func() error { s.pf.links.cut(1, true); return nil },
				func() error { s.pf.links.cut(1, false); return nil })
			rec.note = "fleetd-1 cut off from the other replicas, and they from it"
			return rec
		}}},
	{"clock", procFleetConfig{own: true, skewed: 2}, stormFault{name: "a replica's clock 2 minutes ahead, the whole storm", ready: func(*stormRun) bool { return true },
		strike: func(s *stormRun) faultRecord {
			return faultRecord{struck: 0, lasted: s.since(), note: "fleetd-1 built with its wall clock " + clockSkew.String() + " ahead"}
		}}},
}

// faultMachines is the fault matrix's machine count when
// FLEET_FAULT_MACHINES sets none.
const faultMachines = 200

// TestIntegrationFaults runs the storm once per fault of faultMatrix
// (FLEET_FAULT_MACHINES machines each, 200 unset), each on a control plane
// of its own, and checks the storm's invariants after each; -run
// 'TestIntegrationFaults/^netbox$' runs one. It runs when FLEET_FAULTS=1
// (scripts/test sets it; one to three minutes per fault): a plain go test
// ./... leaves it out.
func TestIntegrationFaults(t *testing.T) {
	if os.Getenv("FLEET_FAULTS") != "1" {
		t.Skip("the fault matrix runs with FLEET_FAULTS=1 (scripts/test sets it), one storm per fault, about 10 minutes in all")
	}
	n := envCount(t, "FLEET_FAULT_MACHINES", faultMachines)
	for _, f := range faultMatrix {
		t.Run(f.name, func(t *testing.T) {
			runStorm(t, stormConfig{machines: n, fleet: f.fleet, faults: []stormFault{f.fault}})
		})
	}
}
