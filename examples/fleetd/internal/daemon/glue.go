package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/lldpwait"
	"github.com/fleetkit/fleet/provision"
)

// bindings serves attest's binding source from NetBox, in two requests
// per attestation (the device by serial, and its changelog). The device it
// read waits in boundDevices for the admission of the machine's proof. A
// serial that more than one device holds is refused (attest.BindingError),
// and journaled on each of them.
type bindings struct{ d *Daemon }

func (b bindings) Binding(ctx context.Context, serial string) (attest.Binding, error) {
	dev, bd, err := b.d.nb.DeviceBinding(ctx, serial)
	var dup *inventory.DuplicateSerialError
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		return attest.Binding{}, nil // no entry names the serial: pending-approval
	case errors.Is(err, inventory.ErrUnavailable):
		return attest.Binding{}, fmt.Errorf("%w: %w", attest.ErrBindingUnavailable, err)
	case errors.As(err, &dup):
		b.d.refusals.DuplicateSerial(dup, time.Now())
		// The machine is told the fault, not the devices: any machine can
		// claim the serial.
		return attest.Binding{}, &attest.BindingError{Reason: fmt.Sprintf("NetBox holds more than one device with serial %q", serial), Err: err}
	case err != nil:
		return attest.Binding{}, err
	}
	b.d.bound.put(serial, dev, time.Now())
	return attest.Binding{Found: true, RSA2048: bd.ApprovedEKHash, ECCP256: bd.ApprovedEKHashECC, Authored: bd.Authored}, nil
}

// boundFresh is how long the device a binding lookup read may stand for
// NetBox's at the admission of the proof that follows; a proof that comes
// later has the device read again.
const boundFresh = 10 * time.Second

// boundDevices holds, by serial, the device the last binding lookup of the
// serial read, until the admission of a proof of the serial takes it or
// it is older than boundFresh: so that an attestation reads the device
// once. Any machine can claim a serial, but what it holds is NetBox's
// device of the serial, read for the claim. The zero value is ready; safe
// for concurrent use.
type boundDevices struct {
	mu    sync.Mutex
	devs  map[string]boundDevice
	swept time.Time
}

type boundDevice struct {
	dev  inventory.Device
	read time.Time
}

// put holds dev, read at now, for serial's next admission.
func (b *boundDevices) put(serial string, dev inventory.Device, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.devs == nil {
		b.devs = map[string]boundDevice{}
	}
	b.devs[serial] = boundDevice{dev: dev, read: now}
	if now.Sub(b.swept) < boundFresh {
		return
	}
	b.swept = now
	for s, e := range b.devs {
		if now.Sub(e.read) >= boundFresh {
			delete(b.devs, s)
		}
	}
}

// take returns, once, the device held for serial when it was read less
// than boundFresh before now.
func (b *boundDevices) take(serial string, now time.Time) (inventory.Device, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.devs[serial]
	delete(b.devs, serial)
	if !ok || now.Sub(e.read) >= boundFresh || now.Before(e.read) {
		return inventory.Device{}, false
	}
	return e.dev, true
}

// neighbor turns the switch port a claim carried into lldpwait's
// neighbour; nil when the machine got no LLDP frame.
func neighbor(l *attest.LLDP) *lldpwait.Neighbor {
	if l == nil {
		return nil
	}
	return &lldpwait.Neighbor{
		ChassisIDSubtype: lldpwait.ChassisIDSubtype(l.ChassisIDSubtype),
		ChassisID:        l.ChassisID,
		PortIDSubtype:    lldpwait.PortIDSubtype(l.PortIDSubtype),
		PortID:           l.PortID,
		PortDescription:  l.PortDescription,
		SystemName:       l.SystemName,
	}
}

