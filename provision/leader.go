package provision

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of a Leader.
const (
	DefaultLeaseName     = "fleet-provision"
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Leader is the Lease that elects the one replica whose loop runs, when
// several replicas of one Provisioner's composer share a cluster. Each
// replica admits machines; only the leader runs the loop (RunLeader).
type Leader struct {
	// Leases reaches the Lease: a clientset's CoordinationV1(). It needs
	// leases get, create and update on Name in Config.Namespace.
	Leases coordinationclient.LeasesGetter
	// Name is the Lease's name. "": DefaultLeaseName.
	Name string
	// Identity names this replica in the Lease (e.g. its pod's name). It
	// must differ between replicas; required.
	Identity string
	// LeaseDuration is how long the others wait, after the leader last
	// renewed the Lease, before one takes it: the longest a replica that
	// died unannounced leaves the loop unrun. RenewDeadline is how long
	// the leader goes on trying to renew before it stops its loop, and
	// RetryPeriod how often each replica tries. Zero: the Default values.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Elected, when set, is called with true when this replica starts
	// leading (before its loop's first pass) and false when it stops.
	Elected func(leading bool)
}

// ErrNoIdentity is RunLeader's error for a Leader without an Identity.
var ErrNoIdentity = errors.New("provision: a leader election needs this replica's identity")

// RunLeader runs the loop (Run) while this replica holds l's Lease, until
// ctx is done, and returns ctx's error. A replica that loses the Lease
// (it could not renew it within RenewDeadline) stops its loop at once, and
// then tries to win it again. A new leader's first pass reads every run
// from the cluster, as after a restart: nothing the loop needs lives in
// one replica. When ctx ends while this replica leads, its loop stops
// first, and then it hands the Lease back, so that another replica leads
// within RetryPeriod rather than LeaseDuration; a replica that dies
// unannounced is replaced after LeaseDuration.
func (p *Provisioner) RunLeader(ctx context.Context, l Leader) error {
	if l.Identity == "" {
		return ErrNoIdentity
	}
	if l.Leases == nil {
		return errors.New("provision: a leader election needs a Leases client")
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: p.cfg.Namespace, Name: cmpOr(l.Name, DefaultLeaseName)},
		Client:     l.Leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.Identity},
	}
	var leading atomic.Bool
	elected := func(on bool) {
		leading.Store(on)
		if l.Elected != nil {
			l.Elected(on)
		}
	}
	// A follower runs no loop, but forgets the codes of its runs that
	// ended, as the loop's passes do, though less often: each time costs a
	// list of every run, and the codes only take memory.
	var follow sync.WaitGroup
	defer follow.Wait()
	follow.Go(func() { p.pruneWhile(ctx, func() bool { return !leading.Load() }) })
	// client-go calls OnStartedLeading in a goroutine of its own, which
	// may run after the election it began with has already ended (the
	// Lease lost right after it was won). It only hands the leading
	// context over; the loop runs here, after the election's Run
	// returned or while it runs, so that Elected(true) never follows
	// Elected(false), and no loop outlives its round.
	leads := make(chan context.Context, 1)
	leaseDuration, renewDeadline := cmpOr(l.LeaseDuration, DefaultLeaseDuration), cmpOr(l.RenewDeadline, DefaultRenewDeadline)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		Name:          lock.LeaseMeta.Name,
		LeaseDuration: leaseDuration,
		RenewDeadline: renewDeadline,
		RetryPeriod:   cmpOr(l.RetryPeriod, DefaultRetryPeriod),
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lead context.Context) { leads <- lead },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("provision: leader election: %w", err)
	}
	for ctx.Err() == nil {
		round := make(chan struct{})
		go func() {
			defer close(round)
			le.Run(ctx)
		}()
		led := false
		select {
		case lead := <-leads:
			// Still the leader while the Lease, as this replica last
			// renewed it, is younger than RenewDeadline: a replica frozen
			// (or cut off) past it may have lost the Lease to another
			// without knowing yet, and does not act on what it read.
			stillLeads := func() bool { return le.IsLeader() && le.Check(renewDeadline-leaseDuration) == nil }
			led = p.lead(lead, l.Identity, elected, stillLeads)
			<-round
		case <-round:
			// The election ended; a lead handed over meanwhile ended
			// with it, and is not taken up.
			select {
			case <-leads:
			default:
			}
		}
		if led || lockHeldBy(lock, l.Identity) {
			elected(false)
			p.log.Info("fleet.leader", "identity", l.Identity, "leading", false)
			if ctx.Err() != nil {
				release(lock, l.Identity)
			}
		}
	}
	return ctx.Err()
}

// lead runs the loop while lead, a won election's context, lasts, and
// reports whether it ran (false: the election had ended already).
func (p *Provisioner) lead(lead context.Context, identity string, elected func(bool), stillLeads func() bool) bool {
	if lead.Err() != nil {
		return false
	}
	elected(true)
	p.log.Info("fleet.leader", "identity", identity, "leading", true)
	if err := p.run(lead, stillLeads); err != nil && !errors.Is(err, context.Canceled) {
		p.log.Warn("fleet.leader", "identity", identity, "error", err.Error())
	}
	return true
}

// followerPrune is the least time between a follower's prunes.
const followerPrune = time.Minute

// pruneWhile forgets, every Config.Interval but at most once a minute
// while cond holds, the install codes of runs that ended or were deleted,
// until ctx ends.
func (p *Provisioner) pruneWhile(ctx context.Context, cond func() bool) {
	t := time.NewTicker(max(p.cfg.Interval, followerPrune))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !cond() {
			continue
		}
		mark := p.codeMark()
		if runs, err := p.listRuns(ctx); err == nil {
			p.pruneCodes(mark, runs)
		}
	}
}

// lockHeldBy reports whether the Lease, as last read or written, names
// identity.
func lockHeldBy(lock *resourcelock.LeaseLock, identity string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	return err == nil && rec.HolderIdentity == identity
}

// release hands the Lease back when identity still holds it: another
// replica takes it at its next try.
func release(lock *resourcelock.LeaseLock, identity string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	if err != nil || rec.HolderIdentity != identity {
		return
	}
	now := metav1.NewTime(time.Now())
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions:    rec.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	})
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
