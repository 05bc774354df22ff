package main

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
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
// machine gets its code, and the NetBox requests each costs are bounded.
func TestFleetdStorm(t *testing.T) {
	const n = 20
	f := stormFleet(t, n)
	f.nbsrv.ResetRequests()
	lat := storm(t, f)
	perMachine := float64(f.nbsrv.RequestCount()) / n
	t.Logf("%d machines: p50 %v, p99 %v; %.1f NetBox requests per machine", n, lat[n/2], lat[n*99/100], perMachine)
	// BindingBySerial (2), DeviceBySerial (2), RecordAttestation (up to 4),
	// the run's last_run, desired_action and journal writes, the
	// control-plane read: well under 20.
	if perMachine > 20 {
		t.Errorf("%.1f NetBox requests per machine", perMachine)
	}
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
		b.ReportMetric(float64(f.nbsrv.RequestCount())/n, "netbox-requests/machine")
		b.StartTimer()
	}
}