// peerAddr is the IP address of a request's RemoteAddr.
func peerAddr(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// admit is attest's admission hook: provision decides what the attested
// machine gets, after the switch port it claimed is checked against the one
// its entry declares.
func (d *Daemon) admit(ctx context.Context, c attest.Claim) (attest.Admission, error) {
	mac := c.MAC
	// The device the claim's binding lookup read, completed by its
	// interface as it is once the claimed MAC is recorded on it (provision
	// records the MAC first too). When none is held, or that fails,
	// provision reads the device and records the MAC itself, and reports
	// what fails. The claim is proven: its MAC is recorded before the
	// admission waits its turn, so that a storm's machines share the
	// batched requests (three for up to BulkSize machines) rather than
	// each recording its own in the few admissions running at once.
	var dev *inventory.Device
	if held, ok := d.bound.take(c.Serial, time.Now()); ok {
		if full, err := d.nb.RecordDeviceMAC(ctx, held, mac); err == nil {
			dev = &full
		}
	}
	// Admissions past MaxAdmissions wait their turn: under a storm of
	// machines, those running finish well inside the machines' timeouts
	// rather than all slowing down together, and a machine that gives up
	// while it waits costs nothing more than its share of the MAC's
	// batched write.
	if err := d.admitting.Acquire(ctx, 1); err != nil {
		d.metrics.admissions.WithLabelValues("abandoned").Inc()
		d.log.Warn("attest.install", "serial", c.Serial, "outcome", "abandoned",
			"reason", "the machine left while its admission waited its turn", "error", err.Error())
		return attest.Admission{}, err
	}
	defer d.admitting.Release(1)
	// Begun, an admission runs to its end even if the machine gives up:
	// cut short, it could leave a run half started (NetBox naming a run
	// whose Workflow was then deleted). The machine's next attestation
	// gets the run it started.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), admitTimeout)
	defer cancel()
	n := neighbor(c.LLDP)
	port := 0
	if n != nil {
		if p, err := lldpwait.Port(n, d.ports); err == nil {
			port = p
		}
	}
	sb, pcr7, unknown := provenBoot(c.Boot)
	dec, err := d.prov.Admit(ctx, provision.Claim{
		Serial: c.Serial,
		Attestation: inventory.Attestation{
			MAC:        mac,
			EKHash:     c.RSA2048,
			EKHashECC:  c.ECCP256,
			SwitchPort: port,
			At:         c.Proven,
			Verdict:    attest.Attested.String(),
			SecureBoot: sb,
			PCR7:       pcr7,
		},
		SecureBootUnknown: unknown,
		From:              peerAddr(c.Peer),
		CheckPort:         func(declared int) error { return lldpwait.Check(n, declared, d.ports) },
		Device:            dev,
	})
	switch {
	case errors.Is(err, provision.ErrRunRaced):
		// Another replica is starting the device's run (the machine's
		// earlier try, perhaps, whose answer it did not wait for): that
		// run is the machine's on its next try, which gets its code.
		d.metrics.admissions.WithLabelValues("later").Inc()
		return attest.Admission{}, fmt.Errorf("%w: %w", attest.ErrAdmitLater, err)
	case err != nil:
		d.metrics.admissions.WithLabelValues("error").Inc()
		return attest.Admission{}, err // provision wrote the attest.install line
	}
	d.metrics.admissions.WithLabelValues(dec.Outcome.String()).Inc()
	switch dec.Outcome {
	case provision.Provision, provision.Retire:
		return attest.Admission{InstallCode: dec.Code}, nil
	case provision.Refused:
		return attest.Admission{NoProvision: "refused: " + dec.Reason}, nil
	}
	return attest.Admission{NoProvision: dec.Reason}, nil
}

// provenBoot turns the boot a TPM quoted into what NetBox records and
// provision's Secure Boot policy reads: the state (on, off, unknown, or
// unquoted for a proof without a quote), the quoted PCR 7 as hex, and why
// the state is unknown.
func provenBoot(b *attest.BootState) (secureBoot, pcr7, unknown string) {
	if b == nil {
		return inventory.SecureBootUnquoted, "", ""
	}
	switch b.SecureBoot {
	case attest.SecureBootOn:
		secureBoot = inventory.SecureBootOn
	case attest.SecureBootOff:
		secureBoot = inventory.SecureBootOff
	default:
		secureBoot, unknown = inventory.SecureBootUnknown, b.Unknown
	}
	return secureBoot, b.PCR7(), unknown
}

// judged counts every verdict, and journals on the device the refusal whose
// runbook row says to read the device's journal: ek-binding-unauthored.
// Other refusals write nothing to NetBox; their attest.verdict audit line
// holds what the operator needs.
func (d *Daemon) judged(_ context.Context, c attest.Claim, j attest.Judgement) {
	d.metrics.verdicts.WithLabelValues(j.Verdict.String()).Inc()
	if j.Verdict == attest.EKBindingUnauthored {
		d.refusals.Unauthored(c.Serial, time.Now())
	}
}

// configsOf hands provision's rendered configs to the config service, and
// drops those of runs that ended, here and, for a replica, at every other
// replica (the one that rendered the config holds it).
type configsOf struct {
	srv   *configserve.Server
	peers *peers // nil: one fleetd
}

func (c configsOf) NewCode() (string, error) { return configserve.NewCode(), nil }

func (c configsOf) Hold(_ context.Context, code string, config []byte, dev inventory.Device, run string) error {
	return c.srv.Put(code, config, configserve.Device{ID: dev.ID, Name: dev.Name}, run)
}

func (c configsOf) Drop(ctx context.Context, run string) error {
	c.srv.DropRun(run)
	if c.peers == nil {
		return nil
	}
	return c.peers.drop(ctx, run)
}

// gate tells the config service whether NetBox shows a device planned.
type gate struct{ nb *inventory.NetBox }

func (g gate) Planned(ctx context.Context, dev configserve.Device) (bool, error) {
	d, err := g.nb.Device(ctx, dev.ID)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err // NetBox did not answer: 503, the config stays
	}
	return d.Status == inventory.StatusPlanned, nil
}

