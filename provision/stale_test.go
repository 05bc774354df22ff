package provision

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetkit/fleet/inventory"
)

// staleListing is a NetBox whose device listing is taken, then, before
// the pass that asked for it goes on, the machine is admitted
// (meanwhile): the pass works on a listing older than the admission.
type staleListing struct {
	*memNetBox
	meanwhile func()
}

func (s *staleListing) Devices(ctx context.Context) ([]inventory.Device, error) {
	devs, err := s.memNetBox.Devices(ctx)
	if f := s.meanwhile; f != nil {
		s.meanwhile = nil
		f()
	}
	return devs, err
}

// The operator set desired_action, and the machine attested before the
// pass that lists it dispatched: the admission started run A and answered
// its code. The pass, deciding on its old listing (desired_action still
// provision, no last_run), must start nothing and keep A: a run B would
// delete A mid-wipe and power-cycle the machine.
func TestPassOnStaleListingKeepsAdmittedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dev := attested(worker(1, "node-01"))
		dev.DesiredAction = inventory.DesiredActionProvision
		h := newHarness(t, nil, dev)
		var admitted Decision
		nb := &staleListing{memNetBox: h.nb, meanwhile: func() {
			d, err := h.p.Admit(context.Background(), claimOf(dev))
			if err != nil || d.Code == "" {
				t.Fatalf("Admit = %+v, %v", d, err)
			}
			admitted = d
			time.Sleep(2 * time.Second) // a later run would have another name
		}}
		p, err := New(Deps{NetBox: nb, Kube: h.kubeAPI, Tink: h.tinkAPI, Configs: h.configs}, h.cluster, &h.cfg)
		if err != nil {
			t.Fatal(err)
		}
		h.p = p
		pass, err := p.Reconcile(context.Background())
		if err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if len(pass.Started) != 0 {
			t.Errorf("the pass started %v on its old listing", pass.Started)
		}
		wfs := h.workflows()
		if len(wfs) != 1 || wfs[0].Name != admitted.Run {
			var names []string
			for _, wf := range wfs {
				names = append(names, wf.Name)
			}
			t.Errorf("Workflows %v, want the admitted run %s alone", names, admitted.Run)
		}
		if got := h.nb.dev(1); got.LastRun != admitted.Run || got.DesiredAction != "" {
			t.Errorf("device: last_run %q, desired_action %q; want %s and none", got.LastRun, got.DesiredAction, admitted.Run)
		}
		if n := h.count(JobResource); n != 0 {
			t.Errorf("%d Rufio Jobs: the machine was power-cycled mid-run", n)
		}
	})
}
