package inventory

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// generatedFleet applies n generated workers to a schema-checked NetBox and
// returns it, fleetd's client and the devices.
func generatedFleet(t *testing.T, n int) (*netboxtest.Server, *NetBox, []Device) {
	t.Helper()
	srv := fleetNetBox(t, true)
	inv, err := Parse("nodes.yaml", nodesFile(n), wideTopology)
	noErr(t, err)
	applied(t, client(t, srv, userTerraform, nil), inv)
	nb := client(t, srv, userFleetd, nil)
	devs, err := nb.Devices(t.Context())
	noErr(t, err)
	if len(devs) != n {
		t.Fatalf("%d devices, want %d", len(devs), n)
	}
	return srv, nb, devs
}

// requestsBy counts srv's requests by method and path.
func requestsBy(srv *netboxtest.Server) map[string]int {
	n := map[string]int{}
	for _, r := range srv.Requests() {
		path, _, _ := strings.Cut(r.URI, "?")
		n[r.Method+" "+path]++
	}
	return n
}

// concurrently runs f(i) for i in [0, n) at once and waits for them all.
func concurrently(n int, f func(i int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Go(func() {
			start.Wait()
			f(i)
		})
	}
	start.Done()
	done.Wait()
}

// slow is a NetBox that answers every request late, so that the calls that
// come while the first is sent all wait for it.
var slow = netboxtest.Fault{Kind: netboxtest.Slow, Delay: 100 * time.Millisecond}

// storm forgets srv's requests, then runs f(i) for i in [0, n) at once
// while srv has the fault, heals srv, and returns f's errors.
func storm(srv *netboxtest.Server, fault netboxtest.Fault, n int, f func(i int) error) []error {
	srv.Inject(fault)
	srv.ResetRequests()
	errs := make([]error, n)
	concurrently(n, func(i int) { errs[i] = f(i) })
	srv.Inject(netboxtest.Fault{})
	return errs
}

// noneFailed fails t for each of devs whose call returned an error.
func noneFailed(t *testing.T, devs []Device, errs []error) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", devs[i].Name, err)
		}
	}
}

// TestRecordDeviceMACBatched: the MACs of 40 machines recorded at once cost
// at most two batches of three requests (the first call may go alone, the
// others wait for it and go together): the interfaces read in one list, the MAC objects
// made in one bulk create, the primary MACs set in one bulk update, each
// checked against NetBox's schema. A repeat reads the interface and writes
// nothing.
func TestRecordDeviceMACBatched(t *testing.T) {
	const n = 40
	srv, nb, devs := generatedFleet(t, n)
	macOf := func(i int) net.HardwareAddr { return net.HardwareAddr{0x58, 0x47, 0xca, 0, byte(i >> 8), byte(i)} }
	got := make([]Device, n)
	noneFailed(t, devs, storm(srv, slow, n, func(i int) (err error) {
		held := devs[i]
		held.MAC, held.SwitchPort = nil, 0
		got[i], err = nb.RecordDeviceMAC(t.Context(), held, macOf(i))
		return err
	}))
	by := requestsBy(srv)
	var patches int
	for k, v := range by {
		if strings.HasPrefix(k, "PATCH /api/dcim/interfaces/") {
			patches += v
		}
	}
	batches := by["GET /api/dcim/interfaces/"]
	if batches < 1 || batches > 2 || by["POST /api/dcim/mac-addresses/"] != batches || patches != batches || srv.RequestCount() != 3*batches {
		t.Errorf("recording %d new MACs at once took %d requests, want at most 6 (at most 2 batches of interfaces, MAC objects, primary MACs): %v", n, srv.RequestCount(), by)
	}
	for i := range n {
		fresh := deviceOf(t, nb, devs[i].ID)
		want := devs[i]
		want.MAC = macOf(i)
		wantDevice(t, want, fresh, "%s in NetBox", devs[i].Name)
		wantDevice(t, want, got[i], "%s as RecordDeviceMAC returned it", devs[i].Name)
	}

	// A second attestation of a machine reads its interface, and writes
	// no MAC object and no primary MAC again.
	srv.ResetRequests()
	again, err := nb.RecordDeviceMAC(t.Context(), devs[3], macOf(3))
	noErr(t, err)
	if n := srv.RequestCount(); n != 1 || again.MAC.String() != macOf(3).String() || again.SwitchPort != devs[3].SwitchPort {
		t.Errorf("a repeat: %d requests (want 1, the interface), MAC %s, port %d: %v", n, again.MAC, again.SwitchPort, srv.Requests())
	}
}

