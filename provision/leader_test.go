package provision

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/inventory"
)

// fakeLeases is a Leases client of client-go's fakes whose every call
// asks hook first, which may answer an error in its place: a replica whose
// writes the server refuses or never answers.
func fakeLeases(hook func(verb string) error) coordinationclient.LeasesGetter {
	cs := kubefake.NewClientset()
	cs.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		err := hook(a.GetVerb())
		return err != nil, nil, err
	})
	return cs.CoordinationV1()
}

var errCut = errors.New("the replica is cut off")

// replica is one of several Provisioners over one NetBox and cluster, as
// fleetd's replicas are, running RunLeader.
type replica struct {
	id   string
	p    *Provisioner
	stop context.CancelFunc
	done chan struct{} // closed when RunLeader returned err
	err  error
	cut  atomic.Bool // cut off the API server, as a replica that died or lost its network looks to the others
}

// schedLag measures, until stop, how late at most a goroutine that sleeps
// 10 ms wakes: the delay a loaded machine adds to every timer and every
// goroutine of the test, the leader electors' included.
func schedLag() (stop func() time.Duration) {
	var worst atomic.Int64
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			t0 := time.Now()
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if late := int64(time.Since(t0) - 10*time.Millisecond); late > worst.Load() {
				worst.Store(late)
			}
		}
	}()
	return func() time.Duration {
		close(done)
		<-ended
		return time.Duration(worst.Load())
	}
}

// leaderEvents records who started and stopped leading, in order.
type leaderEvents struct {
	mu  sync.Mutex
	got []leaderEvent
}

type leaderEvent struct {
	id      string
	leading bool
	at      time.Time
}

func (e *leaderEvents) add(id string, leading bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, leaderEvent{id, leading, time.Now()})
}

// leaders returns the replicas that lead now, by the events so far, and
// when the last of them started.
func (e *leaderEvents) leaders() ([]string, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var now []string
	var since time.Time
	for _, ev := range e.got {
		if ev.leading {
			now, since = append(now, ev.id), ev.at
		} else {
			now = slices.DeleteFunc(now, func(id string) bool { return id == ev.id })
		}
	}
	return now, since
}

// waitLeader waits until exactly one replica other than not leads, and
// returns it with the time it started.
func waitLeader(t *testing.T, e *leaderEvents, within time.Duration, not string) (string, time.Time) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if l, at := e.leaders(); len(l) == 1 && l[0] != not {
			return l[0], at
		}
		time.Sleep(20 * time.Millisecond)
	}
	l, _ := e.leaders()
	t.Fatalf("no single new leader within %v: leading %v", within, l)
	return "", time.Time{}
}

