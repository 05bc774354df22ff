package provision

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/inventory"
)

// Pass tells what one Reconcile pass saw and did.
type Pass struct {
	Devices int      // devices NetBox listed
	Runs    int      // fleet Workflows the cluster listed
	Started []string // Workflows started from desired_action or retirement, by name
	Ended   []string // Workflows whose end (or lost reports) was journaled, by name
	Deleted []string // Workflows deleted (they never reported their first action), by name

	recheck bool // ask NetBox before journaling a run's end (Provisioner.recheck)
}

// The actions during which a run's last reports may be lost while the node
// already has its install: a passed global timeout then is only noted.
var lateActions = map[string]bool{"install": true, "next-boot": true, "reboot": true}

const maxBackoff = 5 * time.Minute

// passWorkers is how many devices a Reconcile pass works on at once.
const passWorkers = 16

// Run runs the loop until ctx is done: a Reconcile pass every
// Config.Interval, backing off (doubling up to 5 minutes) while passes
// fail. It polls rather than watches. It returns ctx's error. Run keeps
// nothing a restart needs: runs are Workflows labelled
// app.kubernetes.io/managed-by=fleet and fleet.fleetkit.dev/device-id, and
// each pass reads the devices from NetBox and the runs from the cluster, so
// a restart mid-run picks every run up at the next pass (it loses only the
// install codes of waiting runs, as Admit says).
func (p *Provisioner) Run(ctx context.Context) error { return p.run(ctx, nil) }

// errNotLeading stops a pass whose replica no longer knows itself the
// leader.
var errNotLeading = errors.New("provision: this replica no longer holds the Lease")