// TestRecordMACBatchRefused: when NetBox refuses a batch as a whole (one
// device of it has no interface), each device is recorded alone, and only
// the caller of the device NetBox cannot record gets the error.
func TestRecordMACBatchRefused(t *testing.T) {
	srv, nb, devs := generatedFleet(t, 6)
	bare, err := srv.Create(userAlice, "/api/dcim/devices/", map[string]any{"name": "bare", "device_type": 1, "role": 1, "site": 1})
	noErr(t, err)
	ids := []int64{bare[0], 99999}
	for _, d := range devs {
		ids = append(ids, d.ID)
	}
	errs := storm(srv, netboxtest.Fault{Kind: netboxtest.Slow, Delay: 50 * time.Millisecond}, len(ids), func(i int) error {
		return nb.RecordMAC(t.Context(), ids[i], net.HardwareAddr{2, 0, 0, 0, 0, byte(i)})
	})
	for i, err := range errs {
		if i < 2 {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("device %d: %v, want ErrNotFound", ids[i], err)
			}
			continue
		}
		if err != nil {
			t.Errorf("device %d: %v", ids[i], err)
		}
	}
	for i, d := range devs {
		got := deviceOf(t, nb, d.ID)
		if want := (net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 2)}); got.MAC.String() != want.String() {
			t.Errorf("%s: MAC %s, want %s", d.Name, got.MAC, want)
		}
	}
}

// TestJournalBatched: 40 journal lines written at once cost at most two
// requests, the first line perhaps alone and the rest in one bulk create checked against
// NetBox's schema, and each line lands on its device; a line NetBox
// refuses fails alone.
func TestJournalBatched(t *testing.T) {
	const n = 40
	srv, nb, devs := generatedFleet(t, n)
	errs := storm(srv, slow, n+1, func(i int) error {
		if i == n { // a device NetBox does not have
			return nb.Journal(t.Context(), 99999, JournalInfo, "nowhere")
		}
		return nb.Journal(t.Context(), devs[i].ID, JournalSuccess, fmt.Sprintf("line of %s", devs[i].Name))
	})
	noneFailed(t, devs, errs[:n])
	if errs[n] == nil {
		t.Error("a line on a device NetBox does not have was taken")
	}
	// The refused batch is written again line by line: at most the first
	// line, the refused bulk create, and one request per line of it.
	if c := srv.RequestCount(); c > n+3 {
		t.Errorf("%d requests for %d lines", c, n+1)
	}
	for _, d := range devs {
		if j := srv.Journal(d.ID); len(j) != 1 || j[0].Text != "line of "+d.Name || j[0].Kind != "success" {
			t.Errorf("%s's journal: %+v", d.Name, j)
		}
	}

	// Without a refusal, the same storm costs at most two requests.
	noneFailed(t, devs, storm(srv, slow, n, func(i int) error {
		return nb.Journal(t.Context(), devs[i].ID, JournalInfo, "again")
	}))
	if c := srv.RequestCount(); c > 2 {
		t.Errorf("%d lines at once took %d requests, want at most 2: %v", n, c, requestsBy(srv))
	}
}

// TestJournalEntries writes lines in order with bulk creates, BulkSize a
// request, and says how many NetBox holds when it stops.
func TestJournalEntries(t *testing.T) {
	srv, _, devs := generatedFleet(t, 3)
	nb := client(t, srv, userFleetd, &NetBoxConfig{Site: "folly", Switch: "usw", BindingAuthor: userTerraform, BulkSize: 2})
	var lines []JournalEntry
	for i := range 5 {
		lines = append(lines, JournalEntry{Device: devs[i%3].ID, Kind: JournalInfo, Text: fmt.Sprintf("line %d", i)})
	}
	srv.ResetRequests()
	n, err := nb.JournalEntries(t.Context(), lines)
	if err != nil || n != 5 {
		t.Fatalf("JournalEntries: %d written, %v", n, err)
	}
	if c := srv.RequestCount(); c != 3 {
		t.Errorf("5 lines, 2 a request: %d requests, want 3", c)
	}
	if got, want := journalOf(srv, devs[0].ID, ""), []string{"line 0", "line 3"}; !slices.Equal(got, want) {
		t.Errorf("%s's journal: %q, want %q", devs[0].Name, got, want)
	}

	// NetBox stops answering after the first request: 2 written.
	srv.Inject(netboxtest.Fault{Kind: netboxtest.Failing, After: 1})
	n, err = nb.JournalEntries(t.Context(), lines)
	srv.Inject(netboxtest.Fault{})
	if n != 2 || !errors.Is(err, ErrUnavailable) {
		t.Errorf("NetBox failing after one request: %d written, %v; want 2, ErrUnavailable", n, err)
	}
	if _, err := nb.JournalEntries(t.Context(), []JournalEntry{{Device: devs[0].ID, Kind: JournalInfo, Text: " "}}); err == nil {
		t.Error("a line without text was taken")
	}
}