// Three replicas elect one leader on a real Lease; only its loop runs (an
// ended run is journaled once); it hands the Lease on when it stops, and a
// replica cut off from the API server stops its loop within RenewDeadline
// and is replaced after LeaseDuration. Each new leader takes up the runs
// another replica started.
func TestAPIServerLeaderElection(t *testing.T) {
	h := newRealHarness(t, func(_ *Cluster, c *Config) { c.Interval = 100 * time.Millisecond },
		worker(1, "node-01"), worker(2, "node-02"), worker(3, "node-03"))
	// A renewal may take the kube-apiserver up to renew to answer: on a
	// loaded machine one took over a second, which a shorter deadline
	// turns into a lost Lease.
	const lease, renew, retry = 4 * time.Second, 3 * time.Second, 200 * time.Millisecond
	events := &leaderEvents{}
	replicas := map[string]*replica{}
	for _, id := range []string{"fleetd-0", "fleetd-1", "fleetd-2"} {
		p := h.another(nil)
		r := &replica{id: id, p: p, done: make(chan struct{})}
		ctx, stop := context.WithCancel(context.Background())
		r.stop = stop
		leases := kubetest.Clientset(t, hookedConfig(t, func(req *http.Request, send http.RoundTripper) (*http.Response, error) {
			if r.cut.Load() {
				return nil, errCut
			}
			return send.RoundTrip(req)
		})).CoordinationV1()
		go func() {
			defer close(r.done)
			r.err = p.RunLeader(ctx, Leader{
				Leases: leases, Identity: id,
				LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
				Elected: func(leading bool) { events.add(id, leading) },
			})
		}()
		replicas[id] = r
		t.Cleanup(func() { stop(); <-r.done })
	}
	first, _ := waitLeader(t, events, 10*time.Second, "")
	time.Sleep(3 * lease)
	if l, _ := events.leaders(); !slices.Equal(l, []string{first}) {
		t.Fatalf("leading after %v: %v, want %s alone", 3*lease, l, first)
	}

	// A machine attests at another replica; the leader's loop journals its
	// run's end, once.
	other := "fleetd-1"
	if first == other {
		other = "fleetd-2"
	}
	endRun := func(admitAt *replica, id int64) string {
		t.Helper()
		d, err := admitAt.p.Admit(context.Background(), claimOf(h.nb.dev(id)))
		if err != nil || d.Run == "" {
			t.Fatalf("Admit at %s = %+v, %v", admitAt.id, d, err)
		}
		h.setStatus(d.Run, func(s *tinkerbell.WorkflowStatus) { s.State = tinkerbell.WorkflowStateSuccess })
		line := "Workflow " + d.Run + " ended SUCCESS"
		journaled := func() int { // id's success lines that begin with line
			return len(slices.DeleteFunc(h.nb.lines(), func(l journalLine) bool {
				return l.ID != id || l.Kind != inventory.JournalSuccess || !strings.HasPrefix(l.Text, line)
			}))
		}
		testenv.WaitFor(t, 10*time.Second, "line "+line, func() bool { return journaled() != 0 })
		time.Sleep(5 * 100 * time.Millisecond) // five more passes of every loop that runs
		if n := journaled(); n != 1 {
			t.Fatalf("%q journaled %d times, want once", line, n)
		}
		return d.Run
	}
	endRun(replicas[other], 1)

	// The leader stops (a rollout): its loop stops, and it hands the Lease
	// on at once. Each bound on a time below allows for how late the
	// machine ran the test's goroutines meanwhile (lag).
	stopped := time.Now()
	lag := schedLag()
	replicas[first].stop()
	<-replicas[first].done
	if err := replicas[first].err; !errors.Is(err, context.Canceled) {
		t.Errorf("RunLeader after its context ended: %v", err)
	}
	// It handed the Lease back: no replica holds it, or already another.
	if l, err := h.kubeAPI.CoordinationV1().Leases(h.ns).Get(context.Background(), DefaultLeaseName, metav1.GetOptions{}); err != nil || l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == first {
		t.Errorf("the Lease after %s stopped: %v; want it handed back, not held by %s still", first, err, first)
	}
	second, at := waitLeader(t, events, 3*lease, first)
	handover := at.Sub(stopped)
	if late := lag(); handover >= lease+late {
		t.Errorf("the Lease went on %v after the leader stopped, want within LeaseDuration %v (goroutines ran up to %v late)", handover, lease, late)
	}
	endRun(replicas[other], 2)

	// The new leader is cut off from the API server: it stops its loop
	// within RenewDeadline, and the last replica leads after LeaseDuration.
	cut := time.Now()
	lag = schedLag()
	replicas[second].cut.Store(true)
	third, at := waitLeader(t, events, 3*lease, second)
	failover := at.Sub(cut)
	late := lag()
	var stoppedAt time.Time
	events.mu.Lock()
	for _, ev := range events.got {
		if ev.id == second && !ev.leading && ev.at.After(cut) {
			stoppedAt = ev.at
		}
	}
	events.mu.Unlock()
	if stoppedAt.IsZero() || stoppedAt.Sub(cut) > renew+2*retry+late || !stoppedAt.Before(at) {
		t.Errorf("the cut-off leader stopped its loop at %v after the cut (the next leader at %v), want within RenewDeadline %v and before the next leader (goroutines ran up to %v late)", stoppedAt.Sub(cut), failover, renew, late)
	}
	if failover < lease-renew || failover > lease+renew+retry*5+late {
		t.Errorf("failover took %v, want about LeaseDuration %v (goroutines ran up to %v late)", failover, lease, late)
	}
	if third == first {
		t.Fatalf("the stopped replica %s leads again", first)
	}
	endRun(replicas[third], 3)
	t.Logf("handover on stop %v; failover after a cut %v (the cut-off leader stopped after %v)", handover.Round(time.Millisecond), failover.Round(time.Millisecond), stoppedAt.Sub(cut).Round(time.Millisecond))
}

func TestRunLeaderNeedsIdentity(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.p.RunLeader(context.Background(), Leader{}); !errors.Is(err, ErrNoIdentity) {
		t.Errorf("RunLeader without an identity: %v, want ErrNoIdentity", err)
	}
}

