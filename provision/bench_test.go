package provision

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetkit/fleet/inventory"
)

// BenchmarkRender measures one worker config render with a reused bundle
// (no token creation: that is one API call).
func BenchmarkRender(b *testing.B) {
	c := testCluster(b)
	dev := attested(worker(1, "node-01"))
	for b.Loop() {
		if _, err := c.Render(dev, testToken, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderControlPlane is the same for a control plane with SANs.
func BenchmarkRenderControlPlane(b *testing.B) {
	c := testCluster(b)
	dev := attested(worker(1, "cp-01"))
	dev.Class = ClassControlPlane
	sans := []string{"10.0.0.21", "10.0.0.22", "10.0.0.23"}
	for b.Loop() {
		if _, err := c.Render(dev, testToken, sans); err != nil {
			b.Fatal(err)
		}
	}
}

// fleet1000 is a harness with n active devices, each with one ended run
// (state), reported or not.
func fleet1000(b *testing.B, n int, state tinkerbell.WorkflowState, reported bool) *harness {
	b.Helper()
	devs := activeDevices(n)
	h := newHarness(b, nil, devs...)
	endedRuns(b, h, devs, state, reported)
	return h
}

// activeDevices are n active workers that attested.
func activeDevices(n int) []inventory.Device {
	var devs []inventory.Device
	for i := 1; i <= n; i++ {
		d := attested(worker(int64(i), fmt.Sprintf("node-%04d", i)))
		d.Address = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i / 256), byte(i % 256)}), 16)
		d.Status = inventory.StatusActive
		d.LastRun = fmt.Sprintf("provision-%s-1767225600", d.Name)
		devs = append(devs, d)
	}
	return devs
}

// endedRuns creates each device's last run, ended in state, its end
// reported or not.
func endedRuns(b *testing.B, h *harness, devs []inventory.Device, state tinkerbell.WorkflowState, reported bool) {
	b.Helper()
	for _, d := range devs {
		if err := h.p.newWorkflow(context.Background(), d, d.LastRun, RunProvision, "SECRETCODE", "img", d.Address.Addr().String(), "", false, t0); err != nil {
			b.Fatal(err)
		}
		h.setStatus(d.LastRun, func(s *tinkerbell.WorkflowStatus) {
			s.State = state
			s.Tasks = actions(map[string]tinkerbell.WorkflowState{"wipe-disk": "SUCCESS", "install": "SUCCESS"})
		})
		if reported {
			if err := h.p.annotate(context.Background(), d.LastRun, annReported, string(state)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

type apiCalls struct{ netbox, kube int }

func (h *harness) apiCalls() apiCalls {
	return apiCalls{h.mem.callCount(), len(h.tink.Actions()) + len(h.kube.Actions())}
}

// BenchmarkReconcileSteady1000 is one pass over 1,000 devices and 1,000
// Workflows whose ends are already journaled: the steady state.
func BenchmarkReconcileSteady1000(b *testing.B) {
	h := fleet1000(b, 1000, tinkerbell.WorkflowStateSuccess, true)
	before := h.apiCalls()
	b.ResetTimer()
	for b.Loop() {
		if _, err := h.p.Reconcile(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	after := h.apiCalls()
	b.ReportMetric(float64(after.netbox-before.netbox)/float64(b.N), "netbox-calls/pass")
	b.ReportMetric(float64(after.kube-before.kube)/float64(b.N), "kube-calls/pass")
}

// BenchmarkReconcileAllEnded1000 is the pass in which all 1,000 runs
// ended at once: each is journaled and annotated.
func BenchmarkReconcileAllEnded1000(b *testing.B) {
	var netbox, kube int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := fleet1000(b, 1000, tinkerbell.WorkflowStateFailed, false)
		before := h.apiCalls()
		b.StartTimer()
		endedPass(b, h, 1000)
		after := h.apiCalls()
		netbox += after.netbox - before.netbox
		kube += after.kube - before.kube
	}
	b.ReportMetric(float64(netbox)/float64(b.N), "netbox-calls/pass")
	b.ReportMetric(float64(kube)/float64(b.N), "kube-calls/pass")
}

// BenchmarkReconcileAllEndedRealAPI is the pass in which 300 runs ended at
// once, on the real kube-apiserver: each end is journaled (on an in-memory
// NetBox) and annotated with a request of its own. It reports the pass's
// wall time per ended run.
func BenchmarkReconcileAllEndedRealAPI(b *testing.B) {
	const n = 300
	devs := activeDevices(n)
	h := newRealHarness(b, nil, devs...)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for _, d := range devs {
			h.tinkAPI.Resource(WorkflowResource).Namespace(h.ns).Delete(context.Background(), d.LastRun, metav1.DeleteOptions{})
		}
		h.restart()
		endedRuns(b, h, devs, tinkerbell.WorkflowStateFailed, false)
		h.p.recheck.Store(false)
		b.StartTimer()
		total += endedPass(b, h, n)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N*n), "ms/ended-run")
}

// endedPass runs the pass in which n runs ended, and returns its time.
func endedPass(b *testing.B, h *harness, n int) time.Duration {
	b.Helper()
	start := time.Now()
	pass, err := h.p.Reconcile(context.Background())
	took := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if len(pass.Ended) != n {
		b.Fatalf("ended %d, want %d", len(pass.Ended), n)
	}
	return took
}

// BenchmarkAdmit is one admission, on fakes, with what it costs NetBox and
// Kubernetes: a planned worker's first sight (its run starts), a repeat
// (the run that waits for the machine answers its code), and a refusal
// that waits for a fix (a device that lacks install_disk_serial).
func BenchmarkAdmit(b *testing.B) {
	for _, bc := range []struct {
		name  string
		same  bool // every admission is the same device's
		lacks bool // each device lacks install_disk_serial
	}{
		{"first-sight", false, false},
		{"repeat", true, false},
		{"refused", false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const n = 200
			var devs []inventory.Device
			for i := 1; i <= n; i++ {
				d := worker(int64(i), fmt.Sprintf("node-%04d", i))
				if bc.lacks {
					d.InstallDiskSerial = ""
				}
				d.Address = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i / 256), byte(i % 256)}), 16)
				devs = append(devs, d)
			}
			h := newHarness(b, nil, devs...)
			var calls apiCalls // of the harnesses before h
			ctx := context.Background()
			if bc.same {
				if _, err := h.p.Admit(ctx, handedClaim(devs[0])); err != nil {
					b.Fatal(err)
				}
			}
			var admissions int
			before := h.apiCalls()
			for b.Loop() {
				i := 0
				if !bc.same {
					if i = admissions % n; i == 0 && admissions > 0 {
						// Each device is seen first once: a new NetBox.
						b.StopTimer()
						c := h.apiCalls()
						calls.netbox, calls.kube = calls.netbox+c.netbox, calls.kube+c.kube
						h = newHarness(b, nil, devs...)
						b.StartTimer()
					}
				}
				if _, err := h.p.Admit(ctx, handedClaim(devs[i])); err != nil {
					b.Fatal(err)
				}
				admissions++
			}
			after := h.apiCalls()
			b.ReportMetric(float64(calls.netbox+after.netbox-before.netbox)/float64(admissions), "netbox-calls/admission")
			b.ReportMetric(float64(calls.kube+after.kube-before.kube)/float64(admissions), "kube-calls/admission")
		})
	}
}
