package spentlease_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/attest/spentlease"
	"github.com/fleetkit/fleet/internal/deptest"
	"github.com/fleetkit/fleet/internal/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }

func TestDeps(t *testing.T) {
	// Only client-go's typed Leases client: no Tinkerbell, Talos or NetBox.
	deptest.Check(t, "github.com/fleetkit/fleet/attest/spentlease", []string{
		"github.com/siderolabs", "github.com/tinkerbell", "github.com/netbox-community",
		"k8s.io/client-go/dynamic", "github.com/fleetkit/fleet/provision", "github.com/fleetkit/fleet/inventory",
	})
}

// replicas are n Stores on one namespace of the test API server, as n
// fleetd replicas make them.
func replicas(t testing.TB, n int) (kubernetes.Interface, string, []*spentlease.Store) {
	t.Helper()
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	cs := kubetest.Clientset(t, env.Config())
	var stores []*spentlease.Store
	for i := range n {
		s, err := spentlease.New(cs.CoordinationV1(), ns, fmt.Sprintf("fleetd-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	return cs, ns, stores
}

// A session is spent once across replicas, however many of them try it at
// once.
func TestSpendOnceAcrossReplicas(t *testing.T) {
	cs, ns, stores := replicas(t, 3)
	ctx := context.Background()
	expires := time.Now().Add(time.Minute)
	var fresh atomic.Int32
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			ok, err := stores[i%3].Spend(ctx, "session-1", expires)
			if err != nil {
				t.Error(err)
			}
			if ok {
				fresh.Add(1)
			}
		})
	}
	wg.Wait()
	if n := fresh.Load(); n != 1 {
		t.Fatalf("30 spends of one session across 3 replicas: %d fresh, want 1", n)
	}
	if ok, err := stores[0].Spend(ctx, "session-2", expires); !ok || err != nil {
		t.Errorf("another session: fresh %v, %v; want fresh", ok, err)
	}
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, spentlease.Name("session-1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Labels[spentlease.LabelSpent] != "true" || l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, "fleetd-") {
		t.Errorf("Lease %s: labels %v, holder %v", l.Name, l.Labels, l.Spec.HolderIdentity)
	}
	if end := l.Spec.AcquireTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second); end.Before(expires) || end.After(expires.Add(2*time.Second)) {
		t.Errorf("Lease ends %v, want the session's expiry %v (rounded up to a second)", end, expires)
	}
	if strings.Contains(l.Name, "session") {
		t.Errorf("Lease name %q holds the session id", l.Name)
	}
}

// Collect deletes only Leases whose session expired more than Grace ago,
// and the API server unreachable is an error, not a fresh session.
func TestCollect(t *testing.T) {
	cs, ns, stores := replicas(t, 2)
	ctx := context.Background()
	now := time.Now()
	for i, exp := range []time.Time{now.Add(time.Second), now.Add(time.Hour)} {
		if ok, err := stores[i].Spend(ctx, fmt.Sprint("s", i), exp); !ok || err != nil {
			t.Fatalf("Spend s%d: %v, %v", i, ok, err)
		}
	}
	if n, err := stores[1].Collect(ctx, now.Add(time.Minute)); n != 0 || err != nil {
		t.Errorf("Collect within Grace of s0's expiry: %d, %v; want 0", n, err)
	}
	if n, err := stores[1].Collect(ctx, now.Add(spentlease.Grace+time.Minute)); n != 1 || err != nil {
		t.Errorf("Collect after s0's expiry and Grace: %d, %v; want 1", n, err)
	}
	l, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != spentlease.Name("s1") {
		t.Fatalf("Leases after Collect: %v, %v; want s1's only", l, err)
	}
	if ok, err := stores[0].Spend(ctx, "s1", now.Add(time.Hour)); ok || err != nil {
		t.Errorf("s1 after Collect: fresh %v, %v; want spent", ok, err)
	}

	down, err := kubernetes.NewForConfig(kubetest.Start(t).ConfigFor("no-such-token"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := spentlease.New(down.CoordinationV1(), ns, "")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Spend(ctx, "s2", now.Add(time.Hour)); ok || err == nil {
		t.Errorf("Spend refused by the API server: %v, %v; want an error and not fresh", ok, err)
	}
}

// BenchmarkSpend: the latency one attestation gains from its spent session
// on the test API server: one Lease create per op, from one goroutine and
// from 8 at once.
func BenchmarkSpend(b *testing.B) {
	_, _, stores := replicas(b, 1)
	s := stores[0]
	ctx := context.Background()
	expires := time.Now().Add(time.Minute)
	var n atomic.Int64
	spend := func(b *testing.B) {
		ok, err := s.Spend(ctx, fmt.Sprint("session-", n.Add(1)), expires)
		if !ok || err != nil {
			b.Errorf("Spend: %v, %v", ok, err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			spend(b)
		}
	})
	b.Run("parallel8", func(b *testing.B) {
		b.SetParallelism(4) // 4 x GOMAXPROCS=2
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				spend(b)
			}
		})
	})
}

