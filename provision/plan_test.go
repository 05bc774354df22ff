package provision

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetkit/fleet/inventory"
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
	provisions := admissionPlan{decision: Decision{Outcome: Provision}, start: provisionStart}
	// noProvision answers no install code for reason, and journals it.
	noProvision := func(reason string) admissionPlan {
		return admissionPlan{decision: Decision{Outcome: NoProvision, Reason: reason}, line: "no provision: " + reason}
	}
	// refusedOnce refuses the run, its line journaled once.
	refusedOnce := func(line string) admissionPlan {
		return admissionPlan{decision: Decision{Outcome: Refused, Reason: line}, line: line, once: true}
	}
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
	// boot is the boot the claim proved, sb, and why it is unknown.
	boot := func(sb, why string) func(*Claim) {
		return func(c *Claim) { c.Attestation.SecureBoot, c.SecureBootUnknown = sb, why }
	}
	bootOff := boot(inventory.SecureBootOff, "")
	requireSB := &Provisioner{cluster: testCluster(t), cfg: p.cfg}
	requireSecureBoot(&requireSB.cluster, nil)
	noAuto := &Provisioner{cluster: testCluster(t)}
	cpOff := &Provisioner{cluster: testCluster(t), cfg: p.cfg}
	cpOff.cluster.ControlPlanes = false
	cpOffLine := "node-01 is a control plane, and " + ErrControlPlanesOff.Error() + ": no run starts, nothing is wiped, and desired_action stays provision"
	noKeys := &Provisioner{cluster: testCluster(t), cfg: p.cfg}
	noKeys.cluster.Bundle = workerBundle(t)
	noKeysLine := "node-01 is a control plane, and fleetd holds no secrets bundle with the cluster's CA keys: no run starts, nothing is wiped, and desired_action stays provision"
	cp := func(d *inventory.Device) { d.Class = ClassControlPlane }
	// The device at the address of the cluster's first control plane, and
	// the line that refuses its every run.
	first := func(d *inventory.Device) { d.Address = netip.MustParsePrefix("10.0.0.10/24") } // the Endpoint's host
	firstLine := func(addr string) string {
		return "refused a run before rendering anything: node-01 is at API_SERVER_IP " + addr + ": the cluster's first control plane, which the Talos root bootstraps, never installs this way; no run starts, nothing is wiped"
	}
	firstSet := &Provisioner{cluster: testCluster(t), cfg: p.cfg}
	firstSet.cluster.Endpoint = "https://api.folly.example:6443"
	firstSet.cluster.FirstControlPlane = from // node-01's
	nameLine := "refused a run before rendering anything: the node name \"Node_01\" cannot name a Workflow: " + strings.Join(validation.IsDNS1123Label("Node_01"), "; ")
	classLine := `refused a run before rendering anything: unknown class: node-01 has class "gpu"`
	errPort := errors.New("on port 7, expected 1")

	for _, tc := range []struct {
		name  string
		p     *Provisioner
		dev   inventory.Device
		claim func(*Claim)
		port  error
		runs  []*run
		code  string
		want  admissionPlan
		cause error // errors.Is finds it in the refusal
	}{
		{name: "the port refused", port: errPort, cause: errPort,
			want: admissionPlan{decision: Decision{Outcome: Refused, Reason: "on port 7, expected 1"},
				line: "refused a run before rendering anything: on port 7, expected 1"}},
		{name: "a planned worker that never ran", want: provisions},
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
		{name: "a run at wipe-disk waits for the machine", runs: []*run{waiting("provision-node-01-1", func(r *run) {
			r.WF.Status.State = tinkerbell.WorkflowStateRunning
			r.WF.Status.CurrentState = &tinkerbell.CurrentState{ActionName: "wipe-disk", State: tinkerbell.WorkflowStateRunning}
			r.WF.Status.Tasks = actions(map[string]tinkerbell.WorkflowState{"wipe-disk": "RUNNING"})
			r.WF.Status.GlobalExecutionStop = &metav1.Time{Time: t0.Add(time.Hour)}
			r.WF.Annotations = map[string]string{annHookOS: from.String()}
		})}, code: "CODE",
			want: admissionPlan{decision: Decision{Outcome: Provision, Run: "provision-node-01-1", Code: "CODE",
				Reason: "run provision-node-01-1 waits for the machine"}}},
		{name: "a run past wipe-disk", runs: []*run{waiting("provision-node-01-1", func(r *run) { atInstall(&r.WF.Status) })}, code: "CODE",
			want: admissionPlan{decision: Decision{Outcome: NoProvision, Run: "provision-node-01-1",
				Reason: "run provision-node-01-1 is in flight at action install"}}},
		{name: "Secure Boot on, the class requires it", p: requireSB, want: provisions},
		{name: "Secure Boot off, the class requires it", p: requireSB, claim: bootOff, want: noProvision("Secure Boot is off")},
		{name: "Secure Boot unknown, the class requires it", p: requireSB, claim: boot(inventory.SecureBootUnknown, "the machine sent no event log"),
			want: noProvision("Secure Boot is unknown: the machine sent no event log")},
		{name: "Secure Boot unknown without why, the class requires it", p: requireSB, claim: boot(inventory.SecureBootUnknown, ""),
			want: noProvision("Secure Boot is unknown")},
		{name: "Secure Boot unquoted, the class requires it", p: requireSB, claim: boot(inventory.SecureBootUnquoted, ""),
			want: noProvision("the TPM sent no quote of its boot")},
		{name: "Secure Boot not told, the class requires it", p: requireSB, claim: boot("", ""), want: noProvision("the TPM sent no quote of its boot")},
		// A class without the policy admits a machine whatever its boot.
		{name: "Secure Boot off, the class does not require it", claim: boot(inventory.SecureBootOff, "why"), want: provisions},
		{name: "Secure Boot unknown, the class does not require it", claim: boot(inventory.SecureBootUnknown, "why"), want: provisions},
		{name: "Secure Boot unquoted, the class does not require it", claim: boot(inventory.SecureBootUnquoted, "why"), want: provisions},
		{name: "Secure Boot not told, the class does not require it", claim: boot("", "why"), want: provisions},
		{name: "Secure Boot off, a waiting run", p: requireSB, claim: bootOff, runs: []*run{waiting("provision-node-01-1", nil)}, code: "CODE",
			want: noProvision(reasonBootOff)},
		{name: "the last run is not repeated, the node booted HookOS after it",
			dev:  with(func(d *inventory.Device) { d.LastRun = "provision-node-01-1" }),
			runs: []*run{waiting("provision-node-01-1", succeeded)},
			want: admissionPlan{decision: Decision{Outcome: NoProvision, Reason: lastRunReason("provision-node-01-1")},
				booted: waiting("provision-node-01-1", succeeded)}},
		{name: "a last run no Workflow holds is not repeated", dev: with(func(d *inventory.Device) { d.LastRun = "provision-node-01-1767000000" }),
			want: admissionPlan{decision: Decision{Outcome: NoProvision,
				Reason: "last run provision-node-01-1767000000 is not repeated; set desired_action to provision"}}},
		{name: "desired_action repeats the last run", dev: with(func(d *inventory.Device) {
			d.LastRun, d.DesiredAction = "provision-node-01-1", inventory.DesiredActionProvision
		}), runs: []*run{waiting("provision-node-01-1", succeeded)}, want: provisions},
		{name: "a device that lacks its disk's serial waits", dev: with(func(d *inventory.Device) { d.InstallDiskSerial = "" }), cause: ErrLacks,
			want: admissionPlan{decision: Decision{Outcome: Refused, Reason: (&LacksError{Node: "node-01", Fields: []string{"install_disk_serial"}}).Error()},
				line: "node-01 lacks install_disk_serial: the run waits for install_disk_serial, and desired_action stays provision", once: true, waits: true}},
		{name: "a node name that cannot name a Workflow", dev: with(func(d *inventory.Device) { d.Name = "Node_01" }), cause: ErrNodeName, want: refusedOnce(nameLine)},
		{name: "an unknown class", dev: with(func(d *inventory.Device) { d.Class = "gpu" }), cause: ErrClass,
			want: admissionPlan{decision: Decision{Outcome: Refused, Reason: classLine}, line: classLine, once: true, waits: true}},
		{name: "a control plane waits for desired_action", dev: with(cp),
			want: admissionPlan{decision: Decision{Outcome: NoProvision, Reason: "a control plane waits for desired_action=provision"}}},
		// desired_action alone would start no run: the reason says why.
		{name: "a control plane waits, without control-plane support", p: cpOff, dev: with(cp),
			want: admissionPlan{decision: Decision{Outcome: NoProvision,
				Reason: "a control plane waits, and fleetd runs without control-plane support (homelab.fleetd.controlPlanes): no run starts, nothing is wiped, even with desired_action=provision"}}},
		{name: "a control plane waits, without the CA keys", p: noKeys, dev: with(cp),
			want: admissionPlan{decision: Decision{Outcome: NoProvision,
				Reason: "a control plane waits, and fleetd holds no secrets bundle with the cluster's CA keys: no run starts, nothing is wiped, even with desired_action=provision"}}},
		{name: "a control plane asked for, without control-plane support", p: cpOff, dev: with(func(d *inventory.Device) {
			d.Class, d.DesiredAction = ClassControlPlane, inventory.DesiredActionProvision
		}), cause: ErrControlPlanesOff, want: refusedOnce(cpOffLine)},
		{name: "a control plane asked for, without the CA keys", p: noKeys, dev: with(func(d *inventory.Device) {
			d.Class, d.DesiredAction = ClassControlPlane, inventory.DesiredActionProvision
		}), cause: ErrNoBundleKeys, want: refusedOnce(noKeysLine)},
		// Any run of the cluster's first control plane is refused, whatever
		// desired_action says: before a missing field, and a retirement too.
		{name: "the first control plane", dev: with(func(d *inventory.Device) {
			cp(d)
			first(d)
			d.DesiredAction = inventory.DesiredActionProvision
		}), cause: ErrFirstControlPlane, want: refusedOnce(firstLine("10.0.0.10"))},
		{name: "the first control plane, retired", dev: with(func(d *inventory.Device) {
			cp(d)
			first(d)
			d.Status = inventory.StatusDecommissioning
		}), cause: ErrFirstControlPlane, want: refusedOnce(firstLine("10.0.0.10"))},
		{name: "the first control plane, lacking a field", dev: with(func(d *inventory.Device) {
			cp(d)
			first(d)
			d.DesiredAction, d.InstallDiskSerial = inventory.DesiredActionProvision, ""
		}), cause: ErrFirstControlPlane, want: refusedOnce(firstLine("10.0.0.10"))},
		{name: "the first control plane, set", p: firstSet, cause: ErrFirstControlPlane, want: refusedOnce(firstLine("10.0.0.21"))},
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
			if ref := got.decision.Refusal; ref != nil && (!errors.Is(ref, tc.cause) || ref.Node != dev.Name) {
				t.Errorf("Refusal = %#v (%v), want cause %v, node %s", ref, ref, tc.cause, dev.Name)
			}
		})
	}
}

// checkPlan compares a plan with the one wanted: the decision (its
// refusal by its line), the lines, the runs it names by their names, the
// run it starts.
func checkPlan(t *testing.T, got, want admissionPlan) {
	t.Helper()
	opts := cmp.Options{cmp.AllowUnexported(admissionPlan{}, runStart{}), cmpopts.IgnoreFields(Decision{}, "Refusal"), cmpopts.IgnoreFields(runStart{}, "runs"),
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b *run) bool { return name(a) == name(b) })}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	if (got.decision.Refusal != nil) != (want.decision.Outcome == Refused) {
		t.Errorf("refusal %v for outcome %v", got.decision.Refusal, got.decision.Outcome)
	}
	// A refusal's Error is the Reason, and its Journal the line written.
	if ref := got.decision.Refusal; ref != nil && (ref.Error() != got.decision.Reason || ref.Journal() != got.line) {
		t.Errorf("Refusal %q, its line %q; want the reason %q and the line %q", ref.Error(), ref.Journal(), got.decision.Reason, got.line)
	}
}

func name(r *run) string {
	if r == nil {
		return ""
	}
	return r.Name()
}