// Two replicas start a run of one device at once (each holds only its own
// lock): at once (b's run, rendered first, finds its name taken) and a
// second apart (b's run, named for an earlier second, is created after
// a's):
// the later run gives way, its start failed with ErrRunRaced and nothing
// of it left, and the machine's next attestation at that replica gets the
// earlier run's code from the replica that holds it.
func TestAPIServerRacedRunGivesWay(t *testing.T) {
	for _, apart := range []bool{false, true} {
		t.Run(fmt.Sprint("apart=", apart), func(t *testing.T) {
			dev := worker(1, "node-01")
			h := newRealHarness(t, func(_ *Cluster, c *Config) { c.Shared = true }, dev)
			ctx := context.Background()
			a := h.p
			var aRun Decision
			// Another replica starts a run of the same device just before b's
			// first Workflow create.
			var once sync.Once
			tink := kubetest.Dynamic(t, hookedConfig(t, func(r *http.Request, send http.RoundTripper) (*http.Response, error) {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/workflows") {
					once.Do(func() {
						if apart {
							// b rendered its run in this second: a's is named
							// for the next, and created first.
							sleepPast(fmt.Sprintf("provision-node-01-%d", time.Now().Unix()))
						}
						var err error
						if aRun, err = a.Admit(ctx, claimOf(dev)); err != nil || aRun.Run == "" {
							t.Errorf("the other replica's Admit = %+v, %v", aRun, err)
						}
					})
				}
				return send.RoundTrip(r)
			}))
			b := h.another(func(d *Deps, c *Config) {
				d.Tink = tink
				c.PeerCode = func(_ context.Context, run string) (string, bool) { return a.HeldCode(run) }
			})
			if d, err := b.Admit(ctx, claimOf(dev)); !errors.Is(err, ErrRunRaced) || d.Code != "" {
				t.Fatalf("Admit racing another replica's = %+v, %v; want ErrRunRaced and no code", d, err)
			}
			if names := h.runNames(); !slices.Equal(names, []string{aRun.Run}) {
				t.Fatalf("Workflows after the race: %v, want %s alone", names, aRun.Run)
			}
			if n := len(h.secrets()); n != 1 {
				t.Errorf("%d bootstrap token Secrets, want the earlier run's alone", n)
			}
			d, err := b.Admit(ctx, claimOf(dev))
			if err != nil || d.Run != aRun.Run || d.Code != aRun.Code {
				t.Errorf("the machine's next attestation = %+v, %v; want run %s's code", d, err, aRun.Run)
			}
		})
	}
}

// A Lease lost right after it is won, round after round: Elected(true)
// and Elected(false) alternate, each loss after its win, and RunLeader
// ends not leading. (client-go starts the leader's callback in a goroutine
// of its own, which may run after the election it began with ended.) The
// test runs until the third loss, not for a set time, so a loaded machine
// only makes it slower.
func TestLeaseLostRightAfterWon(t *testing.T) {
	h := newHarness(t, nil)
	var mu sync.Mutex
	var events []bool
	losses := 0
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// This replica may take the Lease whenever it expired (a create, or an
	// update at least every LeaseDuration apart), and every renewal is
	// refused: it wins the Lease and loses it again at once.
	const every = 60 * time.Millisecond
	var last time.Time // the last write let through
	flaky := func(verb string) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case verb == "update" && time.Since(last) < every:
			return errCut
		case verb != "get":
			last = time.Now()
		}
		return nil
	}
	err := h.p.RunLeader(ctx, Leader{
		Leases:        fakeLeases(flaky),
		Identity:      "fleetd-0",
		LeaseDuration: 60 * time.Millisecond, RenewDeadline: 40 * time.Millisecond, RetryPeriod: 10 * time.Millisecond,
		Elected: func(on bool) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, on)
			if !on {
				if losses++; losses == 3 {
					cancel()
				}
			}
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("RunLeader = %v, want the context's error after the third loss", err)
	}
	mu.Lock()
	defer mu.Unlock()
	wins := 0
	leading := false
	for i, on := range events {
		if on == leading { // elected while leading, or a loss while not leading
			t.Fatalf("event %d: elected %v while leading %v: %v", i, on, leading, events)
		}
		if on {
			wins++
		}
		leading = on
	}
	if leading {
		t.Errorf("RunLeader ended leading: %v", events)
	}
	if wins < 3 {
		t.Errorf("%d wins before the test's 2 minutes ran out, want rounds of won-and-lost: %v", wins, events)
	}
}

// A leader whose renewals stop answering (frozen, or its network stalled)
// stops acting once its last renewal is RenewDeadline old, though its
// leading context lives on: another replica may hold the Lease by then.
// desired_action set after that starts no run from it.
func TestLeaderStopsActingPastRenewDeadline(t *testing.T) {
	dev := attested(worker(1, "node-01"))
	h := newHarness(t, func(_ *Cluster, c *Config) { c.Interval = 20 * time.Millisecond }, dev)
	// Updates answer until hang is closed, then never again (as the API
	// server looks to a replica whose process was frozen, or whose network
	// stalled, while it thought it led).
	hang, release := make(chan struct{}), make(chan struct{})
	hanging := func(verb string) error {
		select {
		case <-hang:
			if verb == "update" {
				<-release // whatever the context says, until the test ends
				return errCut
			}
		default:
		}
		return nil
	}
	elected := make(chan bool, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- h.p.RunLeader(ctx, Leader{
			Leases: fakeLeases(hanging), Identity: "fleetd-0",
			LeaseDuration: 600 * time.Millisecond, RenewDeadline: 400 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
			Elected: func(on bool) { elected <- on },
		})
	}()
	if on := <-elected; !on {
		t.Fatal("not elected")
	}
	time.Sleep(300 * time.Millisecond)
	close(hang)
	time.Sleep(600 * time.Millisecond) // past RenewDeadline since the last renewal
	h.nb.set(1, func(d *inventory.Device) { d.DesiredAction = inventory.DesiredActionProvision })
	time.Sleep(300 * time.Millisecond) // 15 intervals
	if n := h.count(WorkflowResource); n != 0 {
		t.Errorf("%d runs started by a leader whose Lease it last renewed over RenewDeadline ago, want none", n)
	}
	cancel()
	close(release)
	<-done
}
