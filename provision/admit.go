package provision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetkit/fleet/inventory"
)

// Claim is what fleetd knows of a machine that just passed attestation.
type Claim struct {
	// Serial is the SMBIOS serial the machine claimed.
	Serial string
	// Attestation is what the attestation proved; Admit records it on the
	// device first.
	Attestation inventory.Attestation
	// CheckPort judges the switch port the claim carried against the
	// device's declared one (fleetd wires lldpwait's check: "on port N,
	// expected M", "attested no switch port"). Admit calls it with the
	// declared port of the device NetBox holds for the serial; an error
	// refuses any run before anything is rendered, and is journaled with
	// its text. Required: a Claim without it is refused.
	CheckPort func(declared int) error
	// From is the address the machine attested from in HookOS; the journal
	// lines of the run name it. The zero Addr: the device's address.
	From netip.Addr
	// Device is the device NetBox holds for Serial, as the caller just read
	// it with its interface (fleetd hands over the device its binding
	// lookup read, so that NetBox is not asked twice). Nil, or a device of
	// another serial: Admit reads it (DeviceBySerial).
	Device *inventory.Device
}

// Outcome is what Admit decided. The zero value is invalid.
type Outcome int

// The outcomes of an admission.
const (
	_ Outcome = iota
	// Provision: a provision run waits for this machine; answer Code.
	Provision
	// Retire: a retirement (wipe) run waits for this machine; answer Code.
	Retire
	// NoProvision: the machine waits in HookOS (Decision.Reason says why).
	NoProvision
	// Refused: the run was refused (the switch port, a missing field, a
	// control plane fleetd cannot install); Decision.Reason says why and
	// the device's journal holds it.
	Refused
)

