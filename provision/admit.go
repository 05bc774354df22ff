package provision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetkit/fleet/inventory"
)

// Claim is what fleetd knows of a machine that just passed attestation.
type Claim struct {
	// Serial is the SMBIOS serial the machine claimed.
	Serial string
	// Attestation is what the attestation proved; Admit records it on the
	// device first. Its SecureBoot is the proven boot a class that
	// requires Secure Boot (inventory.Class.RequireSecureBoot) is judged
	// by: only inventory.SecureBootOn gets such a machine an install code;
	// "" counts as a proof without a quote.
	Attestation inventory.Attestation
	// SecureBootUnknown says why Attestation.SecureBoot is
	// inventory.SecureBootUnknown (e.g. "the machine sent no event log"),
	// for the reason of a machine its class's policy refuses; "" otherwise.
	SecureBootUnknown string
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
	// Refusal says why the run was refused, for the Refused outcome of a
	// nil error; nil otherwise.
	Refusal *RefusalError
}

// RefusalError is a run refused before anything was rendered: no token,
// no config, no code, no Workflow. Its Error is the Decision's Reason, and
// Journal the line the device's NetBox journal holds, word for word as the
// runbook quotes it. errors.Is and errors.As find its Cause.
type RefusalError struct {
	// Node is the host name of the device whose run was refused.
	Node string
	// Cause is why: the switch-port check's error; a *LacksError
	// (ErrLacks); ErrNodeName; an error wrapping ErrFirstControlPlane or
	// ErrClass; ErrControlPlanesOff; or ErrNoBundleKeys.
	Cause error

	reason  string
	journal string
}

func (e *RefusalError) Error() string { return e.reason }

// Unwrap returns the Cause.
func (e *RefusalError) Unwrap() error { return e.Cause }

// Journal returns the journal line of the refusal.
func (e *RefusalError) Journal() string { return e.journal }

// ErrNodeName: the device's host name cannot name a Workflow (it is not a
// DNS-1123 label).
var ErrNodeName = errors.New("the node name cannot name a Workflow")

// refusal is the refusal of dev's run for cause, with the journal line
// lineRefused of cause's text; reason "" means the line.
func refusal(node string, cause error, reason string) *RefusalError {
	line := fmt.Sprintf(lineRefused, cause.Error())
	if reason == "" {
		reason = line
	}
	return &RefusalError{Node: node, Cause: cause, reason: reason, journal: line}
}

// waitsRefusal is the refusal of a run whose device waits with
// desired_action=provision for what cause names: its journal line is line,
// then that desired_action stays provision (tailWaits); reason "" means
// the line.
func waitsRefusal(node string, cause error, reason, line string) *RefusalError {
	line += tailWaits
	if reason == "" {
		reason = line
	}
	return &RefusalError{Node: node, Cause: cause, reason: reason, journal: line}
}

// nodeNameError refuses a host name that cannot name a Workflow.
// errors.Is finds ErrNodeName.
type nodeNameError struct {
	name string
	errs []string // validation.IsDNS1123Label's
}

func (e *nodeNameError) Error() string {
	return fmt.Sprintf("the node name %q cannot name a Workflow: %s", e.name, strings.Join(e.errs, "; "))
}

func (e *nodeNameError) Is(target error) bool { return target == ErrNodeName }

// errNoPortCheck refuses a claim that came without a switch-port check.
var errNoPortCheck = errors.New("no switch-port check was given for the claim")

// The reasons of a no-provision decision, as the attest.install audit line
// gives them.
const (
	reasonControlPlane = "a control plane waits for desired_action=provision"
	reasonAutoOff      = "auto-provision is off"
	reasonBootOff      = "Secure Boot is off"
	reasonBootUnknown  = "Secure Boot is unknown"
	reasonBootUnquoted = "the TPM sent no quote of its boot"
)