// run is Run; leads, when not nil, is asked before each pass and before
// each device a pass works on, and a false stops the pass: a leader that
// lost its Lease without noticing (its process was frozen past the Lease)
// must not act on what it read before.
func (p *Provisioner) run(ctx context.Context, leads func() bool) error {
	// Another process may have led meanwhile, and stopped between a line
	// and its mark.
	p.recheck.Store(true)
	wait := p.cfg.Interval
	for {
		if _, err := p.reconcile(ctx, leads); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			wait = min(wait*2, maxBackoff)
			p.log.Warn("fleet.loop", "error", err.Error(), "retry_in", wait.String())
		} else {
			wait = p.cfg.Interval
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Reconcile runs one pass: it reads every device from NetBox and every
// fleet Workflow from the cluster (one call each), journals the runs that
// ended, deletes runs that never reported their first action within their
// global timeout, and starts the runs that desired_action or a retirement
// asks for. A pass costs 2 API calls plus one or two per change, and works
// on up to 16 devices at once (a device's runs one after another). Errors
// of single devices or runs do not stop the pass; they are joined in the
// returned error.
//
// A pass writes these lines to the device's NetBox journal, each named
// once in lines.go, word for word: lineStarted with noteRufio (and
// noteRetire); lineNoBMC and lineNoPortCheck; lineEndedSuccess (tailWiped
// for a retirement); lineEnded, for a run that ended FAILED or TIMEOUT,
// naming the action that failed or timed out, since the Workflow's own
// message says only "action completed", and the address under which its
// output is in HookOS's journal on the Tinkerbell host (tailDanger for a
// retirement); lineNeverReported (lineNeverReportedRetire with tailDanger);
// linePassed, for a late action (install, next-boot, reboot) current past
// the global timeout of an active node; lineBMCFailed, with the BMC's words
// from Rufio's failed Task; lineRufioFailed; lineUnknownAction, for any
// desired_action but provision and empty, such as Provision or
// reprovision (the device is then treated as if it were empty);
// and the refusals Admit lists. A run that ended without success (but
// TIMEOUT while install, next-boot or reboot was current) or that was
// deleted leaves nothing behind: its config is dropped wherever it waits
// (Configs.Drop) and its bootstrap token deleted; so does every run a new
// run of the device replaces. A line a waiting device repeats on every
// pass (lacking, refused, no BMC) is written once per process. Ended lines
// (and the Rufio and never-reported lines) are written once per run: the
// Workflow is annotated afterwards (or deleted), so a restart does not
// repeat them, and a line whose annotation failed is not written again;
// the first passes after New or Run ask NetBox (JournalReader) before
// writing one, since a process stopped, or a leader replaced, between the
// line and the annotation leaves the annotation undone. After a failed Rufio job desired_action is
// set to provision again, so that a machine powered on by hand gets a run
// at its attestation; the loop power-cycles it again only after
// Config.PowerRetry, or after the lesser of a minute and PowerRetry when
// the Job failed on Rufio's side with no BMC task failed.
func (p *Provisioner) Reconcile(ctx context.Context) (Pass, error) { return p.reconcile(ctx, nil) }

func (p *Provisioner) reconcile(ctx context.Context, leads func() bool) (Pass, error) {
	if leads != nil && !leads() {
		return Pass{}, errNotLeading
	}
	pass := Pass{recheck: p.recheck.Load()}
	devs, err := p.nb.Devices(ctx)
	if err != nil {
		return pass, fmt.Errorf("list devices: %w", err)
	}
	mark := p.codeMark()
	runs, err := p.listRuns(ctx)
	if err != nil {
		return pass, err
	}
	p.pruneCodes(mark, runs)
	p.pruneJournaled(runs)
	p.pruneSucceeded(runs)
	now := time.Now()
	pass.Devices, pass.Runs = len(devs), len(runs)
	byID := make(map[int64]*inventory.Device, len(devs))
	for i := range devs {
		byID[devs[i].ID] = &devs[i]
	}
	sortNewest(runs)
	runsOf := map[int64][]*run{}
	for _, r := range runs {
		runsOf[r.DeviceID] = append(runsOf[r.DeviceID], r)
	}
	// Devices are worked on at once, passWorkers at a time: a pass in
	// which hundreds of runs ended, or hundreds of runs are asked for,
	// waits on NetBox and the cluster for each, and concurrent journal
	// lines share NetBox requests. A device's runs are watched one after
	// another, newest first, then its due run started.
	var mu sync.Mutex
	var errs []error
	work := make(chan *inventory.Device)
	var wg sync.WaitGroup
	for range min(passWorkers, len(devs)) {
		wg.Go(func() {
			for dev := range work {
				if leads != nil && !leads() {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", dev.Name, errNotLeading))
					mu.Unlock()
					continue
				}
				part := Pass{recheck: pass.recheck}
				var failed []error
				for _, r := range runsOf[dev.ID] {
					if r.Reported() != "" {
						continue
					}
					if err := p.watch(ctx, r, dev, &part); err != nil {
						failed = append(failed, fmt.Errorf("%s: %w", r.Name(), err))
					}
				}
				if err := p.dropSuperseded(ctx, runsOf[dev.ID]); err != nil {
					failed = append(failed, fmt.Errorf("%s: %w", dev.Name, err))
				}
				if err := p.due(ctx, dev, runsOf[dev.ID], &part); err != nil {
					failed = append(failed, fmt.Errorf("%s: %w", dev.Name, err))
				}
				if runs := runsOf[dev.ID]; p.mayBeRegistered(dev, runs, now) {
					if err := p.registered(ctx, dev, runs[0], now); err != nil {
						failed = append(failed, fmt.Errorf("%s: %w", dev.Name, err))
					}
				}
				mu.Lock()
				pass.Started = append(pass.Started, part.Started...)
				pass.Ended = append(pass.Ended, part.Ended...)
				pass.Deleted = append(pass.Deleted, part.Deleted...)
				errs = append(errs, failed...)
				mu.Unlock()
			}
		})
	}
	for i := range devs {
		if dev := &devs[i]; busy(dev, runsOf[dev.ID]) || p.mayBeRegistered(dev, runsOf[dev.ID], now) {
			work <- dev
		}
	}
	close(work)
	wg.Wait()
	slices.Sort(pass.Started)
	slices.Sort(pass.Ended)
	slices.Sort(pass.Deleted)
	if len(errs) == 0 && pass.recheck {
		p.recheck.Store(false)
	}
	return pass, errors.Join(errs...)
}

// busy reports whether a pass has anything to do for dev: a run whose end
// is not reported, a run that desired_action or a retirement asks for
// (due), or a desired_action to say fleetd does not act on. A device with
// none costs the pass nothing.
func busy(dev *inventory.Device, runs []*run) bool {
	for _, r := range runs {
		if r.Reported() == "" {
			return true
		}
	}
	_, want := wanted(dev, runs)
	return want || unknownAction(dev)
}

// unknownAction reports whether dev's desired_action holds a value fleetd
// does not act on (Provision, reprovision, ...): an operator who set it
// expects something, and is told.
func unknownAction(dev *inventory.Device) bool {
	return dev.DesiredAction != "" && dev.DesiredAction != inventory.DesiredActionProvision
}

// journalEnd journals the line that ends run r's watch (its end, its
// failed power-on, or its deletion) once: not when this process journaled
// it already and the mark that follows failed, nor, on a pass that
// rechecks, when NetBox's journal holds it. ended (the mark, or the
// deletion, done) forgets it. A line it writes is reported with outcome
// (Config.RunEnded).
func (p *Provisioner) journalEnd(ctx context.Context, r *run, dev *inventory.Device, kind inventory.JournalKind, text, outcome string, pass *Pass) error {
	p.mu.Lock()
	done := p.journaled[r.Name()]
	p.mu.Unlock()
	if done {
		return nil
	}
	if jr, ok := p.nb.(JournalReader); ok && pass.recheck {
		has, err := jr.JournalHas(ctx, dev.ID, kind, text)
		if err != nil {
			return err
		}
		if has {
			p.log.Info("fleet.loop", "run", r.Name(), "journaled", "already", "text", text)
			done = true
		}
	}
	if !done {
		if err := p.nb.Journal(ctx, dev.ID, kind, text); err != nil {
			return err
		}
		if p.cfg.RunEnded != nil {
			p.cfg.RunEnded(kindOf(r), outcome, time.Since(r.Created()))
		}
	}
	p.mu.Lock()
	p.journaled[r.Name()] = true
	p.mu.Unlock()
	return nil
}

// pruneJournaled forgets the journaled ends of runs the listing does not
// hold (deleted before they were marked).
func (p *Provisioner) pruneJournaled(runs []*run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.journaled) == 0 {
		return
	}
	listed := make(map[string]bool, len(runs))
	for _, r := range runs {
		listed[r.Name()] = true
	}
	for name := range p.journaled {
		if !listed[name] {
			delete(p.journaled, name)
		}
	}
}

// endDone forgets that run's end was journaled, once it is marked or the
// run deleted.
func (p *Provisioner) endDone(run string) {
	p.mu.Lock()
	delete(p.journaled, run)
	p.mu.Unlock()
}

// rufioRetry is how long after a run whose Rufio job failed on Rufio's
// side the loop starts a new one: such a failure (e.g. Rufio creating a
// Task twice) passes, and no operator can act on it, yet a Rufio that
// keeps failing must not get a run on every pass.
func (p *Provisioner) rufioRetry() time.Duration { return min(p.cfg.PowerRetry, time.Minute) }

// powerRetryWaits reports whether, at now, a new run of the device whose
// newest run is r waits because r's Rufio job failed: Config.PowerRetry
// after a BMC's refusal, rufioRetry after Rufio's own failure.
func (p *Provisioner) powerRetryWaits(r *run, now time.Time) bool {
	switch r.Reported() {
	case "boot-job-failed":
		return now.Before(r.Created().Add(p.cfg.PowerRetry))
	case "rufio-job-failed":
		return now.Before(r.Created().Add(p.rufioRetry()))
	}
	return false
}

// watch journals what became of one run not yet reported.
func (p *Provisioner) watch(ctx context.Context, r *run, dev *inventory.Device, pass *Pass) error {
	now := time.Now()
	retire := kindOf(r) == RunRetire
	if msg, failed := r.BootJobFailure(); failed {
		job, msg, own := p.bootJobMessage(ctx, r, msg)
		if msg == "" {
			msg = "no message"
		}
		outcome := "boot-job-failed"
		text := fmt.Sprintf(lineBMCFailed, job, r.Name(), msg, addrOf(dev))
		if own {
			outcome = "rufio-job-failed"
			text = fmt.Sprintf(lineRufioFailed, job, r.Name(), msg, p.rufioRetry())
		}
		if err := p.journalEnd(ctx, r, dev, inventory.JournalWarning, text, outcome, pass); err != nil {
			return err
		}
		// A machine powered on by hand attests and gets a new run.
		if dev.DesiredAction != inventory.DesiredActionProvision && !retire {
			if err := p.nb.SetDesiredAction(ctx, dev.ID, inventory.DesiredActionProvision); err != nil {
				return err
			}
			dev.DesiredAction = inventory.DesiredActionProvision
		}
		pass.Ended = append(pass.Ended, r.Name())
		return p.mark(ctx, r, outcome)
	}

	state := r.WF.Status.State
	action := r.CurrentAction()
	late := !retire && dev.Status == inventory.StatusActive && lateActions[action]
	switch state {
	case tinkerbell.WorkflowStateSuccess:
		text := fmt.Sprintf(lineEndedSuccess, r.Name())
		if retire {
			text += tailWiped
		}
		return p.ended(ctx, r, dev, inventory.JournalSuccess, text, string(state), pass)
	case tinkerbell.WorkflowStateFailed, tinkerbell.WorkflowStateTimeout:
		return p.endedWithout(ctx, r, dev, state, action, late, pass)
	}

	timeout := r.GlobalTimeout(p.cfg.GlobalTimeout)
	if !r.Started() {
		if now.Before(r.Created().Add(timeout)) {
			return nil
		}
		kind := inventory.JournalWarning
		text := fmt.Sprintf(lineNeverReported, r.Name(), timeout)
		if retire {
			kind = inventory.JournalDanger
			text = fmt.Sprintf(lineNeverReportedRetire, r.Name(), timeout) + tailDanger
		}
		if err := p.journalEnd(ctx, r, dev, kind, text, "never-reported", pass); err != nil {
			return err
		}
		if err := p.deleteWorkflow(ctx, r.Name()); err != nil {
			return err
		}
		p.endDone(r.Name())
		p.endRun(ctx, dev, r)
		pass.Deleted = append(pass.Deleted, r.Name())
		return nil
	}
	stop, set := r.Stop(p.cfg.GlobalTimeout)
	past := !stop.IsZero() && now.After(stop)
	if late && past {
		return p.ended(ctx, r, dev, inventory.JournalInfo, passedText(r, action), "passed-global-timeout", pass)
	}
	if past && !set {
		// Tinkerbell set this run no stop, and never ends it: fleetd ends
		// it at the stop tink-controller would have set.
		return p.endedWithout(ctx, r, dev, tinkerbell.WorkflowStateTimeout, action, late, pass)
	}
	return p.nudgePastStop(ctx, r, now)
}

// endedWithout journals the end of a run that ended without success
// (FAILED or TIMEOUT at action), and lets go of what it leaves behind.
func (p *Provisioner) endedWithout(ctx context.Context, r *run, dev *inventory.Device, state tinkerbell.WorkflowState, action string, late bool, pass *Pass) error {
	if state == tinkerbell.WorkflowStateTimeout && late {
		return p.ended(ctx, r, dev, inventory.JournalInfo, passedText(r, action), "passed-global-timeout", pass)
	}
	kind, text := inventory.JournalWarning, endedText(r, string(state), action)
	if kindOf(r) == RunRetire {
		kind, text = inventory.JournalDanger, text+tailDanger
	}
	if err := p.ended(ctx, r, dev, kind, text, string(state), pass); err != nil {
		return err
	}
	// Ended without success: no node may fetch its config or join with
	// its token (but a run whose reports stopped while install, next-boot
	// or reboot was current: its node may boot the install and fetch its
	// config yet).
	if state == tinkerbell.WorkflowStateFailed || !lateActions[action] {
		p.endRun(ctx, dev, r)
	}
	return nil
}

func endedText(r *run, state, action string) string {
	at := "before any action reported"
	if action != "" {
		at = "at action " + action
	}
	return fmt.Sprintf(lineEnded, r.Name(), state, at, r.HookOS())
}

func passedText(r *run, action string) string {
	return fmt.Sprintf(linePassed, r.Name(), action)
}

// ended journals a run's end and marks the Workflow so that no later pass,
// in this process or after a restart, journals it again. The mark, in
// lower case, is the outcome RunEnded reports.
func (p *Provisioner) ended(ctx context.Context, r *run, dev *inventory.Device, kind inventory.JournalKind, text, mark string, pass *Pass) error {
	if err := p.journalEnd(ctx, r, dev, kind, text, strings.ToLower(mark), pass); err != nil {
		return err
	}
	pass.Ended = append(pass.Ended, r.Name())
	return p.mark(ctx, r, mark)
}

// mark records on the Workflow, and in r, that its end is journaled.
func (p *Provisioner) mark(ctx context.Context, r *run, mark string) error {
	if err := p.annotate(ctx, r.Name(), annReported, mark); err != nil {
		return err
	}
	p.endDone(r.Name())
	if r.WF.Annotations == nil {
		r.WF.Annotations = map[string]string{}
	}
	r.WF.Annotations[annReported] = mark
	return nil
}

// wanted reports whether dev asks for a run, and of which kind:
// desired_action=provision, or a decommissioning device that has had no
// retirement run.
func wanted(dev *inventory.Device, runs []*run) (RunKind, bool) {
	want := dev.DesiredAction == inventory.DesiredActionProvision
	if dev.Status != inventory.StatusDecommissioning {
		return RunProvision, want
	}
	if !want && !strings.HasPrefix(dev.LastRun, string(RunRetire)+"-") && inFlight(runs, RunRetire) == nil {
		want = true
	}
	return RunRetire, want
}

// due starts the run a device asks for, if it can start without a fresh
// claim: desired_action=provision, or a decommissioning device that has had
// no retirement run.
func (p *Provisioner) due(ctx context.Context, dev *inventory.Device, runs []*run, pass *Pass) error {
	if unknownAction(dev) {
		// Told once; the device is then treated as if it were empty (a
		// decommissioning device still gets its retirement).
		if err := p.note(ctx, dev.ID, inventory.JournalWarning, fmt.Sprintf(
			lineUnknownAction, dev.DesiredAction, inventory.DesiredActionProvision)); err != nil {
			return err
		}
	}
	if _, want := wanted(dev, runs); !want {
		return nil
	}
	unlock := p.lockDevice(dev.ID)
	defer unlock()

	// The pass's listing predates the lock: a machine admitted since (by
	// this process or another replica) may have a run that just got its
	// install code, which a run started from the old listing would
	// delete, mid-wipe perhaps. Read the device and its runs again, and
	// decide again.
	fresh, err := p.nb.Device(ctx, dev.ID)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		return nil // deleted since
	case err != nil:
		return err
	}
	if runs, err = p.runsOf(ctx, dev.ID); err != nil {
		return err
	}
	*dev = fresh
	kind, want := wanted(dev, runs)
	if !want {
		return nil
	}
	// The first control plane gets no run, and no attestation changes
	// that: its line comes before any the run would wait on.
	if ref := p.firstControlPlaneRefusal(*dev); ref != nil {
		return p.note(ctx, dev.ID, inventory.JournalWarning, ref.Journal())
	}

	// A run started from this request waits for its machine.
	if r := inFlight(runs, kind); r != nil && r.WF.Name == dev.LastRun && dev.DesiredAction == "" {
		return nil
	}
	if len(runs) > 0 && p.powerRetryWaits(runs[0], time.Now()) {
		return nil // the Rufio line is journaled; a machine powered on by hand attests
	}
	if lacks := lacking(*dev); len(lacks) > 0 || !hasBMC(*dev) {
		if len(lacks) == 0 {
			return p.note(ctx, dev.ID, inventory.JournalInfo, fmt.Sprintf(lineNoBMC, dev.Name))
		}
		_, _, err := p.startRun(ctx, *dev, runStart{kind: kind, netboot: true, runs: &runs})
		return ignoreRefusal(err)
	}
	if p.cfg.PortCheck == nil {
		return p.note(ctx, dev.ID, inventory.JournalInfo, fmt.Sprintf(lineNoPortCheck, dev.Name))
	}
	if err := p.cfg.PortCheck(dev.SwitchPort, dev.AttestedSwitchPort); err != nil {
		return p.note(ctx, dev.ID, inventory.JournalWarning, refusal(dev.Name, err, "").Journal())
	}
	note := noteRufio
	if kind == RunRetire {
		note += ", and the run wipes its install disk"
	}
	var hookOS netip.Addr
	if dev.Address.IsValid() {
		hookOS = dev.Address.Addr()
	}
	name, _, err := p.startRun(ctx, *dev, runStart{kind: kind, hookOS: hookOS, netboot: true, note: note, runs: &runs})
	if errors.Is(err, ErrRunRaced) {
		// An admission starts a run of the device at this moment: the
		// next pass decides again.
		p.log.Info("fleet.loop", "node", dev.Name, "waits", err.Error())
		return nil
	}
	if err != nil {
		return ignoreRefusal(err)
	}
	if name != "" {
		pass.Started = append(pass.Started, name)
	}
	return nil
}

// ignoreRefusal is err, or nil for a refusal: the loop journaled it, and
// the device waits.
func ignoreRefusal(err error) error {
	var ref *RefusalError
	if errors.As(err, &ref) {
		return nil
	}
	return err
}

func addrOf(dev *inventory.Device) string {
	if dev.Address.IsValid() {
		return dev.Address.Addr().String()
	}
	return "the node's address"
}
