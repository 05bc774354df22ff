package provision

import (
	"context"
	"errors"
	"slices"
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
		nb := &staleListing{memNetBox: h.mem, meanwhile: func() {
			d, err := h.p.Admit(context.Background(), claimOf(dev))
			if err != nil || d.Code == "" {
				t.Fatalf("Admit = %+v, %v", d, err)
			}
			admitted = d
			time.Sleep(2 * time.Second) // a later run would have another name
		}}
		h.nbAPI = nb
		h.restart()
		if pass := h.reconcile(); len(pass.Started) != 0 {
			t.Errorf("the pass started %v on its old listing", pass.Started)
		}
		if names := h.runNames(); !slices.Equal(names, []string{admitted.Run}) {
			t.Errorf("Workflows %v, want the admitted run %s alone", names, admitted.Run)
		}
		h.wantLastRun(1, admitted.Run)
		if n := h.count(JobResource); n != 0 {
			t.Errorf("%d Rufio Jobs: the machine was power-cycled mid-run", n)
		}
	})
}

// slowHold holds configs once release is closed: a start whose render
// waits on a loaded config service.
type slowHold struct {
	Configs
	release chan struct{}
}

func (s slowHold) Hold(ctx context.Context, code string, config []byte, dev inventory.Device, run string) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Configs.Hold(ctx, code, config, dev, run)
}

// Another replica's start is slow: its Workflow exists and its config is
// not yet held for longer than startSettle (a loaded NetBox, config
// service or API server). Its starter holds the run from the Workflow's
// create on, so an admission here gives way (ErrRunRaced; the machine
// tries again) rather than delete the run and start one of its own, and
// gets no code of a run that may yet give way; the other start then ends
// with its run the device's only one, and the machine's next attestation
// here gets its code.
func TestSlowStartElsewhereKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dev := attested(worker(1, "node-01"))
		var other *Provisioner
		h := newHarness(t, func(_ *Cluster, c *Config) {
			c.Shared = true
			c.PeerCode = func(_ context.Context, run string) (string, bool) { return other.HeldCode(run) }
		}, dev)
		release := make(chan struct{})
		other = h.another(func(d *Deps, _ *Config) { d.Configs = slowHold{Configs: h.configs, release: release} })
		started := make(chan Decision, 1)
		go func() {
			d, err := other.Admit(context.Background(), claimOf(dev))
			if err != nil {
				t.Errorf("the other replica's admission: %v", err)
			}
			started <- d
		}()
		synctest.Wait()
		if wfs := h.workflows(); len(wfs) != 1 {
			t.Fatalf("%d Workflows while the other replica renders, want its one", len(wfs))
		}
		time.Sleep(startSettle + time.Second)
		if d, err := h.p.Admit(context.Background(), claimOf(dev)); !errors.Is(err, ErrRunRaced) || d.Code != "" {
			t.Errorf("an admission here while the other start renders = %+v, %v; want ErrRunRaced and no code", d, err)
		}
		close(release)
		d := <-started
		if wfs := h.workflows(); len(wfs) != 1 || wfs[0].Name != d.Run || d.Code == "" {
			t.Fatalf("after the other start: %d Workflows, its run %q; want its run alone, with a code", len(wfs), d.Run)
		}
		h.wantKept(d.Run, true)
		if again, err := h.p.Admit(context.Background(), claimOf(dev)); err != nil || again.Run != d.Run || again.Code != d.Code {
			t.Errorf("the machine's next attestation here = %+v, %v; want run %s's code", again, err, d.Run)
		}
	})
}

// Another replica is starting a run of the device: its Workflow exists,
// not yet named by NetBox's last_run (its starter writes that next), and
// desired_action still says provision. Neither this replica's pass nor an
// admission here deletes it: the pass waits, and the admission gives way
// (ErrRunRaced; the machine tries again), while the run is younger than
// startSettle, or its starter holds its code (and it is younger than
// startGrace). A run whose starter holds no code past startSettle (it died
// mid-start) is replaced at once.
func TestRunStartingElsewhereKept(t *testing.T) {
	for _, tc := range []struct {
		name       string
		starterDie bool
	}{
		{"starter alive", false},
		{"starter died mid-start", true},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			dev := attested(worker(1, "node-01"))
			dev.LastRun = "provision-node-01-946000000"
			dev.DesiredAction = inventory.DesiredActionProvision
			var other *Provisioner
			h := newHarness(t, func(_ *Cluster, c *Config) {
				c.Shared = true
				c.PeerCode = func(_ context.Context, run string) (string, bool) { return other.HeldCode(run) }
			}, dev)
			other = h.another(nil)
			d, err := other.Admit(context.Background(), claimOf(dev))
			if err != nil || d.Code == "" {
				t.Fatalf("the other replica's admission = %+v, %v", d, err)
			}
			// As it stands before the other replica records its run.
			h.nb.set(1, func(d *inventory.Device) {
				d.LastRun, d.DesiredAction = dev.LastRun, inventory.DesiredActionProvision
			})
			time.Sleep(time.Second)
			if pass := h.reconcile(); len(pass.Started) != 0 {
				t.Errorf("the pass started %v over a run started %v ago elsewhere", pass.Started, time.Second)
			}
			if _, err := h.p.Admit(context.Background(), claimOf(dev)); !errors.Is(err, ErrRunRaced) {
				t.Errorf("an admission here: %v, want ErrRunRaced", err)
			}
			if tc.starterDie {
				other.dropCode(d.Run) // a new process holds nothing
			}
			time.Sleep(startSettle)
			pass := h.reconcile()
			if tc.starterDie {
				if len(pass.Started) != 1 {
					t.Fatalf("the pass started %v over a run whose starter died, want a run that replaces it", pass.Started)
				}
				h.wantKept(d.Run, false)
				return
			}
			if len(pass.Started) != 0 {
				t.Errorf("the pass started %v over a run whose starter holds its code", pass.Started)
			}
			if wfs := h.workflows(); len(wfs) != 1 || wfs[0].Name != d.Run {
				t.Fatalf("Workflows %d, want %s alone", len(wfs), d.Run)
			}
			h.wantKept(d.Run, true)
			time.Sleep(startGrace)
			if pass := h.reconcile(); len(pass.Started) != 1 {
				t.Fatalf("after startGrace the pass started %v, want the run that replaces the orphan", pass.Started)
			}
			h.wantKept(d.Run, false)
		})
	}
}