// TestDeviceBindingAndUpdate: DeviceBinding reads the device and its
// changelog (2 requests) and returns the device DeviceBySerial returns but
// for its interface's MAC and port, which RecordDeviceMAC completes;
// UpdateDevice writes the attestation, last_run and desired_action in one
// request.
func TestDeviceBindingAndUpdate(t *testing.T) {
	srv, nb, devs := appliedFleet(t)
	ctx := t.Context()
	w1 := devs["w-01"]
	srv.ResetRequests()
	dev, b, err := nb.DeviceBinding(ctx, w1.Serial)
	noErr(t, err)
	if c := srv.RequestCount(); c != 2 {
		t.Errorf("DeviceBinding took %d requests, want 2", c)
	}
	if !b.Authored || b.ID != w1.ID || b.ApprovedEKHash != w1.ApprovedEKHash {
		t.Errorf("binding %+v", b)
	}
	want := w1
	want.MAC, want.SwitchPort = nil, 0
	wantDevice(t, want, dev, "DeviceBinding's device")
	full, err := nb.RecordDeviceMAC(ctx, dev, nil)
	noErr(t, err)
	wantDevice(t, w1, full, "completed by RecordDeviceMAC")

	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	run, none := "provision-w-01-1796119200", ""
	noErr(t, nb.SetDesiredAction(ctx, w1.ID, DesiredActionProvision))
	srv.ResetRequests()
	if err := nb.UpdateDevice(ctx, w1.ID, Update{
		Attestation:   &Attestation{EKHash: hashC, SwitchPort: 7, At: at, Verdict: "attested"},
		LastRun:       &run,
		DesiredAction: &none,
	}); err != nil {
		t.Fatal(err)
	}
	if c := srv.RequestCount(); c != 1 {
		t.Errorf("UpdateDevice took %d requests, want 1", c)
	}
	got := deviceOf(t, nb, w1.ID)
	want = w1
	want.AttestedEKHash, want.AttestedSwitchPort, want.AttestedAt, want.AttestVerdict, want.LastRun = hashC, 7, at, "attested", run
	wantDevice(t, want, got, "after UpdateDevice")
	srv.ResetRequests()
	if err := nb.UpdateDevice(ctx, w1.ID, Update{}); err != nil || srv.RequestCount() != 0 {
		t.Errorf("an empty Update: %v, %d requests", err, srv.RequestCount())
	}
}

// TestDeviceBySerialBatched: 40 machines' devices read by serial at once
// cost at most two list requests (the first call may go alone), and each
// caller gets its own device; in a batch, a serial no device has, one that
// differs from a device's only in case, and one two devices hold each get
// the error they get alone, and the other callers their devices.
func TestDeviceBySerialBatched(t *testing.T) {
	const n = 40
	srv, nb, devs := generatedFleet(t, n)
	got := make([]Device, n)
	noneFailed(t, devs, storm(srv, slow, n, func(i int) (err error) {
		got[i], _, err = nb.DeviceBinding(t.Context(), devs[i].Serial)
		return err
	}))
	for i := range devs {
		want := devs[i]
		want.MAC, want.SwitchPort = nil, 0
		wantDevice(t, want, got[i], "%s", devs[i].Name)
	}
	if reads := requestsBy(srv)["GET /api/dcim/devices/"]; reads < 1 || reads > 2 {
		t.Errorf("reading %d devices by serial at once took %d device reads, want at most 2: %v", n, reads, requestsBy(srv))
	}

	// w-01 takes w-02's serial; another serial no device has, and one
	// that differs from w-03's in case.
	noErr(t, srv.Update(userAlice, "/api/dcim/devices/", map[string]any{"id": devs[1].ID, "serial": devs[2].Serial}))
	serials := []string{devs[2].Serial, "NO-SUCH-SERIAL", strings.ToLower(devs[3].Serial), devs[4].Serial, devs[5].Serial}
	answers := make([]Device, len(serials))
	errs := storm(srv, slow, len(serials), func(i int) (err error) {
		answers[i], err = nb.DeviceBySerial(t.Context(), serials[i])
		return err
	})
	if reads := requestsBy(srv)["GET /api/dcim/devices/"]; reads > 2 {
		t.Errorf("%d device reads for %d serials at once, want at most 2", reads, len(serials))
	}
	for i, serial := range serials {
		alone, aloneErr := nb.DeviceBySerial(t.Context(), serial)
		if fmt.Sprint(errs[i]) != fmt.Sprint(aloneErr) || cmp.Diff(alone, answers[i], deviceCmp) != "" {
			t.Errorf("serial %q in a batch: %+v, %v; alone: %+v, %v", serial, answers[i], errs[i], alone, aloneErr)
		}
	}
	var dup *DuplicateSerialError
	if !errors.As(errs[0], &dup) || len(dup.Devices) != 2 {
		t.Errorf("serial two devices hold: %v, want a *DuplicateSerialError naming both", errs[0])
	}
	for _, i := range []int{1, 2} {
		if !errors.Is(errs[i], ErrNotFound) {
			t.Errorf("serial %q: %v, want ErrNotFound", serials[i], errs[i])
		}
	}
	if errs[3] != nil || answers[3].ID != devs[4].ID || errs[4] != nil || answers[4].ID != devs[5].ID {
		t.Errorf("the other callers: %v %v, %v %v", answers[3].Name, errs[3], answers[4].Name, errs[4])
	}
}

