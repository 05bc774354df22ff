package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// deviceCmp compares Devices.
var deviceCmp = cmpopts.EquateComparable(netip.Prefix{})

// wantDevice fails t, with the diff and what format and args name, when
// got is not want.
func wantDevice(t *testing.T, want, got Device, format string, args ...any) {
	t.Helper()
	if diff := cmp.Diff(want, got, deviceCmp); diff != "" {
		t.Errorf(format+" (-want +got):\n%s", append(args, diff)...)
	}
}

// listed returns how many objects NetBox lists at uri, read as alice.
func listed(t *testing.T, srv *netboxtest.Server, uri string) int {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL+uri, nil)
	noErr(t, err)
	req.Header.Set("Authorization", "Token "+srv.Token(userAlice))
	rsp, err := http.DefaultClient.Do(req)
	noErr(t, err)
	defer rsp.Body.Close()
	var p struct{ Count int }
	if err := json.NewDecoder(rsp.Body).Decode(&p); err != nil || rsp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", uri, rsp.StatusCode, err)
	}
	return p.Count
}

// appliedFleet is a NetBox holding fleetNodes, and fleetd's client of it.
func appliedFleet(t *testing.T) (*netboxtest.Server, *NetBox, map[string]Device) {
	t.Helper()
	srv, _ := terraformFleet(t)
	nb := client(t, srv, userFleetd, nil)
	devs, err := nb.Devices(t.Context())
	noErr(t, err)
	return srv, nb, byName(devs)
}

