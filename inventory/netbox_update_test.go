package inventory

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// attestedUpdate is the i-th machine's Update in these tests: an
// attestation and a last_run of its own.
func attestedUpdate(i int) (Update, Attestation, string) {
	a := Attestation{
		EKHash:     fmt.Sprintf("%064x", i+1),
		SwitchPort: i + 1,
		At:         time.Date(2026, 12, 1, 10, 0, i, 0, time.UTC),
		Verdict:    "attested",
	}
	run := fmt.Sprintf("provision-w-%02d-1796119200", i)
	return Update{Attestation: &a, LastRun: &run}, a, run
}

// TestUpdateDeviceBatched: 16 machines' Updates written at once, with
// NetBox slow, cost at most 3 requests (the first alone, the others in
// bulk updates checked against NetBox's schema), where each used to cost
// one; each device ends with its own fields, and the fields the Updates do
// not name (the nodes file's, desired_action) are as they were. A client
// that read the devices long ago, or not at all, writes each alone.
func TestUpdateDeviceBatched(t *testing.T) {
	const n = 16
	srv, nb, devs := generatedFleet(t, n)
	for _, d := range devs[:n/2] {
		noErr(t, nb.SetDesiredAction(t.Context(), d.ID, DesiredActionProvision))
	}
	noneFailed(t, devs, storm(srv, slow, n, func(i int) error {
		u, _, _ := attestedUpdate(i)
		return nb.UpdateDevice(t.Context(), devs[i].ID, u)
	}))
	if c := srv.RequestCount(); c > 3 {
		t.Errorf("%d Updates at once took %d requests, want at most 3: %v", n, c, requestsBy(srv))
	}
	t.Logf("%d Updates at once: %d requests: %v", n, srv.RequestCount(), requestsBy(srv))
	for i, d := range devs {
		got := deviceOf(t, nb, d.ID)
		_, a, run := attestedUpdate(i)
		want := d
		want.AttestedEKHash, want.AttestedSwitchPort, want.AttestedAt, want.AttestVerdict, want.LastRun = a.EKHash, a.SwitchPort, a.At, a.Verdict, run
		if i < n/2 {
			want.DesiredAction = DesiredActionProvision
		}
		wantDevice(t, want, got, "%s after UpdateDevice", d.Name)
	}

	// A client that read the devices more than placeMaxAge ago does not
	// trust what it read: each Update goes alone.
	nb.placesMu.Lock()
	for id, p := range nb.places {
		p.read = p.read.Add(-placeMaxAge)
		nb.places[id] = p
	}
	nb.placesMu.Unlock()
	// A client that has not read the devices does not know what a bulk
	// update item of them must carry: each Update goes alone too.
	for _, c := range []struct {
		what, run string
		nb        *NetBox
	}{
		{"devices read long ago", "stale", nb},
		{"devices the client has not read", "again", client(t, srv, userFleetd, nil)},
	} {
		noneFailed(t, devs, storm(srv, netboxtest.Fault{Kind: netboxtest.Slow, Delay: 20 * time.Millisecond}, n, func(i int) error {
			return c.nb.UpdateDevice(t.Context(), devs[i].ID, Update{LastRun: &c.run})
		}))
		if by := requestsBy(srv); by["PATCH /api/dcim/devices/"] != 0 || srv.RequestCount() != n {
			t.Errorf("%d Updates of %s: %v, want %d PATCHes of each device", n, c.what, by, n)
		}
	}
}