// secureBootReason says why the boot c proved does not meet the Secure
// Boot policy of dev's class, for a provision run; "" when it does, or
// the class requires nothing.
func (p *Provisioner) secureBootReason(dev inventory.Device, c Claim) string {
	if !p.cluster.Classes[dev.Class].RequireSecureBoot {
		return ""
	}
	switch sb := c.Attestation.SecureBoot; sb {
	case inventory.SecureBootOn:
		return ""
	case inventory.SecureBootOff:
		return reasonBootOff
	case inventory.SecureBootUnknown:
		if c.SecureBootUnknown != "" {
			return reasonBootUnknown + ": " + c.SecureBootUnknown
		}
		return reasonBootUnknown
	case inventory.SecureBootUnquoted, "":
		return reasonBootUnquoted
	default:
		return "Secure Boot is " + sb
	}
}

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
//     after it;
//   - and, where a provision run's code would be answered (a waiting run's,
//     or a run it would start), answers no provision instead when the
//     device's class requires Secure Boot (inventory.Class.RequireSecureBoot)
//     and the boot the TPM quoted is not Secure Boot on: nothing is
//     rendered, and a waiting run keeps waiting for a boot that passes. A
//     retirement is not held to the policy: it renders no secret, and it
//     wipes the disk.
//
// An admission costs NetBox one write of the device's fields (the
// attestation, with the last_run of the run it starts, or the
// desired_action of a refused run that waits for a fix), the MAC's writes
// only when the device does not hold the claimed MAC yet, and a started
// run's journal line, which Config.JournalLater may queue; it reads nothing
// when the caller hands it the device (Claim.Device).
//
// It writes these lines to the device's NetBox journal, each named once
// in lines.go, word for word: lineStarted with noteAttested (noteAt the
// address the machine attested from in HookOS; noteRetire for a
// retirement; noteReplaces for a run that replaces a waiting run whose
// code fleetd lost); lineRefused with the switch-port check's error (e.g.
// "on port 7, expected 5") or, for any run of the cluster's first control
// plane whatever desired_action says, ErrFirstControlPlane's refusal
// (Cluster.FirstControlPlane); lineLacks (the fields are MAC, install_disk
// and install_disk_serial, joined with ", " and " and ") and
// lineControlPlaneOff (ErrControlPlanesOff or ErrNoBundleKeys), each with
// tailWaits; lineBootedHookOS; and lineNoProvision with the Secure Boot
// reason (reasonBootOff, reasonBootUnknown and why, reasonBootUnquoted).
//
// A refusal's line is written once per process while it stays the same;
// the switch-port line and a Secure Boot line at every attestation they
// refuse.
// The booted-HookOS line is written once per run (the Workflow is
// annotated), and then Config.BootedHookOSAfterInstall is called.
//
// Every call ends in one slog record with the message attest.install and
// the attributes serial, outcome ("provision", "retire", "no provision",
// "refused"), reason, node, device and run, and error when it failed. The
// reason of "no provision" is one of:
//
//	last run <run> is not repeated; set desired_action to provision
//	a control plane waits for desired_action=provision
//	a control plane waits, and fleetd runs without control-plane support (homelab.fleetd.controlPlanes): no run starts, nothing is wiped, even with desired_action=provision
//	         (or: fleetd holds no secrets bundle with the cluster's CA keys)
//	auto-provision is off
//	the device is <status>, not planned
//	run <run> is in flight at action <action>
//	Secure Boot is off
//	Secure Boot is unknown: <why, e.g. the machine sent no event log>
//	the TPM sent no quote of its boot
//
// Every render writes a fleet.render record with node, device, run, class,
// and bytes and token_expires, or error. When the bootstrap token cannot be
// created, both records carry the error
// "create <node>'s bootstrap token: <cause>".
//
// An error means no code may be answered: errors.Is finds
// inventory.ErrUnavailable (NetBox did not answer), ErrBootstrapToken, or
// another cause of a run that did not start.
func (p *Provisioner) Admit(ctx context.Context, c Claim) (Decision, error) {
	d, dev, err := p.admit(ctx, c)
	outcome, level := d.Outcome, slog.LevelInfo
	if err != nil {
		outcome, level = Refused, slog.LevelError
	}
	attrs := []slog.Attr{slog.String("serial", c.Serial), slog.String("outcome", outcome.String()), slog.String("reason", d.Reason)}
	if dev.ID != 0 {
		attrs = append(attrs, slog.String("node", dev.Name), slog.Int64("device", dev.ID))
	}
	if d.Run != "" {
		attrs = append(attrs, slog.String("run", d.Run))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
		d = Decision{Outcome: Refused, Reason: err.Error()}
	}
	p.log.LogAttrs(ctx, level, "attest.install", attrs...)
	return d, err
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

// decide is Admit's decision on dev, which holds the attestation's MAC:
// the shell around plan. Under the device's lock it reads the facts (the
// port's verdict, the device's runs, the code of the run that waits for
// the machine), has plan decide, and applies the plan (apply). The
// attestation's fields wait in rec: the started run's last_run write
// carries them, and Admit writes them when no run started.
func (p *Provisioner) decide(ctx context.Context, c Claim, dev inventory.Device, rec *record) (Decision, error) {
	a := c.Attestation
	dev.AttestedSwitchPort, dev.AttestedAt, dev.AttestVerdict = a.SwitchPort, a.At, a.Verdict
	dev.AttestedEKHash, dev.AttestedEKHashECC = a.EKHash, a.EKHashECC
	dev.AttestedSecureBoot, dev.AttestedPCR7 = a.SecureBoot, a.PCR7

	f := facts{dev: dev, claim: c, from: c.From, portErr: errNoPortCheck}
	if !f.from.IsValid() && dev.Address.IsValid() {
		f.from = dev.Address.Addr()
	}

	unlock := p.lockDevice(dev.ID)
	defer unlock()

	if c.CheckPort != nil {
		f.portErr = c.CheckPort(dev.SwitchPort)
	}
	if f.portErr == nil {
		var err error
		if f.runs, err = p.runsOf(ctx, dev.ID); err != nil {
			return Decision{}, err
		}
		// The code of the run that waits for the machine, wherever a
		// replica holds it: only a claim that asks no new run can get it.
		if r := inFlight(f.runs, runKind(dev)); r != nil && awaitsMachine(r) && dev.DesiredAction != inventory.DesiredActionProvision {
			var held bool
			if f.code, held = p.codeOf(r); !held {
				f.code, _ = p.peerCodeOf(ctx, r)
			}
		}
	}
	return p.apply(ctx, dev, p.plan(f), rec)
}

// facts are what an admission decides on, as the shell (decide) read them
// under the device's lock.
type facts struct {
	// dev is the device, with the attestation's fields.
	dev   inventory.Device
	claim Claim
	// from is the address the machine attested from in HookOS; the zero
	// Addr: unknown.
	from netip.Addr
	// portErr is the switch-port check's verdict; nil: the port holds.
	portErr error
	// runs are the device's runs, newest first; nil when the port refused.
	runs []*run
	// code is the install code of the run that waits for the machine,
	// when a replica holds it; "": none.
	code string
}

// admissionPlan is what plan decided: the answer, and what the shell
// does for it, in this order: the journal line, the annotation of the
// waiting run, the booted-HookOS line, the run to start.
type admissionPlan struct {
	decision Decision
	// line is written to the device's journal: a warning (the port's or
	// the boot's refusal, written at every attestation it refuses), or,
	// with once, a refusal written once while it stays the same.
	line string
	once bool
	// waits sets desired_action to provision in the device's one write: a
	// refused run that waits for a fix.
	waits bool
	// annotate is the waiting run whose Workflow gets from, the address
	// the machine attests from (annHookOS).
	annotate *run
	from     string
	// booted is the succeeded last run after which the node booted HookOS
	// again: journaled, once per run.
	booted *run
	// start is the run to start, when set; decision then holds its
	// outcome, and the shell fills in its name and code.
	start *runStart
}

// plan decides an admission from its facts alone: it reads only the
// Provisioner's cluster and settings, and does no I/O. See Admit for what
// each decision means.
func (p *Provisioner) plan(f facts) admissionPlan {
	dev := f.dev
	if f.portErr != nil {
		ref := refusal(dev.Name, f.portErr, f.portErr.Error())
		return admissionPlan{decision: refused(ref), line: ref.Journal()}
	}
	kind := runKind(dev)
	wantRun := dev.DesiredAction == inventory.DesiredActionProvision
	// The class's Secure Boot policy gates every install code of a
	// provision run; a retirement renders no secret and wipes the disk.
	bootReason := ""
	if kind == RunProvision {
		bootReason = p.secureBootReason(dev, f.claim)
	}
	bootRefused := admissionPlan{decision: Decision{Outcome: NoProvision, Reason: bootReason}, line: fmt.Sprintf(lineNoProvision, bootReason)}

	// A run that waits for this machine gets its code. Its Workflow names
	// the code by its SHA-256 alone; a run whose code no replica holds
	// (fleetd restarted since it started the run, and dropped the config
	// held under the code with it) is replaced by a new run.
	replaces := ""
	if r := inFlight(f.runs, kind); r != nil && !wantRun {
		switch {
		case !awaitsMachine(r):
			return admissionPlan{decision: Decision{Outcome: NoProvision, Run: r.Name(),
				Reason: fmt.Sprintf("run %s is in flight at action %s", r.Name(), r.CurrentAction())}}
		case bootReason != "":
			return bootRefused
		case f.code == "":
			replaces = r.Name()
		default:
			pl := admissionPlan{decision: Decision{Outcome: outcomeOf(kind), Run: r.Name(), Code: f.code,
				Reason: fmt.Sprintf("run %s waits for the machine", r.Name())}}
			if f.from.IsValid() && r.WF.Annotations[annHookOS] != f.from.String() {
				pl.annotate, pl.from = r, f.from.String()
			}
			return pl
		}
	}
	if !wantRun && replaces == "" {
		if reason := p.noRunReason(dev, kind); reason != "" {
			return admissionPlan{decision: Decision{Outcome: NoProvision, Reason: reason}, booted: bootedAfter(dev, f.runs)}
		}
	}
	if bootReason != "" {
		return bootRefused
	}
	if ref, waits := p.refusalOf(dev, kind); ref != nil {
		return admissionPlan{decision: refused(ref), line: ref.Journal(), once: true,
			waits: waits && dev.DesiredAction != inventory.DesiredActionProvision}
	}
	return admissionPlan{decision: Decision{Outcome: outcomeOf(kind)},
		start: &runStart{kind: kind, hookOS: f.from, note: admittedNote(f.from, kind, replaces), runs: &f.runs}}
}

// apply carries out the plan pl for dev, whose lock the caller holds, and
// returns its decision: the journal line, the annotation, the
// booted-HookOS line, the run's start, in that order; a refused run's
// desired_action joins the attestation's one write (rec), which Admit
// sends.
func (p *Provisioner) apply(ctx context.Context, dev inventory.Device, pl admissionPlan, rec *record) (Decision, error) {
	switch {
	case pl.line != "" && pl.once:
		if pl.waits {
			provision := inventory.DesiredActionProvision
			rec.u.DesiredAction = &provision
		}
		if err := p.note(ctx, dev.ID, inventory.JournalWarning, pl.line); err != nil {
			return Decision{}, err
		}
	case pl.line != "":
		if err := p.nb.Journal(ctx, dev.ID, inventory.JournalWarning, pl.line); err != nil {
			return Decision{}, err
		}
	}
	if pl.annotate != nil {
		if err := p.annotate(ctx, pl.annotate.Name(), annHookOS, pl.from); err != nil {
			return Decision{}, err
		}
	}
	if pl.booted != nil {
		if err := p.bootedHookOSAfter(ctx, dev, pl.booted); err != nil {
			return pl.decision, err
		}
	}
	if pl.start == nil {
		return pl.decision, nil
	}
	o := *pl.start
	o.rec = rec
	name, code, err := p.start(ctx, dev, o)
	if err != nil {
		return Decision{}, err
	}
	d := pl.decision
	d.Run, d.Code, d.Reason = name, code, "run "+name+" started"
	return d, nil
}

// refused is the decision of a refused run.
func refused(ref *RefusalError) Decision {
	return Decision{Outcome: Refused, Reason: ref.Error(), Refusal: ref}
}

// runKind is the kind of run dev gets: a retirement when it is
// decommissioning.
func runKind(dev inventory.Device) RunKind {
	if dev.Status == inventory.StatusDecommissioning {
		return RunRetire
	}
	return RunProvision
}

// noRunReason says why an attestation starts no run of kind for dev, which
// does not ask for one with desired_action and has none waiting; "" means
// a run starts: a retirement that has not run, or a planned worker that
// never ran while auto-provision is on.
func (p *Provisioner) noRunReason(dev inventory.Device, kind RunKind) string {
	switch {
	case kind == RunRetire:
		if strings.HasPrefix(dev.LastRun, string(RunRetire)+"-") {
			return lastRunReason(dev.LastRun)
		}
		return ""
	case dev.LastRun != "":
		return lastRunReason(dev.LastRun)
	case p.cluster.controlPlane(dev):
		if cause := p.controlPlaneCause(); cause != nil {
			return controlPlaneWaits(cause)
		}
		return reasonControlPlane
	case dev.Status != inventory.StatusPlanned:
		return fmt.Sprintf("the device is %s, not planned", dev.Status)
	case !p.cfg.AutoProvision:
		return reasonAutoOff
	}
	return ""
}

// awaitsMachine reports whether the run r, not ended, still waits for its
// machine's attestation: no action of it has passed wipe-disk.
func awaitsMachine(r *run) bool { return !r.Started() || r.CurrentAction() == "wipe-disk" }

// outcomeOf is the outcome of a run of kind that waits for the machine.
func outcomeOf(kind RunKind) Outcome {
	if kind == RunRetire {
		return Retire
	}
	return Provision
}

// admittedNote is the end of the started line of a run that an attestation
// from HookOS at from starts.
func admittedNote(from netip.Addr, kind RunKind, replaces string) string {
	note := noteAttested
	if from.IsValid() {
		note += fmt.Sprintf(noteAt, from)
	}
	if kind == RunRetire {
		note += noteRetire
	}
	if replaces != "" {
		note += fmt.Sprintf(noteReplaces, replaces)
	}
	return note
}

func lastRunReason(run string) string {
	return fmt.Sprintf("last run %s is not repeated; set desired_action to provision", run)
}

// inFlight returns dev's newest run of kind that has not ended.
func inFlight(runs []*run, kind RunKind) *run {
	for _, r := range runs {
		if kindOf(r) == kind && !r.Terminal() {
			return r
		}
	}
	return nil
}

// bootedAfter returns dev's last run when it is a provision run that
// succeeded and no line yet says that the node booted HookOS after it;
// nil otherwise.
func bootedAfter(dev inventory.Device, runs []*run) *run {
	for _, r := range runs {
		if r.Name() != dev.LastRun {
			continue
		}
		if kindOf(r) != RunProvision || r.WF.Status.State != "SUCCESS" || r.WF.Annotations[annBootedHookOS] != "" {
			return nil
		}
		return r
	}
	return nil
}

// bootedHookOSAfter journals that the node attested from HookOS after its
// run r succeeded (bootedAfter), and annotates r so that the line is
// written once per run.
func (p *Provisioner) bootedHookOSAfter(ctx context.Context, dev inventory.Device, r *run) error {
	text := fmt.Sprintf(lineBootedHookOS, r.Name())
	if err := p.nb.Journal(ctx, dev.ID, inventory.JournalWarning, text); err != nil {
		return err
	}
	if err := p.annotate(ctx, r.Name(), annBootedHookOS, time.Now().UTC().Format(time.RFC3339)); err != nil {
		return err
	}
	if p.cfg.BootedHookOSAfterInstall != nil {
		p.cfg.BootedHookOSAfterInstall(dev.Name)
	}
	return nil
}

// runStart is what starts a run besides its device.
type runStart struct {
	kind RunKind
	// hookOS is the address the machine attests from in HookOS; the zero
	// Addr: unknown.
	hookOS netip.Addr
	// netboot asks Tinkerbell to power-cycle the machine into HookOS with
	// a Rufio job first: a run started without a fresh claim.
	netboot bool
	// note ends the journal line of the started run.
	note string
	// rec, when set, is Admit's attestation: the write of the run's
	// last_run (and the clearing of desired_action) carries it.
	rec *record
	// runs, when set, are the device's runs as the caller read them under
	// the device's lock; nil: startRun reads them.
	runs *[]*run
}

// startRun checks, renders and starts a run for dev. The caller holds
// dev's lock. A refusal (a missing field, the node's name, the class, a
// control plane fleetd cannot install) is journaled and returned as a
// *RefusalError with nothing created; any error means the run did not
// start and no code may be answered.
func (p *Provisioner) startRun(ctx context.Context, dev inventory.Device, o runStart) (name, code string, err error) {
	if err := p.refuseRun(ctx, dev, o.kind); err != nil {
		return "", "", err
	}
	return p.start(ctx, dev, o)
}

// start renders and starts a run for dev, which refusalOf lets have it.
// The caller holds dev's lock. It gives way to a run another replica is
// starting (ErrRunRaced); any error means the run did not start and no
// code may be answered.
func (p *Provisioner) start(ctx context.Context, dev inventory.Device, o runStart) (name, code string, err error) {
	now := time.Now()
	if r := p.starting(ctx, dev, o.runs, now); r != nil {
		return "", "", fmt.Errorf("%w: %s, which NetBox does not name yet, was created %v ago", ErrRunRaced, r.Name(), now.Sub(r.Created()).Round(time.Second))
	}
	image := p.cluster.Classes[dev.Class].InstallerImage
	name = runName(o.kind, dev, now, o.runs)
	code, err = p.configs.NewCode()
	if err != nil {
		return "", "", fmt.Errorf("install code for %s: %w", name, err)
	}
	// A provision run's bootstrap token is drawn first, so that its
	// Workflow names it from its create on: a run that stops half started
	// (its replica killed) leaves its token where the run that supersedes
	// it finds it.
	var tok bootToken
	if o.kind == RunProvision {
		if tok, err = newBootToken(); err != nil {
			return "", "", &tokenError{node: dev.Name, err: err}
		}
	}
	if hasBMC(dev) {
		if err := p.ensureMachine(ctx, dev); err != nil {
			return "", "", err
		}
	}
	if err := p.ensureHardware(ctx, dev); err != nil {
		return "", "", err
	}
	superseded, err := p.endRuns(ctx, dev.ID, o.runs)
	if err != nil {
		return "", "", err
	}
	addr := ""
	if o.hookOS.IsValid() {
		addr = o.hookOS.String()
	}
	if err := p.newWorkflow(ctx, dev, name, o.kind, code, image, addr, tok.secretName(), o.netboot, now); err != nil {
		return "", "", err
	}
	// From here a run that does not start leaves nothing behind: its
	// token, its config, its code, and then its Workflow (kept when the
	// token could not be deleted: it names it for the run that supersedes
	// it).
	run, tokenMade := name, false // the returns below clear name
	defer func() {
		if err == nil {
			return
		}
		cctx := context.WithoutCancel(ctx)
		p.dropCode(run)
		p.dropConfig(cctx, run)
		if tokenMade && p.deleteToken(cctx, tok.secretName()) != nil {
			return
		}
		if derr := p.deleteWorkflow(cctx, run); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	// Held from the create on, the code tells other starts that this run
	// is starting (starting), however long its render and giveWay take
	// on a loaded NetBox or API server; it is answered once the run
	// stands.
	p.holdCode(name, code)
	if o.kind == RunProvision {
		if tokenMade, err = p.render(ctx, dev, name, code, tok, now); err != nil {
			return "", "", err
		}
	}
	if p.cfg.Shared {
		if err = p.giveWay(ctx, dev, name); err != nil {
			return "", "", err
		}
	}
	p.codeStands(name)
	if err = p.recordStart(ctx, dev, name, o.rec); err != nil {
		// NetBox must know every run: without last_run the run would
		// repeat. (The deferred clean-up lets go of it.)
		return "", "", err
	}
	p.forget(dev.ID)
	if len(superseded) > 0 {
		// The runs this one replaces leave no config to fetch and no
		// token to join with.
		p.supersede(context.WithoutCancel(ctx), dev, name, superseded)
	}
	text := fmt.Sprintf(lineStarted, name, o.note)
	if p.cfg.RunStarted != nil {
		p.cfg.RunStarted(o.kind)
	}
	if p.cfg.JournalLater != nil {
		p.cfg.JournalLater(dev.ID, inventory.JournalInfo, text)
	} else {
		// The run exists and NetBox names it: its line is written even
		// when the caller's context has ended.
		jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
		defer cancel()
		if err := p.nb.Journal(jctx, dev.ID, inventory.JournalInfo, text); err != nil {
			p.log.Warn("fleet.journal", "node", dev.Name, "run", name, "error", err.Error())
			if p.cfg.JournalUnwritten != nil {
				p.cfg.JournalUnwritten(dev.ID, inventory.JournalInfo, text)
			}
		}
	}
	return name, code, nil
}

// A run not ended that NetBox does not name as the device's last_run may
// be a start in progress: an admission or a pass at another replica, between
// its Workflow's create and its last_run write (fleetd bounds an admission
// to a minute). It is one while it is younger than startSettle, or while a
// replica holds its install code (the starter holds it from just after the
// create until the run ends) and it is younger than startGrace. Otherwise
// its starter died or gave up, and a new run replaces it.
const (
	startSettle = 5 * time.Second
	startGrace  = 2 * time.Minute
)

// starting returns a run of dev that another replica's start has in
// progress (see startSettle): a new run gives way to it rather than delete
// it, since its code may be on its way to the machine. Only Provisioners
// that share a cluster (Config.Shared) meet them: one Provisioner's starts
// hold the device's lock. runs nil: none is known.
func (p *Provisioner) starting(ctx context.Context, dev inventory.Device, runs *[]*run, now time.Time) *run {
	if runs == nil || !p.cfg.Shared {
		return nil
	}
	for _, r := range *runs {
		if r.Terminal() || r.Name() == dev.LastRun || r.WF.DeletionTimestamp != nil {
			continue
		}
		age := now.Sub(r.Created())
		if age < startSettle {
			return r
		}
		if age >= startGrace {
			continue
		}
		if _, held := p.codeOf(r); held {
			return r
		}
		if _, held := p.peerCodeOf(ctx, r); held {
			return r
		}
	}
	return nil
}

// runName names a run of kind for dev started at now:
// <kind>-<node>-<unix seconds>. A run that replaces one started in the same
// second (a machine admitted, and desired_action set at once) takes the
// next free second, so that no two runs of a device share a name: the
// name is how a run's config and token are let go of.
func runName(kind RunKind, dev inventory.Device, now time.Time, runs *[]*run) string {
	taken := map[string]bool{dev.LastRun: true}
	if runs != nil {
		for _, r := range *runs {
			taken[r.Name()] = true
		}
	}
	for sec := now.Unix(); ; sec++ {
		if name := fmt.Sprintf("%s-%s-%d", kind, dev.Name, sec); !taken[name] {
			return name
		}
	}
}

// refuseRun refuses, before anything is rendered or wiped, a run of kind
// that dev cannot have: a missing field, a name that cannot name a
// Workflow, or (for a provision run) a class fleetd cannot install. It
// journals the refusal (once while the line stays the same), sets
// desired_action to provision where the device waits for a fix, and
// returns it as a *RefusalError.
func (p *Provisioner) refuseRun(ctx context.Context, dev inventory.Device, kind RunKind) error {
	ref, waits := p.refusalOf(dev, kind)
	if ref == nil {
		return nil
	}
	if waits && dev.DesiredAction != inventory.DesiredActionProvision {
		if err := p.nb.SetDesiredAction(ctx, dev.ID, inventory.DesiredActionProvision); err != nil {
			return err
		}
	}
	if err := p.note(ctx, dev.ID, inventory.JournalWarning, ref.Journal()); err != nil {
		return err
	}
	return ref
}

// refusalOf judges whether dev can have a run of kind; waits says that the
// device keeps desired_action=provision until it is fixed.
func (p *Provisioner) refusalOf(dev inventory.Device, kind RunKind) (ref *RefusalError, waits bool) {
	if ref := p.firstControlPlaneRefusal(dev); ref != nil {
		return ref, false
	}
	if lacks := lacking(dev); len(lacks) > 0 {
		f := joinAnd(lacks)
		cause := &LacksError{Node: dev.Name, Fields: lacks}
		return waitsRefusal(dev.Name, cause, cause.Error(), fmt.Sprintf(lineLacks, dev.Name, f, f)), true
	}
	if errs := validation.IsDNS1123Label(dev.Name); len(errs) > 0 {
		return refusal(dev.Name, &nodeNameError{name: dev.Name, errs: errs}, ""), false
	}
	if kind != RunProvision {
		return nil, false
	}
	if _, _, err := p.cluster.class(dev); err != nil {
		return refusal(dev.Name, err, ""), true
	}
	if cause := p.controlPlaneCause(); cause != nil && p.cluster.controlPlane(dev) {
		line := fmt.Sprintf(lineControlPlaneOff, dev.Name, cause)
		return waitsRefusal(dev.Name, cause, "", line), true
	}
	return nil, false
}

// controlPlaneCause is why fleetd can run no control plane at all:
// ErrControlPlanesOff, ErrNoBundleKeys, or nil when it can.
func (p *Provisioner) controlPlaneCause() error {
	switch {
	case !p.cluster.ControlPlanes:
		return ErrControlPlanesOff
	case !bundleHasKeys(p.cluster.Bundle):
		return ErrNoBundleKeys
	}
	return nil
}

// controlPlaneWaits is the no-provision reason of a control plane that
// attests without desired_action=provision while fleetd can run no control
// plane (cause): setting desired_action alone starts no run.
func controlPlaneWaits(cause error) string {
	return fmt.Sprintf("a control plane waits, and %v: no run starts, nothing is wiped, even with desired_action=provision", cause)
}

// firstControlPlaneRefusal is the refusal of any run of the device at the
// address of the cluster's first control plane; nil for any other device.
func (p *Provisioner) firstControlPlaneRefusal(dev inventory.Device) *RefusalError {
	first := p.cluster.firstControlPlane()
	if !first.IsValid() || !dev.Address.IsValid() || dev.Address.Addr().Unmap() != first {
		return nil
	}
	return refusal(dev.Name, fmt.Errorf("%s is at API_SERVER_IP %s: %w; no run starts, nothing is wiped", dev.Name, first, ErrFirstControlPlane), "")
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
		// The write may have landed though its answer did not come (the
		// context ended, or the answer was lost): NetBox then names the
		// run, which must exist.
		if !p.lastRunIs(ctx, dev, name) {
			return fmt.Errorf("record %s as %s's last run: %w", name, dev.Name, err)
		}
		p.log.Warn("fleet.journal", "node", dev.Name, "run", name, "error", err.Error(), "recorded", "NetBox holds the run as last_run")
	}
	if rec != nil {
		rec.done = true
	}
	return nil
}

// lastRunIs reads dev back from NetBox, on a context of its own, and
// reports whether its last_run is run.
func (p *Provisioner) lastRunIs(ctx context.Context, dev inventory.Device, run string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
	defer cancel()
	got, err := p.nb.DeviceBySerial(ctx, dev.Serial)
	return err == nil && got.ID == dev.ID && got.LastRun == run
}

// mayHaveCreated reports whether a create that returned err may still
// have created its object: the API server's answer did not come, or said
// the request timed out.
func mayHaveCreated(err error) bool {
	var status apierrors.APIStatus
	return !errors.As(err, &status) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// readBackTimeout bounds the writes and reads a run's start completes after
// its caller's context ended.
const readBackTimeout = 10 * time.Second

// render creates dev's bootstrap token tok (the run's Workflow names it
// already), renders its config and hands it to Configs under code, and
// reports whether it created the token, or may have (a create that got no
// answer). It writes the fleet.render audit
// line. What it created stays for the caller to delete when the run does
// not start.
func (p *Provisioner) render(ctx context.Context, dev inventory.Device, name, code string, tok bootToken, now time.Time) (tokenMade bool, err error) {
	attrs := []any{"node", dev.Name, "device", dev.ID, "run", name, "class", dev.Class}
	fail := func(err error) (bool, error) {
		p.log.Error("fleet.render", append(attrs, "error", err.Error())...)
		return tokenMade, err
	}
	var sans []string
	if p.cluster.controlPlane(dev) {
		all, err := p.nb.Devices(ctx)
		if err != nil {
			return fail(fmt.Errorf("control planes for %s's certificate SANs: %w", dev.Name, err))
		}
		sans = inventory.ControlPlaneSANs(append(all, dev), p.cluster.Classes, p.cluster.ExtraSANs)
	}
	expires, err := p.createToken(ctx, dev, name, tok, now)
	if err != nil {
		// A create whose answer did not come, or timed out in the API
		// server, may have made the token: it is the caller's to delete
		// with the rest. One the API server refused was not made.
		tokenMade = mayHaveCreated(err)
		return fail(err)
	}
	tokenMade = true
	cfg, err := p.cluster.Render(dev, tok.String(), sans)
	if err != nil {
		return fail(err)
	}
	if err := p.configs.Hold(ctx, code, cfg, dev, name); err != nil {
		return fail(fmt.Errorf("hold %s's config: %w", name, err))
	}
	p.log.Info("fleet.render", append(attrs, "bytes", len(cfg), "token_expires", expires.Format(time.RFC3339))...)
	return true, nil
}