// Devices, DeviceBySerial and Device read a device alike, and a serial or
// ID NetBox does not have is ErrNotFound. The setters refuse what NetBox
// would not take before sending anything, and a device NetBox does not
// have is ErrNotFound; what they write is TestPlanKeepsWhatFleetdOwns's.
// Journal writes each kind of entry on its device, and JournalHas finds an
// entry by its exact text and kind on its device only: not a longer text
// that contains it, another kind, or another device's entry. Then the
// refusal journal writes there (see below).
func TestDeviceViews(t *testing.T) {
	srv, nb, devs := appliedFleet(t)
	ctx := t.Context()
	cp01 := Device{
		ID: devs["cp-01"].ID, Name: "cp-01", Serial: "MS01-0001", Status: StatusPlanned, Model: "ms-01",
		Class: "controlplane", BMC: "amt", Address: netip.MustParsePrefix("10.40.0.10/24"), SwitchPort: 1,
		InstallDisk: "/dev/nvme0n1", InstallDiskSerial: "S6B0NL0W412345A", ApprovedEKHash: hashA, ApprovedEKHashECC: hashB,
	}
	if len(devs) != 3 {
		t.Errorf("Devices returned %d devices, want 3", len(devs))
	}
	bySerial, err := nb.DeviceBySerial(ctx, "MS01-0001")
	noErr(t, err)
	for view, got := range map[string]Device{"Devices: cp-01": devs["cp-01"], "DeviceBySerial": bySerial, "Device": deviceOf(t, nb, cp01.ID)} {
		wantDevice(t, cp01, got, "%s", view)
	}
	if w2 := devs["w-02"]; w2.InstallDiskSerial != "" || w2.ApprovedEKHash != "" || w2.Model != "nuc-13" || w2.BMC != "none" || w2.SwitchPort != 6 {
		t.Errorf("w-02: %+v", w2)
	}
	for name, err := range map[string]error{
		"unknown serial":                      func() error { _, err := nb.DeviceBySerial(ctx, "NOPE"); return err }(),
		"serial in another case":              func() error { _, err := nb.DeviceBySerial(ctx, "ms01-0001"); return err }(),
		"binding of an unknown serial":        func() error { _, err := nb.BindingBySerial(ctx, "NOPE"); return err }(),
		"binding of a serial in another case": func() error { _, err := nb.BindingBySerial(ctx, "ms01-0001"); return err }(),
		"empty serial":                        func() error { _, err := nb.DeviceBySerial(ctx, ""); return err }(),
		"unknown ID":                          func() error { _, err := nb.Device(ctx, 9999); return err }(),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	w1, w2 := devs["w-01"].ID, devs["w-02"].ID
	srv.ResetRequests()
	for _, s := range []Status{"", "retired", "Planned"} {
		if err := nb.SetStatus(ctx, w2, s); err == nil {
			t.Errorf("SetStatus(%q) succeeded", s)
		}
	}
	for _, j := range []struct {
		kind JournalKind
		text string
	}{{"", "x"}, {"error", "x"}, {JournalInfo, ""}, {JournalInfo, "  "}} {
		if err := nb.Journal(ctx, w2, j.kind, j.text); err == nil {
			t.Errorf("Journal(%q, %q) succeeded", j.kind, j.text)
		}
	}
	if n := srv.RequestCount(); n != 0 {
		t.Errorf("refused arguments made %d requests", n)
	}
	if err := nb.SetStatus(ctx, 9999, StatusActive); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetStatus of an unknown device: %v, want ErrNotFound", err)
	}
	const line = "Workflow provision-w-01-1767225600 ended SUCCESS"
	has := func(id int64, kind JournalKind, text string) bool {
		t.Helper()
		ok, err := nb.JournalHas(ctx, id, kind, text)
		noErr(t, err)
		return ok
	}
	if has(w1, JournalSuccess, line) {
		t.Fatal("an empty journal has the line")
	}
	entries := []JournalEntry{
		{w1, JournalSuccess, line + ": the install disk is wiped"},
		{w1, JournalInfo, line},
		{w1, JournalWarning, line},
		{w1, JournalDanger, line},
		{w2, JournalSuccess, line},
	}
	var want []netboxtest.JournalEntry
	for _, e := range entries {
		noErr(t, nb.Journal(ctx, e.Device, e.Kind, e.Text))
		want = append(want, netboxtest.JournalEntry{Device: e.Device, Kind: string(e.Kind), Text: e.Text})
	}
	if diff := cmp.Diff(want, srv.Journal(0), cmpopts.IgnoreFields(netboxtest.JournalEntry{}, "ID")); diff != "" {
		t.Errorf("the journal (-want +got):\n%s", diff)
	}
	if has(w1, JournalSuccess, line) {
		t.Error("JournalHas found the line in a longer one, another kind's or another device's")
	}
	noErr(t, nb.Journal(ctx, w1, JournalSuccess, line))
	if !has(w1, JournalSuccess, line) {
		t.Error("JournalHas did not find the line once written")
	}
	if has(w1, JournalSuccess, strings.ToUpper(line)) {
		t.Error("JournalHas matched the line in another case")
	}
	if _, err := nb.JournalHas(ctx, w1, JournalKind("loud"), line); err == nil {
		t.Error("JournalHas of an unknown kind succeeded")
	}

	// A refusal is journaled on its device at most once per Every for each
	// kind and serial, in the caller's words; a duplicate serial on every
	// device that holds it.
	q := NewJournalQueue(nb, nil)
	defer q.Close(t.Context())
	r := NewRefusalJournal(nb, q, &RefusalJournalConfig{Name: "fleetd"})
	now := time.Unix(1767225600, 0)
	w01 := devs["w-01"]

	for _, at := range []time.Duration{0, time.Minute, DefaultRefusalEvery - time.Second, DefaultRefusalEvery} {
		r.Unauthored(w01.Serial, now.Add(at))
	}
	r.Unauthored(cp01.Serial, now) // another serial: its own throttle
	dup := &DuplicateSerialError{Serial: "MS01-0002", Devices: []DeviceRef{{cp01.ID, "cp-01"}, {w01.ID, "w-01"}}}
	r.DuplicateSerial(dup, now)
	r.DuplicateSerial(dup, now.Add(time.Minute))
	noErr(t, q.Flush(t.Context()))

	unauthored := "attest: FAILED ek-binding-unauthored: NetBox's changelog does not show bindingAuthor terraform writing the approved EK binding; another user edited it, or the changelog lost the record, and fleetd admitted nothing. Restore the binding from git: remove the lines, apply, add them back and apply"
	duplicate := fmt.Sprintf(`attest: FAILED: NetBox holds more than one device with serial "MS01-0002": cp-01 (id %d), w-01 (id %d); fleetd cannot tell which one's approved EK binding to judge, and admitted nothing. Correct the serial of each device whose machine does not report it (a device left from an earlier entry keeps its serial in NetBox), then power-cycle the machine`, cp01.ID, w01.ID)
	for _, tc := range []struct {
		dev  Device
		want []string
	}{
		{w01, []string{unauthored, unauthored, duplicate}},
		{cp01, []string{unauthored, duplicate}},
	} {
		got := journalOf(srv, tc.dev.ID, "attest: ")
		slices.Sort(got) // compared in any order
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s's journal:\n%q\nwant\n%q", tc.dev.Name, got, tc.want)
		}
	}

	if got := unauthoredLine(DefaultRefusalName, ""); got != "attest: FAILED ek-binding-unauthored: NetBox's changelog does not show the binding author (bindingAuthor is unset) writing the approved EK binding; another user edited it, or the changelog lost the record, and the attestation server admitted nothing. Restore the binding from git: remove the lines, apply, add them back and apply" {
		t.Errorf("the line without a binding author: %q", got)
	}
}

