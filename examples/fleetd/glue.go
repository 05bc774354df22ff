package main

import (
	"context"
	"errors"
	"fmt"
	"net"
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
// per attestation (the device by serial, and its changelog).
type bindings struct{ nb *inventory.NetBox }

func (b bindings) Binding(ctx context.Context, serial string) (attest.Binding, error) {
	bd, err := b.nb.BindingBySerial(ctx, serial)
	switch {
	case errors.Is(err, inventory.ErrNotFound):
		return attest.Binding{}, nil // no entry names the serial: pending-approval
	case errors.Is(err, inventory.ErrUnavailable):
		return attest.Binding{}, fmt.Errorf("%w: %w", attest.ErrBindingUnavailable, err)
	case err != nil:
		return attest.Binding{}, err
	}
	return attest.Binding{Found: true, RSA2048: bd.ApprovedEKHash, ECCP256: bd.ApprovedEKHashECC, Authored: bd.Authored}, nil
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
func (d *daemon) admit(ctx context.Context, c attest.Claim) (attest.Admission, error) {
	n := neighbor(c.LLDP)
	port := 0
	if n != nil {
		if p, err := lldpwait.Port(n, d.ports); err == nil {
			port = p
		}
	}
	mac, err := net.ParseMAC(c.MAC)
	if err != nil {
		return attest.Admission{}, fmt.Errorf("claimed MAC %q: %w", c.MAC, err)
	}
	dec, err := d.prov.Admit(ctx, provision.Claim{
		Serial: c.Serial,
		Attestation: inventory.Attestation{
			MAC:        mac,
			EKHash:     c.RSA2048,
			EKHashECC:  c.ECCP256,
			SwitchPort: port,
			At:         c.Proven,
			Verdict:    attest.Attested.String(),
		},
		From:      peerAddr(c.Peer),
		CheckPort: func(declared int) error { return lldpwait.Check(n, declared, d.ports) },
	})
	if err != nil {
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

// unauthoredEvery bounds how often one serial's ek-binding-unauthored
// refusal is journaled: any machine can claim the serial and be refused.
const unauthoredEvery = 10 * time.Minute

// judged counts every verdict, and journals on the device the refusal whose
// runbook row says to read the device's journal: ek-binding-unauthored.
// Other refusals write nothing to NetBox; their attest.verdict audit line
// holds what the operator needs.
func (d *daemon) judged(_ context.Context, c attest.Claim, j attest.Judgement) {
	d.metrics.verdicts.WithLabelValues(j.Verdict.String()).Inc()
	if j.Verdict != attest.EKBindingUnauthored {
		return
	}
	now := d.now()
	d.unauthoredMu.Lock()
	last, seen := d.unauthoredSeen[c.Serial]
	if seen && now.Sub(last) < unauthoredEvery {
		d.unauthoredMu.Unlock()
		return
	}
	d.unauthoredSeen[c.Serial] = now
	for s, t := range d.unauthoredSeen {
		if now.Sub(t) >= unauthoredEvery {
			delete(d.unauthoredSeen, s)
		}
	}
	d.unauthoredMu.Unlock()
	author := d.s.BindingAuthor
	who := "bindingAuthor " + author
	if author == "" {
		who = "the binding author (bindingAuthor is unset)"
	}
	text := fmt.Sprintf("attest: FAILED ek-binding-unauthored: NetBox's changelog does not show %s writing the approved EK binding; another user edited it, or the changelog lost the record, and fleetd admitted nothing. Restore the binding from git: remove the lines, apply, add them back and apply", who)
	serial := c.Serial
	d.journal.do(func(ctx context.Context) error {
		dev, err := d.nb.DeviceBySerial(ctx, serial)
		if err != nil {
			return err
		}
		return d.nb.Journal(ctx, dev.ID, inventory.JournalWarning, text)
	})
}

// configsOf hands provision's rendered configs to the config service.
type configsOf struct{ srv *configserve.Server }

func (c configsOf) NewCode() (string, error) { return configserve.NewCode(), nil }

func (c configsOf) Hold(_ context.Context, code string, config []byte, dev inventory.Device, run string) error {
	return c.srv.Put(code, configserve.Device{ID: dev.ID, Name: dev.Name}, run, config)
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

// configEvent journals what happened to a config on its device, counts it
// for the alerts, and takes a served device active. It returns at once:
// NetBox is written from the journal's queue.
func (d *daemon) configEvent(e configserve.Event) {
	d.metrics.configEvents.WithLabelValues(e.Kind.String()).Inc()
	id := e.Device.ID
	switch e.Kind {
	case configserve.Served:
		d.journal.do(func(ctx context.Context) error {
			if err := d.nb.Journal(ctx, id, inventory.JournalSuccess, e.Text); err != nil {
				return err
			}
			// NetBox takes the release: the node has its config.
			return d.nb.SetStatus(ctx, id, inventory.StatusActive)
		})
	case configserve.NotAcknowledged:
		text := fmt.Sprintf("%s: the config of %s went to %s; it stays for the next fetch", e.Text, e.Run, e.Peer)
		d.journal.line(id, inventory.JournalWarning, text)
	case configserve.Refetched:
		stamp(d.metrics.refetched, e.Device.Name, e.Time)
		d.journal.line(id, inventory.JournalWarning, e.Text)
	case configserve.Expired:
		d.journal.line(id, inventory.JournalInfo, e.Text)
	case configserve.Missing:
		// The code names no device; the node asks from its own address.
		peer, at := peerAddr(e.Peer), e.Time
		d.journal.do(func(ctx context.Context) error {
			dev, ok, err := d.devices.byAddress(ctx, peer)
			if err != nil || !ok {
				stamp(d.metrics.missing, peer.String(), at)
				return err
			}
			stamp(d.metrics.missing, dev.Name, at)
			return d.nb.Journal(ctx, dev.ID, inventory.JournalWarning, e.Text)
		})
	}
}

// addressBook finds devices by address, from a list of every device that is
// read again when older than ttl or when an address is not in it.
type addressBook struct {
	nb  *inventory.NetBox
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	byAddr map[netip.Addr]inventory.Device
	read   time.Time
}

func (a *addressBook) byAddress(ctx context.Context, addr netip.Addr) (inventory.Device, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if dev, ok := a.byAddr[addr]; ok && a.now().Sub(a.read) < a.ttl {
		return dev, true, nil
	}
	if a.byAddr != nil && a.now().Sub(a.read) < time.Second {
		return inventory.Device{}, false, nil // read just now: not there
	}
	devs, err := a.nb.Devices(ctx)
	if err != nil {
		return inventory.Device{}, false, err
	}
	a.byAddr = make(map[netip.Addr]inventory.Device, len(devs))
	for _, dev := range devs {
		if dev.Address.IsValid() {
			a.byAddr[dev.Address.Addr()] = dev
		}
	}
	a.read = a.now()
	dev, ok := a.byAddr[addr]
	return dev, ok, nil
}