// statusLostAction ends fleetd's log line of a device status NetBox did
// not take. The only status fleetd queues is active, for a config it
// served: nothing is set by hand, because fleetd cannot tell whether the
// node kept the config. The provision loop takes the device active once a
// Node of its name registers after its run began; a node that did not keep
// it asks for its config in vain, and, as the runbook says for a device
// that stays planned, a new run repairs that.
const statusLostAction = "fleetd takes the device active once its node registers in the cluster; if no Node of that name registers, set desired_action to provision"

// configEvent journals what happened to a config on its device, counts it
// for the alerts, and takes a served device active; a replica that
// answered with a borrowed config does so as for its own. It returns at once:
// NetBox is written in the background, the status in a lane of its own
// that no journal line can fill or delay (see inventory.JournalQueue);
// only a replica writes a served config's status and line before it
// returns (servedNow).
func (d *Daemon) configEvent(e configserve.Event) {
	d.metrics.configEvents.WithLabelValues(e.Kind.String()).Inc()
	id := e.Device.ID
	switch e.Kind {
	case configserve.Served:
		// NetBox takes the release: the node has its config.
		if d.peers != nil {
			d.servedNow(id, e.Device.Name, e.Text)
			return
		}
		d.journal.SetStatus(id, e.Device.Name, inventory.StatusActive)
		d.journal.Line(id, inventory.JournalSuccess, e.Text)
	case configserve.NotAcknowledged:
		text := fmt.Sprintf("%s: the config of %s went to %s; it stays for the next fetch", e.Text, e.Run, e.Peer)
		d.journal.Line(id, inventory.JournalWarning, text)
	case configserve.Refetched:
		stamp(d.metrics.refetched, e.Device.Name, e.Time)
		d.journal.Line(id, inventory.JournalWarning, e.Text)
	case configserve.Expired:
		d.journal.Line(id, inventory.JournalInfo, e.Text)
	case configserve.Lost:
		// A replica borrowed the config and never settled: it died
		// mid-answer, or after the node had it (then it journaled the
		// served line itself, unless it died first).
		d.journal.Line(id, inventory.JournalWarning, e.Text)
	case configserve.Missing:
		// The code names no device; the node asks from its own address.
		// A replica journaled the ask before the 404 (recordMissing).
		if d.peers == nil {
			d.missing(peerAddr(e.Peer), e.Text)
		}
	}
}

// admitTimeout bounds an admission once begun.
const admitTimeout = time.Minute

// servedWriteTimeout bounds a replica's writes of a served config's status
// and journal line.
const servedWriteTimeout = 5 * time.Second

// missingNowMax is how many missing lines a replica writes at once in the
// fetches told 404.
const missingNowMax = 8

// ServedLineHeld bounds how long after a node's acknowledgement a replica
// holds a served config's journal line in memory alone, where its SIGKILL
// loses it: the write at once (servedWriteTimeout); when NetBox did not
// answer that, the settle before the queue looks for it (servedSettle) and
// the queue's linger. Past it the line is in NetBox, or in a write NetBox
// is answering. A line lost so is not lost to the operator: the node
// registers, and the leader takes the device active with a line of its
// own (provision's registered line).
const ServedLineHeld = servedWriteTimeout + servedSettle + inventory.DefaultJournalLinger

// servedSettle is how long a served line whose write got no answer waits
// before the queue looks for it in NetBox's journal: long enough for a
// write NetBox was still finishing to land, so that it is not written
// twice.
const servedSettle = 5 * time.Second

// servedNow writes a served config's journal line, then its status
// (active), to NetBox at once, as a replica does: queued, they would wait
// up to the queue's linger for others, and a replica killed meanwhile
// would lose them while the node boots with its config. The line goes
// first: a replica killed between the two writes leaves the device planned
// with its line, and the provision loop takes it active once its node
// registers; the other order would leave it active with no line that says
// why. A line NetBox does not take goes to the queue (unwritten), and so
// does the status then, or when NetBox does not take it.
func (d *Daemon) servedNow(id int64, name, text string) {
	ctx, cancel := context.WithTimeout(context.Background(), servedWriteTimeout)
	err := d.nb.Journal(ctx, id, inventory.JournalSuccess, text)
	cancel()
	if err != nil {
		d.unwritten(id, inventory.JournalSuccess, text)
		d.journal.SetStatus(id, name, inventory.StatusActive)
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), servedWriteTimeout)
	defer cancel()
	if err := d.nb.SetStatus(ctx, id, inventory.StatusActive); err != nil {
		d.journal.SetStatus(id, name, inventory.StatusActive)
	}
}