// TestUpdateDeviceBatchRefused: when NetBox refuses a bulk update (one
// device of it is gone, another's EK hash is not one), each of its
// Updates is sent alone, and only the callers NetBox refuses get an
// error: ErrNotFound for the device that is gone. NetBox 4.3 skips an ID
// it does not have, where netboxtest refuses the bulk update; either way
// the device is written alone.
func TestUpdateDeviceBatchRefused(t *testing.T) {
	const n = 8
	srv, nb, devs := generatedFleet(t, n)
	// A device the client read, which NetBox no longer has.
	const gone = 99999
	p, ok := nb.place(devs[0].ID)
	if !ok {
		t.Fatal("the client keeps no place of a device it read")
	}
	read := &nbDevice{ID: gone, Role: nbRef{ID: p.role}, Site: nbRef{ID: p.site}}
	read.DeviceType.ID = p.deviceType
	nb.learn(read)
	ids := []int64{gone}
	for _, d := range devs {
		ids = append(ids, d.ID)
	}
	const badEK = 3 // the index in ids of the Update whose EK hash is not one
	errs := storm(srv, netboxtest.Fault{Kind: netboxtest.Slow, Delay: 50 * time.Millisecond}, len(ids), func(i int) error {
		u, _, _ := attestedUpdate(i)
		if i == badEK {
			u.Attestation.EKHash = "not a hash"
		}
		return nb.UpdateDevice(t.Context(), ids[i], u)
	})
	if by := requestsBy(srv); by["PATCH /api/dcim/devices/"] == 0 {
		t.Errorf("no bulk update: %v", by)
	}
	for i, err := range errs {
		switch {
		case i == 0 && !errors.Is(err, ErrNotFound):
			t.Errorf("the device that is gone: %v, want ErrNotFound", err)
		case i == badEK && err == nil:
			t.Errorf("device %d: an EK hash that is not one was taken", ids[i])
		case i != 0 && i != badEK && err != nil:
			t.Errorf("device %d: %v", ids[i], err)
		}
	}
	if _, ok := nb.place(gone); ok {
		t.Error("the client keeps the place of a device NetBox says it does not have")
	}
	for i, d := range devs {
		got := deviceOf(t, nb, d.ID)
		_, a, run := attestedUpdate(i + 1)
		if i+1 == badEK {
			a.EKHash, run = "", ""
		}
		if got.AttestedEKHash != a.EKHash || got.LastRun != run {
			t.Errorf("%s: attested_ek_hash %q, last_run %q; want %q, %q", d.Name, got.AttestedEKHash, got.LastRun, a.EKHash, run)
		}
	}
}

// TestUpdateDeviceBatchUnavailable: when NetBox does not answer a bulk
// update, each of its callers gets ErrUnavailable, and nothing is sent
// again.
func TestUpdateDeviceBatchUnavailable(t *testing.T) {
	const n = 8
	srv, _, devs := generatedFleet(t, n)
	// NetBox is slow, and fails every bulk update of devices; a device's
	// own PATCH goes through.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		if r.Method == http.MethodPatch && r.URL.Path == "/api/dcim/devices/" {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		srv.Handler().ServeHTTP(w, r)
	}))
	defer front.Close()
	nb, err := NewNetBox(front.URL, srv.Token(userFleetd), &NetBoxConfig{Site: "folly", Switch: "usw"})
	noErr(t, err)
	if _, err := nb.Devices(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.ResetRequests()
	errs := make([]error, n)
	concurrently(n, func(i int) {
		u, _, _ := attestedUpdate(i)
		errs[i] = nb.UpdateDevice(t.Context(), devs[i].ID, u)
	})
	var unavailable int
	for i, err := range errs {
		switch {
		case errors.Is(err, ErrUnavailable):
			unavailable++
		case err != nil:
			t.Errorf("%s: %v, want ErrUnavailable or nil", devs[i].Name, err)
		}
	}
	// The Updates go in bulk updates, and get NetBox's failure, but for
	// one sent alone that finds no batch in flight, or the last of a
	// storm, which are written.
	if unavailable < n-2 {
		t.Errorf("%d of %d callers got ErrUnavailable, want all but those sent alone: %v", unavailable, n, errs)
	}
	if c := srv.RequestCount(); c != n-unavailable {
		t.Errorf("%d requests reached NetBox for %d Updates written alone: %v", c, n-unavailable, srv.Requests())
	}
	for _, err := range errs {
		if err != nil && !strings.Contains(err.Error(), "PATCH /api/dcim/devices/") {
			t.Errorf("the error does not name the bulk update: %v", err)
		}
	}
}
