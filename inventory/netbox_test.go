package inventory

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
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

// raw makes one API request as token and decodes the answer into out.
func raw(t *testing.T, srv *netboxtest.Server, token, method, uri string, body, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		noErr(t, err)
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, srv.URL+uri, r)
	noErr(t, err)
	req.Header.Set("Authorization", "Token "+token)
	req.Header.Set("Content-Type", "application/json")
	rsp, err := http.DefaultClient.Do(req)
	noErr(t, err)
	defer rsp.Body.Close()
	data, _ := io.ReadAll(rsp.Body)
	if out != nil && rsp.StatusCode/100 == 2 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, uri, err, data)
		}
	}
	return rsp.StatusCode
}

// appliedFleet is a NetBox holding fleetNodes, and fleetd's client of it.
func appliedFleet(t *testing.T) (*netboxtest.Server, *NetBox, map[string]Device) {
	t.Helper()
	srv := fleetNetBox(t, true)
	applied(t, client(t, srv, userTerraform, nil), parseNodes(t, fleetNodes))
	nb := client(t, srv, userFleetd, nil)
	devs, err := nb.Devices(t.Context())
	noErr(t, err)
	return srv, nb, byName(devs)
}

func TestDeviceViews(t *testing.T) {
	_, nb, devs := appliedFleet(t)
	ctx := t.Context()
	want := Device{
		ID: devs["cp-01"].ID, Name: "cp-01", Serial: "MS01-0001", Status: StatusPlanned, Model: "ms-01",
		Class: "controlplane", BMC: "amt", Address: netip.MustParsePrefix("10.40.0.10/24"), SwitchPort: 1,
		InstallDisk: "/dev/nvme0n1", InstallDiskSerial: "S6B0NL0W412345A", ApprovedEKHash: hashA, ApprovedEKHashECC: hashB,
	}
	if len(devs) != 3 {
		t.Errorf("Devices returned %d devices, want 3", len(devs))
	}
	bySerial, err := nb.DeviceBySerial(ctx, "MS01-0001")
	noErr(t, err)
	for view, got := range map[string]Device{"Devices: cp-01": devs["cp-01"], "DeviceBySerial": bySerial, "Device": deviceOf(t, nb, want.ID)} {
		if diff := cmp.Diff(want, got, deviceCmp); diff != "" {
			t.Errorf("%s (-want +got):\n%s", view, diff)
		}
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
}

// The proven boot goes beside the attested_* fields: attested_secure_boot
// and attested_pcr7, each cleared by an attestation that carries none.
func TestRecordAttestationBoot(t *testing.T) {
	_, nb, devs := appliedFleet(t)
	ctx := t.Context()
	w1 := devs["w-01"]
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mac, _ := net.ParseMAC("58:47:ca:71:0a:01")
	for _, a := range []Attestation{
		{MAC: mac, EKHash: hashC, At: at, Verdict: "attested", SecureBoot: SecureBootOff, PCR7: hashB},
		{MAC: mac, EKHash: hashC, At: at, Verdict: "attested", SecureBoot: SecureBootOn, PCR7: hashA},
		{MAC: mac, EKHash: hashC, At: at, Verdict: "attested", SecureBoot: SecureBootUnquoted},
		{MAC: mac, EKHash: hashC, At: at, Verdict: "attested"},
	} {
		noErr(t, nb.RecordAttestation(ctx, w1.ID, a))
		got := deviceOf(t, nb, w1.ID)
		if got.AttestedSecureBoot != a.SecureBoot || got.AttestedPCR7 != a.PCR7 || got.AttestVerdict != "attested" {
			t.Errorf("after recording secure boot %q, pcr7 %q: the device holds %q, %q, verdict %q", a.SecureBoot, a.PCR7, got.AttestedSecureBoot, got.AttestedPCR7, got.AttestVerdict)
		}
	}
	// NetBox holds attested_pcr7 to 64 lowercase hex characters.
	err := nb.RecordAttestation(ctx, w1.ID, Attestation{MAC: mac, Verdict: "attested", SecureBoot: SecureBootOn, PCR7: "PCR7"})
	if err == nil {
		t.Error("NetBox took an attested_pcr7 that is not 64 lowercase hex characters")
	}
}

func TestRecordAttestation(t *testing.T) {
	srv, nb, devs := appliedFleet(t)
	ctx := t.Context()
	w1 := devs["w-01"]
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
	mac, _ := net.ParseMAC("58:47:ca:71:0a:01")
	a := Attestation{MAC: mac, EKHash: hashC, EKHashECC: hashA, SwitchPort: 5, At: at, Verdict: "attested"}
	noErr(t, nb.RecordAttestation(ctx, w1.ID, a))
	got := deviceOf(t, nb, w1.ID)
	want := w1
	want.MAC, want.AttestedEKHash, want.AttestedEKHashECC, want.AttestedSwitchPort, want.AttestedAt, want.AttestVerdict = mac, hashC, hashA, 5, at, "attested"
	if diff := cmp.Diff(want, got, deviceCmp); diff != "" {
		t.Errorf("after RecordAttestation (-want +got):\n%s", diff)
	}

	// The same MAC again adds no MAC object; a new one becomes primary.
	srv.ResetRequests()
	noErr(t, nb.RecordAttestation(ctx, w1.ID, a))
	if n := srv.RequestCount(); n != 2 {
		t.Errorf("recording the same attestation again took %d requests, want 2 (interface, fields): %v", n, srv.Requests())
	}
	mac2, _ := net.ParseMAC("58:47:ca:71:0a:02")
	a.MAC, a.SwitchPort, a.At, a.EKHashECC = mac2, 0, time.Time{}, ""
	noErr(t, nb.RecordAttestation(ctx, w1.ID, a))
	got = deviceOf(t, nb, w1.ID)
	if got.MAC.String() != mac2.String() || got.AttestedSwitchPort != 0 || !got.AttestedAt.IsZero() || got.AttestedEKHashECC != "" {
		t.Errorf("after a second attestation: MAC %s, port %d, at %v, ecc %q", got.MAC, got.AttestedSwitchPort, got.AttestedAt, got.AttestedEKHashECC)
	}
	var macs struct{ Count int }
	raw(t, srv, srv.Token(userAlice), "GET", "/api/dcim/mac-addresses/?device_id="+strconv.FormatInt(w1.ID, 10), nil, &macs)
	if macs.Count != 2 {
		t.Errorf("%d MAC objects on w-01, want 2", macs.Count)
	}
}

func TestSetters(t *testing.T) {
	srv, nb, devs := appliedFleet(t)
	ctx := t.Context()
	w2 := devs["w-02"]
	noErr(t, nb.SetStatus(ctx, w2.ID, StatusActive))
	noErr(t, nb.SetDesiredAction(ctx, w2.ID, DesiredActionProvision))
	noErr(t, nb.SetLastRun(ctx, w2.ID, "provision-w-02-1796119200"))
	got := deviceOf(t, nb, w2.ID)
	if got.Status != StatusActive || got.DesiredAction != DesiredActionProvision || got.LastRun != "provision-w-02-1796119200" {
		t.Errorf("after the setters: status %s, desired_action %q, last_run %q", got.Status, got.DesiredAction, got.LastRun)
	}
	// What the setters wrote left the declared fields alone.
	if got.Class != "worker" || got.InstallDisk != "/dev/nvme0n1" || got.Serial != "G6NUC13-88121" {
		t.Errorf("the setters changed declared fields: %+v", got)
	}
	waiting, err := nb.DevicesWithDesiredAction(ctx)
	noErr(t, err)
	if len(waiting) != 1 || waiting[0].Name != "w-02" || waiting[0].SwitchPort != 6 {
		t.Errorf("DevicesWithDesiredAction = %+v, want w-02 with its port", waiting)
	}
	noErr(t, nb.SetDesiredAction(ctx, w2.ID, ""))
	noErr(t, nb.SetLastRun(ctx, w2.ID, ""))
	got = deviceOf(t, nb, w2.ID)
	if got.DesiredAction != "" || got.LastRun != "" {
		t.Errorf("after clearing: desired_action %q, last_run %q", got.DesiredAction, got.LastRun)
	}
	waiting, err = nb.DevicesWithDesiredAction(ctx)
	if err != nil || len(waiting) != 0 {
		t.Errorf("DevicesWithDesiredAction after clearing = %v, %v", waiting, err)
	}

	srv.ResetRequests()
	for _, s := range []Status{"", "retired", "Planned"} {
		if err := nb.SetStatus(ctx, w2.ID, s); err == nil {
			t.Errorf("SetStatus(%q) succeeded", s)
		}
	}
	for _, j := range []struct {
		kind JournalKind
		text string
	}{{"", "x"}, {"error", "x"}, {JournalInfo, ""}, {JournalInfo, "  "}} {
		if err := nb.Journal(ctx, w2.ID, j.kind, j.text); err == nil {
			t.Errorf("Journal(%q, %q) succeeded", j.kind, j.text)
		}
	}
	if n := srv.RequestCount(); n != 0 {
		t.Errorf("refused arguments made %d requests", n)
	}
	if err := nb.SetStatus(ctx, 9999, StatusActive); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetStatus of an unknown device: %v, want ErrNotFound", err)
	}
	mac, _ := net.ParseMAC("58:47:ca:71:0a:01")
	if err := nb.RecordAttestation(ctx, 9999, Attestation{MAC: mac, Verdict: "attested"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("RecordAttestation of an unknown device: %v, want ErrNotFound", err)
	}
}

func TestJournal(t *testing.T) {
	srv, nb, devs := appliedFleet(t)
	ctx := t.Context()
	id := devs["w-01"].ID
	kinds := []JournalKind{JournalInfo, JournalSuccess, JournalWarning, JournalDanger}
	for _, k := range kinds {
		noErr(t, nb.Journal(ctx, id, k, "on port 7, expected 5 ("+string(k)+")"))
	}
	var entries struct {
		Results []struct {
			Kind      struct{ Value string }
			Comments  string
			CreatedBy *int64 `json:"created_by"`
		}
	}
	raw(t, srv, srv.Token(userAlice), "GET", "/api/extras/journal-entries/?assigned_object_type=dcim.device&assigned_object_id="+strconv.FormatInt(id, 10), nil, &entries)
	if len(entries.Results) != len(kinds) {
		t.Fatalf("%d journal entries, want %d", len(entries.Results), len(kinds))
	}
	for i, e := range entries.Results {
		if e.Kind.Value != string(kinds[i]) || e.Comments != "on port 7, expected 5 ("+string(kinds[i])+")" || e.CreatedBy == nil {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	if err := nb.Journal(ctx, 9999, JournalInfo, "x"); err == nil {
		t.Error("Journal on an unknown device succeeded")
	}
}

// JournalHas finds an entry by its exact text and kind on its device
// only: not a longer text that contains it, another kind, or another
// device's entry.
func TestJournalHas(t *testing.T) {
	_, nb, devs := appliedFleet(t)
	ctx := t.Context()
	w1, w2 := devs["w-01"].ID, devs["w-02"].ID
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
	for _, e := range []JournalEntry{
		{w1, JournalSuccess, line + ": the install disk is wiped"},
		{w1, JournalInfo, line},
		{w2, JournalSuccess, line},
	} {
		noErr(t, nb.Journal(ctx, e.Device, e.Kind, e.Text))
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

// The client logs each request, and never the token, even when NetBox
// refuses it.
func TestTokenNeverLogged(t *testing.T) {
	srv, _, devs := appliedFleet(t)
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, tok := range []string{srv.Token(userFleetd), "0123456789abcdef0123456789abcdef01234567"} {
		nb, err := NewNetBox(srv.URL, tok, &NetBoxConfig{Site: "folly", Switch: "usw", BindingAuthor: userTerraform, Logger: logger})
		noErr(t, err)
		for name, op := range operations(nb, devs["w-01"].ID, parseNodes(t, fleetNodes)) {
			if err := op(t.Context()); err != nil && strings.Contains(err.Error(), tok) {
				t.Errorf("%s: the error shows the token: %v", name, err)
			}
		}
		if strings.Contains(log.String(), tok) {
			t.Errorf("the log shows the token")
		}
	}
	if n := strings.Count(log.String(), "netbox request"); n < 20 {
		t.Errorf("%d requests logged:\n%s", n, log.String())
	}
}

// Before the first apply NetBox has no role of fleet's devices, and answers
// 400 to a list filtered by it: the client reads that as no device.
func TestBeforeTheFirstApply(t *testing.T) {
	srv := fleetNetBox(t, true)
	nb := client(t, srv, userFleetd, nil)
	ctx := t.Context()
	if devs, err := nb.Devices(ctx); err != nil || len(devs) != 0 {
		t.Errorf("Devices = %v, %v", devs, err)
	}
	if devs, err := nb.DevicesWithDesiredAction(ctx); err != nil || len(devs) != 0 {
		t.Errorf("DevicesWithDesiredAction = %v, %v", devs, err)
	}
	if _, err := nb.DeviceBySerial(ctx, "MS01-0001"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeviceBySerial: %v, want ErrNotFound", err)
	}
	if _, err := nb.BindingBySerial(ctx, "MS01-0001"); !errors.Is(err, ErrNotFound) {
		t.Errorf("BindingBySerial: %v, want ErrNotFound", err)
	}
	// As NetBox does.
	if code := raw(t, srv, srv.Token(userAlice), "GET", "/api/dcim/devices/?role=kubernetes-node", nil, nil); code != 400 {
		t.Errorf("netboxtest answered %d to a list of a role it lacks, want 400 as NetBox does", code)
	}
}