// RecordAttestation records the MAC and the attested_* fields, the proven
// boot (attested_secure_boot, attested_pcr7) among them, and clears each
// field an attestation does not carry. The same attestation again reads
// the interface and writes the fields; a new MAC becomes primary beside
// the old one.
func TestRecordAttestation(t *testing.T) {
	srv, nb, devs := appliedFleet(t)
	ctx := t.Context()
	w1 := devs["w-01"]
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
	mac, _ := net.ParseMAC("58:47:ca:71:0a:01")
	mac2, _ := net.ParseMAC("58:47:ca:71:0a:02")
	first := Attestation{MAC: mac, EKHash: hashC, EKHashECC: hashA, SwitchPort: 5, At: at, Verdict: "attested"}
	for i, c := range []struct {
		a        Attestation
		requests int // 0: not counted
	}{
		{a: first},
		{a: first, requests: 2}, // the interface and the fields: no MAC object
		{a: Attestation{MAC: mac2, EKHash: hashC, Verdict: "attested"}},
		{a: Attestation{MAC: mac2, EKHash: hashC, At: at, Verdict: "attested", SecureBoot: SecureBootOff, PCR7: hashB}},
		{a: Attestation{MAC: mac2, EKHash: hashC, At: at, Verdict: "attested", SecureBoot: SecureBootOn, PCR7: hashA}},
		{a: Attestation{MAC: mac2, EKHash: hashC, At: at, Verdict: "attested", SecureBoot: SecureBootUnquoted}},
		{a: Attestation{MAC: mac2, EKHash: hashC, At: at, Verdict: "attested"}},
	} {
		srv.ResetRequests()
		noErr(t, nb.RecordAttestation(ctx, w1.ID, c.a))
		if n := srv.RequestCount(); c.requests != 0 && n != c.requests {
			t.Errorf("attestation %d took %d requests, want %d: %v", i, n, c.requests, srv.Requests())
		}
		want := w1
		want.MAC, want.AttestedEKHash, want.AttestedEKHashECC, want.AttestedSwitchPort, want.AttestedAt = c.a.MAC, c.a.EKHash, c.a.EKHashECC, c.a.SwitchPort, c.a.At
		want.AttestVerdict, want.AttestedSecureBoot, want.AttestedPCR7 = c.a.Verdict, c.a.SecureBoot, c.a.PCR7
		wantDevice(t, want, deviceOf(t, nb, w1.ID), "after attestation %d", i)
	}
	if n := listed(t, srv, "/api/dcim/mac-addresses/?device_id="+strconv.FormatInt(w1.ID, 10)); n != 2 {
		t.Errorf("%d MAC objects on w-01, want 2", n)
	}
	// NetBox holds attested_pcr7 to 64 lowercase hex characters.
	err := nb.RecordAttestation(ctx, w1.ID, Attestation{MAC: mac2, Verdict: "attested", SecureBoot: SecureBootOn, PCR7: "PCR7"})
	if err == nil {
		t.Error("NetBox took an attested_pcr7 that is not 64 lowercase hex characters")
	}
	if err := nb.RecordAttestation(ctx, 9999, Attestation{MAC: mac, Verdict: "attested"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("RecordAttestation of an unknown device: %v, want ErrNotFound", err)
	}
}

func TestNewNetBoxRefuses(t *testing.T) {
	for _, c := range []struct {
		url, token string
		cfg        *NetBoxConfig
	}{
		{"", "t", nil},
		{"ftp://netbox", "t", nil},
		{"netbox.example", "t", nil},
		{"https://netbox.example?x=1", "t", nil},
		{"https://netbox.example", "", nil},
		{"https://netbox.example", "t", &NetBoxConfig{PortName: "Port"}},
		{"https://netbox.example", "t", &NetBoxConfig{PortName: "%d/%d"}},
		{"https://netbox.example", "t", &NetBoxConfig{PortName: "%s %d"}},
	} {
		if _, err := NewNetBox(c.url, c.token, c.cfg); err == nil {
			t.Errorf("NewNetBox(%q, %q, %+v) succeeded", c.url, c.token, c.cfg)
		}
	}
}

func TestPortNames(t *testing.T) {
	for _, c := range []struct {
		format string
		port   int
		name   string
	}{
		{"", 5, "Port 5"},
		{"Port %d", 48, "Port 48"},
		{"Gi1/0/%d", 12, "Gi1/0/12"},
		{"eth%d-x", 3, "eth3-x"},
	} {
		nb, err := NewNetBox("https://netbox.example", "t", &NetBoxConfig{PortName: c.format})
		noErr(t, err)
		if got := nb.PortName(c.port); got != c.name {
			t.Errorf("%q: PortName(%d) = %q, want %q", c.format, c.port, got, c.name)
		}
		if got := nb.portNumber(c.name); got != c.port {
			t.Errorf("%q: portNumber(%q) = %d, want %d", c.format, c.name, got, c.port)
		}
	}
	nb, _ := NewNetBox("https://netbox.example", "t", nil)
	for _, name := range []string{"Port", "Port ", "Port 0", "Port 05", "Port -1", "Port 1x", "port 1", "Port 99999999999", "SFP+ 1"} {
		if n := nb.portNumber(name); n != 0 {
			t.Errorf("portNumber(%q) = %d, want 0", name, n)
		}
	}
}
