package provision

import (
	"errors"
	"testing"

	"github.com/fleetkit/fleet/inventory"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
)

// The admission's decision is a function of its facts: each case is the
// facts an attestation meets and the plan they make, with no NetBox, no
// cluster and no clock.
func TestPlan(t *testing.T) {
	p := &Provisioner{cluster: testCluster(t), cfg: Config{AutoProvision: true}}
	node := attested(worker(1, "node-01"))
	from := node.Address.Addr()
	attestedNote := "the machine attested from HookOS at " + from.String()
	provisionStart := &runStart{kind: RunProvision, hookOS: from, note: attestedNote}
	retireStart := &runStart{kind: RunRetire, hookOS: from, note: attestedNote + ", and the run wipes its install disk"}
	waiting := func(name string, mod func(*run)) *run {
		r := &run{Kind: string(RunProvision), Node: "node-01", DeviceID: 1}
		r.WF.Name = name
		if mod != nil {
			mod(r)
		}
		return r
	}
	succeeded := func(r *run) { r.WF.Status.State = tinkerbell.WorkflowStateSuccess }
	with := func(mod func(*inventory.Device)) inventory.Device {
		d := node
		mod(&d)
		return d
	}
	bootOff := func(c *Claim) { c.Attestation.SecureBoot = inventory.SecureBootOff }
	requireSB := &Provisioner{cluster: testCluster(t), cfg: p.cfg}
	requireSecureBoot(&requireSB.cluster, nil)
	noAuto := &Provisioner{cluster: testCluster(t)}
	cpOff := &Provisioner{cluster: testCluster(t), cfg: p.cfg}
	cpOff.cluster.ControlPlanes = false
	cpOffLine := "node-01 is a control plane, and " + ErrControlPlanesOff.Error() + ": no run starts, nothing is wiped, and desired_action stays provision"

	for _, tc := range []struct {
		name  string
		p     *Provisioner
		dev   inventory.Device
		claim func(*Claim)
		port  error
		runs  []*run
		code  string
		want  admissionPlan
	}{
		{name: "the port refused", port: errors.New("on port 7, expected 1"),
			want: admissionPlan{decision: Decision{Outcome: Refused, Reason: "on port 7, expected 1"},
				line: "refused a run before rendering anything: on port 7, expected 1"}},
		{name: "a planned worker that never ran", want: admissionPlan{decision: Decision{Outcome: Provision}, start: provisionStart}},
		{name: "auto-provision off", p: noAuto,
			want: admissionPlan{decision: Decision{Outcome: NoProvision, Reason: reasonAutoOff}}},
		{name: "the waiting run's code", runs: []*run{waiting("provision-node-01-1", nil)}, code: "CODE",
			want: admissionPlan{decision: Decision{Outcome: Provision, Run: "provision-node-01-1", Code: "CODE",
				Reason: "run provision-node-01-1 waits for the machine"},
				annotate: waiting("provision-node-01-1", nil), from: from.String()}},
		{name: "the waiting run's code, its address known",
			runs: []*run{waiting("provision-node-01-1", func(r *run) { r.WF.Annotations = map[string]string{annHookOS: from.String()} })}, code: "CODE",
			want: admissionPlan{decision: Decision{Outcome: Provision, Run: "provision-node-01-1", Code: "CODE",
				Reason: "run provision-node-01-1 waits for the machine"}}},
		{name: "a waiting run whose code no replica holds", runs: []*run{waiting("provision-node-01-1", nil)},
			want: admissionPlan{decision: Decision{Outcome: Provision}, start: &runStart{kind: RunProvision, hookOS: from,
				note: attestedNote + "; it replaces Workflow provision-node-01-1, whose install code fleetd no longer holds"}}},
		{name: "a run past wipe-disk", runs: []*run{waiting("provision-node-01-1", func(r *run) { atInstall(&r.WF.Status) })}, code: "CODE",
			want: admissionPlan{decision: Decision{Outcome: NoProvision, Run: "provision-node-01-1",
				Reason: "run provision-node-01-1 is in flight at action install"}}},
		{name: "Secure Boot off, the class requires it", p: requireSB, claim: bootOff,
			want: admissionPlan{decision: Decision{Outcome: NoProvision, Reason: reasonBootOff}, line: "no provision: " + reasonBootOff}},
		{name: "Secure Boot off, a waiting run", p: requireSB, claim: bootOff, runs: []*run{waiting("provision-node-01-1", nil)}, code: "CODE",
			want: admissionPlan{decision: Decision{Outcome: NoProvision, Reason: reasonBootOff}, line: "no provision: " + reasonBootOff}},
		{name: "the last run is not repeated, the node booted HookOS after it",
			dev:  with(func(d *inventory.Device) { d.LastRun = "provision-node-01-1" }),
			runs: []*run{waiting("provision-node-01-1", succeeded)},
			want: admissionPlan{decision: Decision{Outcome: NoProvision, Reason: lastRunReason("provision-node-01-1")},
				booted: waiting("provision-node-01-1", succeeded)}},
		{name: "desired_action repeats the last run", dev: with(func(d *inventory.Device) {
			d.LastRun, d.DesiredAction = "provision-node-01-1", inventory.DesiredActionProvision
		}), runs: []*run{waiting("provision-node-01-1", succeeded)},
			want: admissionPlan{decision: Decision{Outcome: Provision}, start: provisionStart}},
		{name: "a device that lacks its disk's serial waits", dev: with(func(d *inventory.Device) { d.InstallDiskSerial = "" }),
			want: admissionPlan{decision: Decision{Outcome: Refused, Reason: (&LacksError{Node: "node-01", Fields: []string{"install_disk_serial"}}).Error()},
				line: "node-01 lacks install_disk_serial: the run waits for install_disk_serial, and desired_action stays provision", once: true, waits: true}},
		{name: "a control plane waits for desired_action", dev: with(func(d *inventory.Device) { d.Class = ClassControlPlane }),
			want: admissionPlan{decision: Decision{Outcome: NoProvision, Reason: reasonControlPlane}}},
		{name: "a control plane asked for, without control-plane support", p: cpOff, dev: with(func(d *inventory.Device) {
			d.Class, d.DesiredAction = ClassControlPlane, inventory.DesiredActionProvision
		}), want: admissionPlan{decision: Decision{Outcome: Refused, Reason: cpOffLine}, line: cpOffLine, once: true}},
		{name: "a decommissioning device gets its retirement", dev: with(func(d *inventory.Device) {
			d.Status, d.LastRun = inventory.StatusDecommissioning, "provision-node-01-1"
		}), want: admissionPlan{decision: Decision{Outcome: Retire}, start: retireStart}},
		// A retirement wipes the disk and renders no secret: the policy does
		// not hold it back.
		{name: "Secure Boot off, the class requires it, a retirement", p: requireSB, claim: bootOff, dev: with(func(d *inventory.Device) {
			d.Status, d.LastRun = inventory.StatusDecommissioning, "provision-node-01-1"
		}), want: admissionPlan{decision: Decision{Outcome: Retire}, start: retireStart}},
		{name: "a retirement that ran is not repeated", dev: with(func(d *inventory.Device) {
			d.Status, d.LastRun = inventory.StatusDecommissioning, "retire-node-01-1"
		}), want: admissionPlan{decision: Decision{Outcome: NoProvision, Reason: lastRunReason("retire-node-01-1")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pp, dev := tc.p, tc.dev
			if pp == nil {
				pp = p
			}
			if dev.ID == 0 {
				dev = node
			}
			cl := claimOf(dev)
			cl.Attestation.SecureBoot = inventory.SecureBootOn
			if tc.claim != nil {
				tc.claim(&cl)
			}
			got := pp.plan(facts{dev: dev, claim: cl, from: from, portErr: tc.port, runs: tc.runs, code: tc.code})
			checkPlan(t, got, tc.want)
		})
	}
}

// checkPlan compares a plan with the one wanted: the decision (its
// refusal by its line), the lines, the runs it names, the run it starts.
func checkPlan(t *testing.T, got, want admissionPlan) {
	t.Helper()
	gd, wd := got.decision, want.decision
	gd.Refusal, wd.Refusal = nil, nil
	if gd != wd {
		t.Errorf("decision %+v, want %+v", gd, wd)
	}
	if (got.decision.Refusal != nil) != (want.decision.Outcome == Refused) {
		t.Errorf("refusal %v for outcome %v", got.decision.Refusal, got.decision.Outcome)
	}
	if got.line != want.line || got.once != want.once || got.waits != want.waits {
		t.Errorf("line %q (once %v, waits %v), want %q (once %v, waits %v)", got.line, got.once, got.waits, want.line, want.once, want.waits)
	}
	if name(got.annotate) != name(want.annotate) || got.from != want.from {
		t.Errorf("annotates %q with %q, want %q with %q", name(got.annotate), got.from, name(want.annotate), want.from)
	}
	if name(got.booted) != name(want.booted) {
		t.Errorf("booted-HookOS line for %q, want %q", name(got.booted), name(want.booted))
	}
	switch {
	case (got.start == nil) != (want.start == nil):
		t.Errorf("starts %+v, want %+v", got.start, want.start)
	case got.start != nil:
		g, w := *got.start, *want.start
		g.runs, w.runs = nil, nil
		if g != w {
			t.Errorf("starts %+v, want %+v", g, w)
		}
	}
}

func name(r *run) string {
	if r == nil {
		return ""
	}
	return r.Name()
}
