package inventory

import (
	"cmp"
	"context"
	"net/netip"
	"sync"
	"time"
)

// Defaults of AddressBookConfig.
const (
	DefaultAddressBookTTL       = 30 * time.Second
	DefaultAddressBookMissEvery = 10 * time.Second
)

// AddressBookConfig holds an AddressBook's optional settings. A nil
// *AddressBookConfig means every default.
type AddressBookConfig struct {
	// TTL is how long a device found in the list stands for NetBox's.
	// Zero: DefaultAddressBookTTL.
	TTL time.Duration
	// MissEvery is how long an address not in the list is answered so
	// before NetBox is read again for it, which bounds what asks from
	// addresses that are no device's cost NetBox. Zero:
	// DefaultAddressBookMissEvery.
	MissEvery time.Duration
}

// An AddressBook finds fleet's devices by their address (Device.Address),
// from a list of every device (NetBox.Devices) that is read again when it
// is older than TTL, or when an address is not in it and the list is older
// than MissEvery.
//
// An AddressBook is safe for concurrent use: one goroutine at a time reads
// NetBox, and Cached never waits for it. Times are the caller's (now, as
// time.Now gives it), so that the ages it judges follow the caller's
// clock.
type AddressBook struct {
	nb        *NetBox
	ttl       time.Duration
	missEvery time.Duration

	reading sync.Mutex // held while NetBox is read

	mu     sync.Mutex // guards byAddr and read
	byAddr map[netip.Addr]Device
	read   time.Time
}

// NewAddressBook returns an AddressBook of nb's devices. cfg may be nil for
// the defaults.
func NewAddressBook(nb *NetBox, cfg *AddressBookConfig) *AddressBook {
	var c AddressBookConfig
	if cfg != nil {
		c = *cfg
	}
	return &AddressBook{
		nb:        nb,
		ttl:       cmp.Or(c.TTL, DefaultAddressBookTTL),
		missEvery: cmp.Or(c.MissEvery, DefaultAddressBookMissEvery),
	}
}

// ByAddress finds the device at addr at time now, reading NetBox's list
// of devices (one request a page) when the list it holds is too old to
// tell. ok is false when no device has the address. Errors are
// NetBox.Devices's: ErrUnavailable when NetBox did not answer.
func (a *AddressBook) ByAddress(ctx context.Context, addr netip.Addr, now time.Time) (dev Device, ok bool, err error) {
	a.reading.Lock()
	defer a.reading.Unlock()
	a.mu.Lock()
	dev, ok = a.byAddr[addr]
	age, listed := now.Sub(a.read), a.byAddr != nil
	a.mu.Unlock()
	switch {
	case listed && ok && age < a.ttl:
		return dev, true, nil
	case listed && !ok && age < a.missEvery:
		return Device{}, false, nil // read lately: not there
	}
	devs, err := a.nb.Devices(ctx)
	if err != nil {
		return Device{}, false, err
	}
	byAddr := make(map[netip.Addr]Device, len(devs))
	for _, d := range devs {
		if d.Address.IsValid() {
			byAddr[d.Address.Addr()] = d
		}
	}
	a.mu.Lock()
	a.byAddr, a.read = byAddr, now
	a.mu.Unlock()
	dev, ok = byAddr[addr]
	return dev, ok, nil
}

// Cached finds the device at addr in the list as last read, however old.
// It never asks NetBox, nor waits for a read.
func (a *AddressBook) Cached(addr netip.Addr) (Device, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	dev, ok := a.byAddr[addr]
	return dev, ok
}
