// Package spentlease keeps an attestation server's spent sessions in
// Kubernetes, as Leases, so that every replica of a server that shares a
// SealingKey refuses a proof that any of them accepted
// (attest.SpentSessions).
//
// A spent session is one Lease, named by a hash of the session id, created
// when the session is spent: the API server's create is the one atomic
// test-and-set every replica shares. A create that finds the Lease there
// means the session was spent before. The Lease holds the session's expiry
// (acquireTime plus leaseDurationSeconds) and the replica that spent it
// (holderIdentity); it carries the label LabelSpent. After the expiry the
// attestation server refuses the session as expired without asking, so
// Collect deletes expired Leases: one replica (the leader) runs it now and
// then.
//
// The Leases need, in their namespace: leases create (Spend), and leases
// list and delete (Collect).
package spentlease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// LabelSpent marks the Leases of spent sessions; its value is "true".
const LabelSpent = "attest.fleetkit.dev/spent-session"

// Grace is how long Collect keeps a Lease after its session expired, so
// that replicas whose clocks disagree by less than Grace never find a
// session forgotten while their own clock still calls it live.
const Grace = 5 * time.Minute

// namePrefix begins every spent session's Lease name.
const namePrefix = "attest-spent-"

// A Store is an attest.SpentSessions on Leases of one namespace. It is safe
// for concurrent use.
type Store struct {
	leases coordinationclient.LeaseInterface
	holder string
}

// New returns a Store that keeps spent sessions as Leases in namespace,
// through leases (a clientset's CoordinationV1()). holder names this
// replica in the Leases it creates (e.g. the pod's name); "" leaves it out.
func New(leases coordinationclient.LeasesGetter, namespace, holder string) (*Store, error) {
	if leases == nil || namespace == "" {
		return nil, errors.New("spentlease: a Leases client and a namespace are required")
	}
	return &Store{leases: leases.Leases(namespace), holder: holder}, nil
}

// Name is the name of the Lease of session id: a hash of the id, so that
// any id names a valid object and the id itself is not listed.
func Name(id string) string {
	sum := sha256.Sum256([]byte(id))
	return namePrefix + hex.EncodeToString(sum[:20])
}

// Spend records that session id finished and reports whether no replica
// had recorded it before. An error (the API server unreachable, or the
// create refused) leaves the session unspent: the caller refuses the
// proof (attest answers 503) rather than accept it twice.
func (s *Store) Spend(ctx context.Context, id string, expires time.Time) (bool, error) {
	now := metav1.NowMicro()
	secs := int32(math.Min(math.Ceil(expires.Sub(now.Time).Seconds()), math.MaxInt32))
	secs = max(secs, 1)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: Name(id), Labels: map[string]string{LabelSpent: "true"}},
		Spec:       coordinationv1.LeaseSpec{AcquireTime: &now, LeaseDurationSeconds: &secs},
	}
	if s.holder != "" {
		l.Spec.HolderIdentity = &s.holder
	}
	_, err := s.leases.Create(ctx, l, metav1.CreateOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsAlreadyExists(err):
		return false, nil
	}
	return false, fmt.Errorf("spentlease: spend session: %w", err)
}

// Collect deletes the Leases of sessions that expired more than Grace
// before now, and returns how many it deleted. A Lease that changed since it was listed is
// left for the next Collect.
func (s *Store) Collect(ctx context.Context, now time.Time) (int, error) {
	var deleted int
	opts := metav1.ListOptions{LabelSelector: LabelSpent + "=true", Limit: 500}
	for {
		list, err := s.leases.List(ctx, opts)
		if err != nil {
			return deleted, fmt.Errorf("spentlease: list spent sessions: %w", err)
		}
		for i := range list.Items {
			l := &list.Items[i]
			if !Expired(l, now.Add(-Grace)) {
				continue
			}
			err := s.leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
			switch {
			case err == nil:
				deleted++
			case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			default:
				return deleted, fmt.Errorf("spentlease: delete spent session %s: %w", l.Name, err)
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return deleted, nil
		}
	}
}

// Expired reports whether the session of l expired before now. A Lease
// without an acquireTime or a duration has expired.
func Expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.AcquireTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(l.Spec.AcquireTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}