// A software TPM floods two replicas with proofs under serials no entry
// names (any TPM proves its own EKs): 1,000 proofs leave no Lease, since
// only a proof whose verdict can admit is recorded, and at most 64
// waiting claims from its address. The replicas share a SealingKey and a
// Store each on the same Leases: a machine whose entry approves its TPM
// is admitted once and spends one Lease. (Its proof replayed to each
// replica gets 409: fleetd's TestReplicas.)
func TestUnknownSerialFloodLeavesNoLeases(t *testing.T) {
	cs, ns, stores := replicas(t, 2)
	flood, tpm := attesttest.MakeSoftTPM(t, nil), attesttest.MakeSoftTPM(t, nil)
	binding := attesttest.Approved(t, tpm)
	var admitted atomic.Int32
	var urls []string
	var clients []*http.Client
	var servers []*attest.Server
	for _, store := range stores {
		bindings := &attesttest.Bindings{}
		bindings.Set("S1", binding)
		srv, err := attest.NewServer(bindings, &attest.Config{SealingKey: bytes.Repeat([]byte{7}, 32), Spent: store,
			Admit: func(context.Context, attest.Claim) (attest.Admission, error) {
				admitted.Add(1)
				return attest.Admission{InstallCode: "code-1"}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewTLSServer(srv)
		t.Cleanup(ts.Close)
		urls, clients, servers = append(urls, ts.URL), append(clients, ts.Client()), append(servers, srv)
	}
	const n = 1000
	var wg sync.WaitGroup
	var verdicts sync.Map
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := attest.Run(context.Background(), urls[i%2], flood, attest.Machine{Serial: fmt.Sprintf("FLOOD-%04d", i), MAC: []byte{2, 0, 0, 0, 0, 2}},
				&attest.ClientConfig{HTTPClient: clients[i%2], Console: io.Discard})
			if err != nil && res.Verdict == 0 {
				t.Errorf("flood proof %d: %v", i, err)
				return
			}
			v, _ := verdicts.LoadOrStore(res.Verdict, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
		})
	}
	wg.Wait()
	pending, _ := verdicts.Load(attest.PendingApproval)
	if pending == nil || pending.(*atomic.Int32).Load() != n {
		t.Errorf("flood verdicts: want %d pending-approval", n)
	}
	countLeases := func() int {
		t.Helper()
		l, err := cs.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{LabelSelector: spentlease.LabelSpent + "=true"})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	if got := countLeases(); got != 0 {
		t.Errorf("%d spent-session Leases after %d proofs of unknown serials, want 0", got, n)
	}
	waiting := 0
	for _, srv := range servers {
		for i := range n {
			waiting += len(srv.Waiting(fmt.Sprintf("FLOOD-%04d", i)))
		}
	}
	if max := 2 * attest.DefaultMaxWaitingPerPeer; waiting == 0 || waiting > max {
		t.Errorf("%d claims of the flood wait on the two replicas, want 1 to %d", waiting, max)
	}

	res, err := attest.Run(context.Background(), urls[1], tpm, attest.Machine{Serial: "S1", MAC: []byte{2, 0, 0, 0, 0, 1}},
		&attest.ClientConfig{HTTPClient: clients[1], Console: io.Discard})
	if err != nil || res.InstallCode != "code-1" {
		t.Fatalf("S1: %+v, %v", res, err)
	}
	if got := countLeases(); got != 1 {
		t.Errorf("%d spent-session Leases after one admitted proof, want 1", got)
	}
	if n := admitted.Load(); n != 1 {
		t.Errorf("admitted %d times, want 1", n)
	}
}