// unwritten takes a line a replica wrote at once and NetBox did not take.
// The write may have landed though its answer did not come (NetBox slow
// past the deadline), or may still land (NetBox finishing a request whose
// client gave up): after servedSettle the queue writes the line only if
// NetBox's journal does not hold it yet, so that it is never written
// twice. It returns at once.
func (d *Daemon) unwritten(id int64, kind inventory.JournalKind, text string) {
	time.AfterFunc(servedSettle, func() {
		d.journal.Do(func(ctx context.Context) error {
			has, err := d.nb.JournalHas(ctx, id, kind, text)
			if err != nil || has {
				return err
			}
			return d.nb.Journal(ctx, id, kind, text)
		})
	})
}

// missing tallies an ask for a config fleetd does not hold by the address
// it came from; anyone can send such asks, from many addresses. At most
// once per askEvery an address's asks are looked up in NetBox: when NetBox
// names a device at the address, they stamp FleetInstallConfigMissing's
// metric with the device's name and make one journal line on it, which
// counts them when they are more than one; otherwise they are counted in
// fleet_install_config_unknown_asks_total, so no metric series is made per
// address. An ask from an address the address book already knows as a
// device's stamps the metric at once, so that the alert clears 30 minutes
// after the node's last ask. Asks that askers does not track (its table of
// addresses not known as devices' is full) are counted in
// fleet_install_config_untracked_asks_total, and cost NetBox nothing.
// A replica journals an ask before the fetch is told 404 (recordMissing).
func (d *Daemon) missing(peer netip.Addr, text string) {
	if !d.tallyAsk(peer) {
		return
	}
	var tally *asks // taken at the job's first try, kept for its next
	queued := d.journal.Do(func(ctx context.Context) error {
		if tally == nil {
			t := d.asks.take(peer)
			tally = &t
		}
		return d.writeMissing(ctx, peer, text, *tally)
	})
	if !queued {
		d.asks.unqueued(peer)
	}
}

// tallyAsk counts an ask from peer for a config fleetd does not hold, and
// reports whether its line is to be written now (see missing).
func (d *Daemon) tallyAsk(peer netip.Addr) bool {
	now := time.Now()
	known, device := d.devices.Cached(peer)
	if device {
		stamp(d.metrics.missing, known.Name, now)
	}
	tracked, queue := d.asks.ask(peer, now, device)
	if !tracked {
		d.metrics.untrackedAsks.Inc()
	}
	return queue
}

// recordMissing journals, as a replica, an ask from peer that no replica
// holds a config for, before the fetch is told 404 (configserve's Missing,
// from borrow), as a served line is written (servedNow): queued, the line
// would die with the replica, and the node, told 404, does not ask again,
// so nothing would tell the operator. It counts the ask as missing does.
// At most missingNowMax such writes run at once; one that finds no turn,
// or no answer from NetBox, within servedWriteTimeout is an error, which
// the fetch gets as 503: the node asks again, and the next ask writes the
// line, counting this one.
func (d *Daemon) recordMissing(ctx context.Context, peer netip.Addr) error {
	if !d.tallyAsk(peer) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, servedWriteTimeout)
	defer cancel()
	select {
	case d.missingNow <- struct{}{}:
		defer func() { <-d.missingNow }()
	case <-ctx.Done():
		d.asks.retry(peer, asks{})
		return fmt.Errorf("journal the ask from %s: %w", peer, ctx.Err())
	}
	t := d.asks.take(peer)
	if err := d.writeMissing(ctx, peer, d.configs.MissingText(), t); err != nil {
		d.asks.retry(peer, t)
		return fmt.Errorf("journal the ask from %s: %w", peer, err)
	}
	return nil
}

// writeMissing writes the journal line of peer's tally of asks t, on the
// device NetBox names at peer; asks from an address NetBox names no device
// at are counted in fleet_install_config_unknown_asks_total.
func (d *Daemon) writeMissing(ctx context.Context, peer netip.Addr, text string, tally asks) error {
	if tally.n == 0 {
		return nil
	}
	dev, ok, err := d.devices.ByAddress(ctx, peer, time.Now())
	if err != nil {
		return err
	}
	if !ok {
		d.metrics.unknownAsks.Add(float64(tally.n))
		return nil
	}
	stamp(d.metrics.missing, dev.Name, tally.last)
	return d.nb.Journal(ctx, dev.ID, inventory.JournalWarning, missingLine(text, tally))
}

// missingLine is the journal line of a tally of asks: the runbook's line,
// and how many asks it stands for when they are more than one.
func missingLine(text string, t asks) string {
	if t.n <= 1 {
		return text
	}
	return fmt.Sprintf("%s (asked %d times since %s)", text, t.n, t.first.UTC().Format(time.RFC3339))
}
