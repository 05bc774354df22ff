package inventory

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// An AddressBook reads NetBox's list of devices once, finds devices in it
// until TTL, answers an address it lacks from it until MissEvery, and
// keeps what it read when NetBox does not answer.
func TestAddressBook(t *testing.T) {
	srv, nb, devs := generatedFleet(t, 3)
	book := NewAddressBook(nb, nil)
	first, second := devs[0].Address.Addr(), devs[1].Address.Addr()
	nobody := netip.MustParseAddr("10.99.0.1")
	now := time.Unix(1767225600, 0)
	ctx := t.Context()

	if _, ok := book.Cached(first); ok {
		t.Error("Cached found a device before any read")
	}
	srv.ResetRequests()
	lookup := func(addr netip.Addr, at time.Duration, wantDev Device, wantOK bool, wantRequests int) {
		t.Helper()
		before := srv.RequestCount()
		dev, ok, err := book.ByAddress(ctx, addr, now.Add(at))
		if err != nil {
			t.Fatalf("ByAddress(%s) at %v: %v", addr, at, err)
		}
		if ok != wantOK || dev.ID != wantDev.ID {
			t.Errorf("ByAddress(%s) at %v: %s, %v; want %s, %v", addr, at, dev.Name, ok, wantDev.Name, wantOK)
		}
		if n := srv.RequestCount() - before; n != wantRequests {
			t.Errorf("ByAddress(%s) at %v: %d requests, want %d", addr, at, n, wantRequests)
		}
	}
	lookup(first, 0, devs[0], true, 2) // the devices and their interfaces
	lookup(second, DefaultAddressBookTTL-time.Second, devs[1], true, 0)
	lookup(nobody, time.Second, Device{}, false, 0)
	lookup(nobody, DefaultAddressBookMissEvery, Device{}, false, 2)
	lookup(first, DefaultAddressBookMissEvery+DefaultAddressBookTTL-time.Second, devs[0], true, 0)
	lookup(first, DefaultAddressBookMissEvery+DefaultAddressBookTTL, devs[0], true, 2)

	srv.Inject(netboxtest.Fault{Kind: netboxtest.Down})
	defer srv.Inject(netboxtest.Fault{})
	if _, _, err := book.ByAddress(ctx, first, now.Add(time.Hour)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("ByAddress with NetBox down: %v, want ErrUnavailable", err)
	}
	if dev, ok := book.Cached(first); !ok || dev.ID != devs[0].ID {
		t.Errorf("Cached with NetBox down: %s, %v; want %s from the list last read", dev.Name, ok, devs[0].Name)
	}
}
