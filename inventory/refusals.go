package inventory

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Defaults of RefusalJournalConfig.
const (
	DefaultRefusalEvery = 10 * time.Minute
	DefaultRefusalName  = "the attestation server"
)

// RefusalJournalConfig holds a RefusalJournal's optional settings. A nil
// *RefusalJournalConfig means every default.
type RefusalJournalConfig struct {
	// Every bounds how often one serial's refusal of one kind is journaled.
	// Zero: DefaultRefusalEvery.
	Every time.Duration
	// Name is how the journal lines name the service that refused the
	// claim, as in "<Name> admitted nothing" (fleetd: "fleetd"). Empty:
	// DefaultRefusalName.
	Name string
}

// A RefusalJournal journals, on the devices they concern, the refusals of
// attestation claims whose runbook row says to read the device's journal:
// an unauthored EK binding, and a serial more than one device holds. Any
// machine can claim any serial and be refused, so each (kind, serial) is
// journaled at most once per Every; the lines go through a JournalQueue,
// and the caller never waits for NetBox.
//
// A RefusalJournal is safe for concurrent use. Times are the caller's
// (now, as time.Now gives it).
type RefusalJournal struct {
	nb    *NetBox
	q     *JournalQueue
	every time.Duration
	name  string

	mu   sync.Mutex
	last map[refusal]time.Time // when each refusal was last journaled
}

// refusal is a kind of refusal of a serial's claim.
type refusal struct{ kind, serial string }

// NewRefusalJournal returns a RefusalJournal that looks devices up in nb
// and queues its lines on q. cfg may be nil for the defaults.
func NewRefusalJournal(nb *NetBox, q *JournalQueue, cfg *RefusalJournalConfig) *RefusalJournal {
	var c RefusalJournalConfig
	if cfg != nil {
		c = *cfg
	}
	return &RefusalJournal{
		nb:    nb,
		q:     q,
		every: cmp.Or(c.Every, DefaultRefusalEvery),
		name:  cmp.Or(c.Name, DefaultRefusalName),
		last:  map[refusal]time.Time{},
	}
}

// Due reports whether a refusal of kind for serial is to be journaled at
// now, at most once per Every, and if so records that it is. Unauthored and
// DuplicateSerial ask it; a caller journaling refusals of its own may too,
// with a kind of its own.
func (r *RefusalJournal) Due(kind, serial string, now time.Time) bool {
	key := refusal{kind, serial}
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, seen := r.last[key]; seen && now.Sub(last) < r.every {
		return false
	}
	r.last[key] = now
	for k, t := range r.last {
		if now.Sub(t) >= r.every {
			delete(r.last, k)
		}
	}
	return true
}

// Unauthored journals, as a warning on the device of serial, that its
// binding was judged ek-binding-unauthored at now: NetBox's changelog does
// not show NetBoxConfig.BindingAuthor writing it. The device is looked up
// in the queue's job; a serial no device holds journals nothing.
func (r *RefusalJournal) Unauthored(serial string, now time.Time) {
	if !r.Due("ek-binding-unauthored", serial, now) {
		return
	}
	text := unauthoredLine(r.name, r.nb.cfg.BindingAuthor)
	r.q.Do(func(ctx context.Context) error {
		dev, err := r.nb.DeviceBySerial(ctx, serial)
		if err != nil {
			return err
		}
		return r.nb.Journal(ctx, dev.ID, JournalWarning, text)
	})
}

// DuplicateSerial journals, as a warning on each device e names, that a
// claim of e.Serial was refused at now. The error names the devices, so
// NetBox is not asked again.
func (r *RefusalJournal) DuplicateSerial(e *DuplicateSerialError, now time.Time) {
	if !r.Due("duplicate-serial", e.Serial, now) {
		return
	}
	text := duplicateSerialLine(r.name, e)
	for _, dev := range e.Devices {
		r.q.Line(dev.ID, JournalWarning, text)
	}
}

// unauthoredLine is the journal line of an ek-binding-unauthored refusal
// by the service name, for the binding author author ("" when unset).
func unauthoredLine(name, author string) string {
	who := "bindingAuthor " + author
	if author == "" {
		who = "the binding author (bindingAuthor is unset)"
	}
	return fmt.Sprintf("attest: FAILED ek-binding-unauthored: NetBox's changelog does not show %s writing the approved EK binding; another user edited it, or the changelog lost the record, and %s admitted nothing. Restore the binding from git: remove the lines, apply, add them back and apply", who, name)
}

// duplicateSerialLine is the journal line of a claim the service name
// refused because more than one device holds its serial.
func duplicateSerialLine(name string, e *DuplicateSerialError) string {
	names := make([]string, len(e.Devices))
	for i, dev := range e.Devices {
		names[i] = dev.String()
	}
	return fmt.Sprintf("attest: FAILED: NetBox holds more than one device with serial %q: %s; %s cannot tell which one's approved EK binding to judge, and admitted nothing. Correct the serial of each device whose machine does not report it (a device left from an earlier entry keeps its serial in NetBox), then power-cycle the machine", e.Serial, strings.Join(names, ", "), name)
}