func (o Outcome) String() string {
	switch o {
	case Provision:
		return "provision"
	case Retire:
		return "retire"
	case NoProvision:
		return "no provision"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Decision is Admit's answer.
type Decision struct {
	Outcome Outcome
	// Reason says why there is no run, or which run waits.
	Reason string
	// Run names the Workflow that waits for the machine, if any.
	Run string
	// Code is the install code to answer the HookOS client: set only for
	// Provision and Retire. It is a secret: never log it.
	Code string
}

// errNoPortCheck refuses a claim that came without a switch-port check.
var errNoPortCheck = errors.New("no switch-port check was given for the claim")

// The reasons of a no-provision decision, as the attest.install audit line
// gives them.
const (
	reasonControlPlane = "a control plane waits for desired_action=provision"
	reasonAutoOff      = "auto-provision is off"
)

// Admit decides what happens to a machine that passed attestation from
// HookOS, and starts its run when one is due. It records the attestation
// on the device (the MAC first, when the device does not hold it yet; the
// attested_* fields and attest_verdict in one write at the end, together
// with the last_run and desired_action of the run it starts), and:
//   - refuses any run when c.CheckPort refuses the claimed switch port
//     (journaled with its text);
//   - answers the code of a run that waits for this machine (one started
//     from desired_action, whose Rufio job booted it) while no action of
//     that run has passed wipe-disk; the code lives only in this process's
//     memory (the Workflow names it by its SHA-256), so a waiting run
//     started before a restart is replaced by a new run, with a new code
//     and config;
//   - starts a run when desired_action is provision, when a decommissioning
//     device has had no retirement run, or when a planned worker that never
//     ran attests and auto-provision is on;
//   - otherwise answers no provision, with the reason: a last run the owner
//     has not repeated, a control plane, or auto-provision off. A node whose
//     last run succeeded is journaled, once per run, as having booted HookOS
//     after it.
//
// Every call ends in one attest.install audit line. An error means no code
// may be answered: errors.Is finds inventory.ErrUnavailable (NetBox did not
// answer), ErrBootstrapToken, or another cause of a run that did not start.
func (p *Provisioner) Admit(ctx context.Context, c Claim) (Decision, error) {
	d, dev, err := p.admit(ctx, c)
	attrs := []any{"serial", c.Serial, "outcome", d.Outcome.String(), "reason", d.Reason}
	if dev.ID != 0 {
		attrs = append(attrs, "node", dev.Name, "device", dev.ID)
	}
	if d.Run != "" {
		attrs = append(attrs, "run", d.Run)
	}
	if err != nil {
		attrs[3] = Refused.String()
		p.log.Error("attest.install", append(attrs, "error", err.Error())...)
		return Decision{Outcome: Refused, Reason: err.Error()}, err
	}
	p.log.Info("attest.install", attrs...)
	return d, nil
}

func (p *Provisioner) admit(ctx context.Context, c Claim) (Decision, inventory.Device, error) {
	var dev inventory.Device
	if c.Device != nil && c.Device.Serial == c.Serial && c.Device.ID != 0 {
		dev = *c.Device
	} else {
		var err error
		if dev, err = p.nb.DeviceBySerial(ctx, c.Serial); err != nil {
			return Decision{}, inventory.Device{}, fmt.Errorf("device of serial %s: %w", c.Serial, err)
		}
	}
	a := c.Attestation
	if len(a.MAC) > 0 && !bytes.Equal(dev.MAC, a.MAC) {
		if err := p.nb.RecordMAC(ctx, dev.ID, a.MAC); err != nil {
			return Decision{}, dev, fmt.Errorf("record %s's attestation: %w", dev.Name, err)
		}
		dev.MAC = a.MAC
	}
	rec := &record{u: inventory.Update{Attestation: &a}}
	d, err := p.decide(ctx, c, dev, rec)
	if !rec.done {
		// The attestation is recorded whatever the decision, even when the
		// run did not start.
		if werr := p.nb.UpdateDevice(ctx, dev.ID, rec.u); werr != nil {
			werr = fmt.Errorf("record %s's attestation: %w", dev.Name, werr)
			if err == nil {
				return Decision{}, dev, werr
			}
			err = errors.Join(err, werr)
		}
	}
	return d, dev, err
}

// record is the one write of an admission's fields: what the attestation
// proved, and the last_run and desired_action of the run it starts.
type record struct {
	u    inventory.Update
	done bool // written
}

// decide is Admit's decision on dev, which holds the attestation's MAC.
// The attestation's fields wait in rec: startRun writes them with the run's
// last_run, and Admit writes them when no run started.
func (p *Provisioner) decide(ctx context.Context, c Claim, dev inventory.Device, rec *record) (Decision, error) {
	a := c.Attestation
	dev.AttestedSwitchPort, dev.AttestedAt, dev.AttestVerdict = a.SwitchPort, a.At, a.Verdict
	dev.AttestedEKHash, dev.AttestedEKHashECC = a.EKHash, a.EKHashECC

	from := c.From
	if !from.IsValid() && dev.Address.IsValid() {
		from = dev.Address.Addr()
	}

	unlock := p.lockDevice(dev.ID)
	defer unlock()

	portErr := errNoPortCheck
	if c.CheckPort != nil {
		portErr = c.CheckPort(dev.SwitchPort)
	}
	if portErr != nil {
		text := refusedText(portErr)
		if err := p.nb.Journal(ctx, dev.ID, inventory.JournalWarning, text); err != nil {
			return Decision{}, err
		}
		return Decision{Outcome: Refused, Reason: portErr.Error()}, nil
	}

	runs, err := p.runsOf(ctx, dev.ID)
	if err != nil {
		return Decision{}, err
	}
	kind := RunProvision
	if dev.Status == inventory.StatusDecommissioning {
		kind = RunRetire
	}
	outcome := Provision
	if kind == RunRetire {
		outcome = Retire
	}
	wantRun := dev.DesiredAction == inventory.DesiredActionProvision

	// A run that waits for this machine gets its code. Its Workflow names
	// the code by its SHA-256 alone; a run whose code this process does not
	// hold (fleetd restarted since it started the run, and dropped the
	// config held under the code with it) is replaced by a new run.
	var replaces string
	if r := inFlight(runs, kind); r != nil && !wantRun {
		if r.Started() && r.CurrentAction() != "wipe-disk" {
			return Decision{Outcome: NoProvision, Run: r.Name(),
				Reason: fmt.Sprintf("run %s is in flight at action %s", r.Name(), r.CurrentAction())}, nil
		}
		code, ok := p.codeOf(r)
		if !ok {
			replaces = r.Name()
		} else {
			if from.IsValid() && r.WF.Annotations[annHookOS] != from.String() {
				if err := p.annotate(ctx, r.Name(), annHookOS, from.String()); err != nil {
					return Decision{}, err
				}
			}
			return Decision{Outcome: outcome, Run: r.Name(), Code: code,
				Reason: fmt.Sprintf("run %s waits for the machine", r.Name())}, nil
		}
	}

	start := wantRun || replaces != ""
	var reason string
	switch {
	case start:
	case kind == RunRetire:
		if strings.HasPrefix(dev.LastRun, RunRetire+"-") {
			reason = lastRunReason(dev.LastRun)
		} else {
			start = true
		}
	case dev.LastRun != "":
		reason = lastRunReason(dev.LastRun)
		if err := p.bootedHookOSAfter(ctx, dev, runs); err != nil {
			return Decision{}, err
		}
	case p.cluster.controlPlane(dev):
		reason = reasonControlPlane
	case dev.Status != inventory.StatusPlanned:
		reason = fmt.Sprintf("the device is %s, not planned", dev.Status)
	case !p.cfg.AutoProvision:
		reason = reasonAutoOff
	default:
		start = true
	}
	if !start {
		return Decision{Outcome: NoProvision, Reason: reason}, nil
	}
	note := "the machine attested from HookOS"
	if from.IsValid() {
		note += " at " + from.String()
	}
	if kind == RunRetire {
		note += ", and the run wipes its install disk"
	}
	if replaces != "" {
		note += fmt.Sprintf("; it replaces Workflow %s, whose install code fleetd no longer holds", replaces)
	}
	name, code, refusal, err := p.startRecorded(ctx, dev, kind, from, false, note, rec)
	if err != nil {
		return Decision{}, err
	}
	if refusal != "" {
		return Decision{Outcome: Refused, Reason: refusal}, nil
	}
	return Decision{Outcome: outcome, Run: name, Code: code, Reason: "run " + name + " started"}, nil
}

func lastRunReason(run string) string {
	return fmt.Sprintf("last run %s is not repeated; set desired_action to provision", run)
}

func refusedText(err error) string {
	return "refused a run before rendering anything: " + err.Error()
}

// inFlight returns dev's newest run of kind that has not ended.
func inFlight(runs []*run, kind string) *run {
	for _, r := range runs {
		if r.Kind == kind && !r.Terminal() {
			return r
		}
	}
	return nil
}

// bootedHookOSAfter journals, once per run, a node that attests from HookOS
// after its last run succeeded.
func (p *Provisioner) bootedHookOSAfter(ctx context.Context, dev inventory.Device, runs []*run) error {
	for _, r := range runs {
		if r.Name() != dev.LastRun {
			continue
		}
		if r.Kind != RunProvision || r.WF.Status.State != "SUCCESS" || r.WF.Annotations[annBootedHookOS] != "" {
			return nil
		}
		text := fmt.Sprintf("the node booted HookOS and attested after Workflow %s succeeded: fix its boot order so the disk comes before PXE, then set desired_action to provision", r.Name())
		if err := p.nb.Journal(ctx, dev.ID, inventory.JournalWarning, text); err != nil {
			return err
		}
		if err := p.annotate(ctx, r.Name(), annBootedHookOS, p.now().UTC().Format(time.RFC3339)); err != nil {
			return err
		}
		if p.cfg.BootedHookOSAfterInstall != nil {
			p.cfg.BootedHookOSAfterInstall(dev.Name)
		}
		return nil
	}
	return nil
}

// startRun checks, renders and starts a run of kind for dev. The caller
// holds dev's lock. A refusal (a missing field, the class, a control plane
// fleetd cannot install) is journaled and returned as refusal with nothing
// created; an error means the run did not start and no code may be
// answered.
func (p *Provisioner) startRun(ctx context.Context, dev inventory.Device, kind string, hookOS netip.Addr, netboot bool, note string) (name, code, refusal string, err error) {
	return p.startRecorded(ctx, dev, kind, hookOS, netboot, note, nil)
}

// startRecorded is startRun, whose write of the run's last_run (and the
// clearing of desired_action) carries what rec holds, when rec is not nil:
// Admit's attestation.
func (p *Provisioner) startRecorded(ctx context.Context, dev inventory.Device, kind string, hookOS netip.Addr, netboot bool, note string, rec *record) (name, code, refusal string, err error) {
	if lacks := lacking(dev); len(lacks) > 0 {
		f := joinAnd(lacks)
		if dev.DesiredAction != inventory.DesiredActionProvision {
			if err := p.nb.SetDesiredAction(ctx, dev.ID, inventory.DesiredActionProvision); err != nil {
				return "", "", "", err
			}
		}
		text := fmt.Sprintf("%s lacks %s: the run waits for %s, and desired_action stays provision", dev.Name, f, f)
		if err := p.note(ctx, dev.ID, inventory.JournalWarning, text); err != nil {
			return "", "", "", err
		}
		return "", "", (&LacksError{Node: dev.Name, Fields: lacks}).Error(), nil
	}
	if errs := validation.IsDNS1123Label(dev.Name); len(errs) > 0 {
		text := fmt.Sprintf("refused a run before rendering anything: the node name %q cannot name a Workflow: %s", dev.Name, strings.Join(errs, "; "))
		return "", "", text, p.note(ctx, dev.ID, inventory.JournalWarning, text)
	}
	image := p.cluster.Classes[dev.Class].InstallerImage
	if kind == RunProvision {
		if refusal, err := p.refuseClass(ctx, dev); refusal != "" || err != nil {
			return "", "", refusal, err
		}
	}

	now := p.now()
	name = fmt.Sprintf("%s-%s-%d", kind, dev.Name, now.Unix())
	code, err = p.configs.NewCode()
	if err != nil {
		return "", "", "", fmt.Errorf("install code for %s: %w", name, err)
	}
	if kind == RunProvision {
		var secret string
		if secret, err = p.render(ctx, dev, name, code, now); err != nil {
			return "", "", "", err
		}
		// A run that does not start leaves no token behind.
		defer func() {
			if err != nil {
				p.deleteToken(context.WithoutCancel(ctx), secret)
			}
		}()
	}
	if hasBMC(dev) {
		if err := p.ensureMachine(ctx, dev); err != nil {
			return "", "", "", err
		}
	}
	if err := p.ensureHardware(ctx, dev); err != nil {
		return "", "", "", err
	}
	// A new run replaces any run of the device that has not ended.
	old, err := p.runsOf(ctx, dev.ID)
	if err != nil {
		return "", "", "", err
	}
	for _, r := range old {
		if !r.Terminal() {
			if err := p.deleteWorkflow(ctx, r.Name()); err != nil {
				return "", "", "", err
			}
			p.dropCode(r.Name())
		}
	}
	addr := ""
	if hookOS.IsValid() {
		addr = hookOS.String()
	}
	if err := p.newWorkflow(ctx, dev, name, kind, code, image, addr, netboot, now); err != nil {
		return "", "", "", err
	}
	p.holdCode(name, code)
	if err := p.recordStart(ctx, dev, name, rec); err != nil {
		// NetBox must know every run: without last_run the run would repeat.
		p.dropCode(name)
		if derr := p.deleteWorkflow(context.WithoutCancel(ctx), name); derr != nil {
			err = errors.Join(err, derr)
		}
		return "", "", "", err
	}
	p.forget(dev.ID)
	text := fmt.Sprintf("started Workflow %s; %s", name, note)
	if p.cfg.JournalLater != nil {
		p.cfg.JournalLater(dev.ID, inventory.JournalInfo, text)
	} else if err := p.nb.Journal(ctx, dev.ID, inventory.JournalInfo, text); err != nil {
		p.log.Warn("fleet.journal", "node", dev.Name, "run", name, "error", err.Error())
	}
	return name, code, "", nil
}

func (p *Provisioner) recordStart(ctx context.Context, dev inventory.Device, name string, rec *record) error {
	var u inventory.Update
	if rec != nil {
		u = rec.u
	}
	u.LastRun = &name
	if dev.DesiredAction != "" {
		clear := ""
		u.DesiredAction = &clear
	}
	if err := p.nb.UpdateDevice(ctx, dev.ID, u); err != nil {
		return fmt.Errorf("record %s as %s's last run: %w", name, dev.Name, err)
	}
	if rec != nil {
		rec.done = true
	}
	return nil
}

// refuseClass refuses, before anything is rendered or wiped, a device whose
// class fleetd cannot install.
func (p *Provisioner) refuseClass(ctx context.Context, dev inventory.Device) (string, error) {
	var text string
	if _, _, err := p.cluster.class(dev); err != nil {
		text = fmt.Sprintf("refused a run before rendering anything: %v", err)
	} else if p.cluster.controlPlane(dev) && !p.cluster.ControlPlanes {
		text = fmt.Sprintf("%s is a control plane, and %v: no run starts, nothing is wiped, and desired_action stays provision", dev.Name, ErrControlPlanesOff)
	} else if p.cluster.controlPlane(dev) && !bundleHasKeys(p.cluster.Bundle) {
		text = fmt.Sprintf("%s is a control plane, and %v: no run starts, nothing is wiped, and desired_action stays provision", dev.Name, ErrNoBundleKeys)
	}
	if text == "" {
		return "", nil
	}
	if dev.DesiredAction != inventory.DesiredActionProvision {
		if err := p.nb.SetDesiredAction(ctx, dev.ID, inventory.DesiredActionProvision); err != nil {
			return "", err
		}
	}
	if err := p.note(ctx, dev.ID, inventory.JournalWarning, text); err != nil {
		return "", err
	}
	return text, nil
}

// render creates dev's bootstrap token, renders its config and hands it to
// Configs under code. It writes the fleet.render audit line.
func (p *Provisioner) render(ctx context.Context, dev inventory.Device, name, code string, now time.Time) (secret string, err error) {
	attrs := []any{"node", dev.Name, "device", dev.ID, "run", name, "class", dev.Class}
	fail := func(err error) (string, error) {
		p.log.Error("fleet.render", append(attrs, "error", err.Error())...)
		if secret != "" {
			p.deleteToken(context.WithoutCancel(ctx), secret)
		}
		return "", err
	}
	var sans []string
	if p.cluster.controlPlane(dev) {
		all, err := p.nb.Devices(ctx)
		if err != nil {
			return fail(fmt.Errorf("control planes for %s's certificate SANs: %w", dev.Name, err))
		}
		sans = ControlPlaneSANs(append(all, dev), p.cluster.Classes, p.cluster.ExtraSANs)
	}
	token, secret, expires, err := p.bootstrapToken(ctx, dev, name, now)
	if err != nil {
		return fail(err)
	}
	cfg, err := p.cluster.Render(dev, token, sans)
	if err != nil {
		return fail(err)
	}
	if err := p.configs.Hold(ctx, code, cfg, dev, name); err != nil {
		return fail(fmt.Errorf("hold %s's config: %w", name, err))
	}
	p.log.Info("fleet.render", append(attrs, "bytes", len(cfg), "token_expires", expires.Format(time.RFC3339))...)
	return secret, nil
}