// TestDeviceBySerialLongSerials: serials as long as a claim's may be (128
// bytes) go in reads whose request line NetBox's gunicorn takes (at most
// 4,094 bytes); each caller is told ErrNotFound. A read NetBox refuses
// (here every request, 414) is made again for each serial alone, and each
// caller gets the answer it gets alone.
func TestDeviceBySerialLongSerials(t *testing.T) {
	const n = 40
	srv, nb, _ := generatedFleet(t, 3)
	serials := make([]string, n)
	for i := range serials {
		serials[i] = fmt.Sprintf("%03d%s", i, strings.Repeat("x/&=", 32)[:125]) // 128 bytes, 315 escaped
	}
	read := func(fault netboxtest.Fault) []error {
		return storm(srv, fault, n, func(i int) error {
			_, err := nb.DeviceBySerial(t.Context(), serials[i])
			return err
		})
	}
	for i, err := range read(slow) {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("serial %d: %v, want ErrNotFound", i, err)
		}
	}
	reads := 0
	for _, r := range srv.Requests() {
		if line := len(r.Method) + len(" ") + len(r.URI) + len(" HTTP/1.1"); line > 4094 {
			t.Errorf("a request line of %d bytes: %.80s...", line, r.URI)
		}
		if strings.HasPrefix(r.URI, "/api/dcim/devices/?") {
			reads++
		}
	}
	// The first call may go alone; the others wait and go together, in
	// as many reads as their URLs need.
	if most := 1 + len(serialChunks(serials, serialQuery)); reads > most {
		t.Errorf("%d device reads for %d long serials at once, want at most %d", reads, n, most)
	}

	srv.Inject(netboxtest.Fault{Kind: netboxtest.Failing, Status: http.StatusRequestURITooLong})
	_, alone := nb.DeviceBySerial(t.Context(), serials[0])
	srv.Inject(netboxtest.Fault{})
	if alone == nil || errors.Is(alone, ErrNotFound) || errors.Is(alone, ErrUnavailable) {
		t.Fatalf("a serial read NetBox refused: %v, want its refusal", alone)
	}
	errs := read(netboxtest.Fault{Kind: netboxtest.Failing, Status: http.StatusRequestURITooLong})
	askedAlone := map[string]bool{}
	for _, r := range srv.Requests() {
		_, query, _ := strings.Cut(r.URI, "?")
		if q, err := url.ParseQuery(query); err == nil && len(q["serial"]) == 1 {
			askedAlone[q.Get("serial")] = true
		}
	}
	for i, err := range errs {
		if !askedAlone[serials[i]] {
			t.Errorf("serial %d was not read alone after NetBox refused its batch", i)
		}
		if want := strings.Replace(alone.Error(), url.QueryEscape(serials[0]), url.QueryEscape(serials[i]), 1); err == nil || err.Error() != want {
			t.Errorf("serial %d in a refused batch: %v, want what it gets alone (%v)", i, err, alone)
		}
	}
}

func TestSerialChunks(t *testing.T) {
	long := strings.Repeat("é", 100) // 600 bytes escaped
	got := serialChunks([]string{"a", "b", "a", long, "c", long, "d"}, 3*len("serial=&")+2+len(url.QueryEscape(long)))
	want := [][]string{{"a", "b", long}, {"c", "d"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("serialChunks (-want +got):\n%s", diff)
	}
	if got := serialChunks([]string{long, "a"}, 10); !cmp.Equal(got, [][]string{{long}, {"a"}}) {
		t.Errorf("a serial longer than the bound: %q, want it alone", got)
	}
}
