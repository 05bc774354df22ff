package inventory

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetkit/fleet/inventory/netboxtest"
)

func TestPlanApplyRoundTrip(t *testing.T) {
	srv := fleetNetBox(t, true)
	nb := client(t, srv, userTerraform, nil)
	inv := parseNodes(t, fleetNodes)
	// Before the first apply NetBox has no role of fleet's devices, and
	// answers 400 to a list filtered by it: the client reads that as no
	// device.
	fleetd, ctx := client(t, srv, userFleetd, nil), t.Context()
	if devs, err := fleetd.Devices(ctx); err != nil || len(devs) != 0 {
		t.Errorf("Devices = %v, %v", devs, err)
	}
	if devs, err := fleetd.DevicesWithDesiredAction(ctx); err != nil || len(devs) != 0 {
		t.Errorf("DevicesWithDesiredAction = %v, %v", devs, err)
	}
	if _, err := fleetd.DeviceBySerial(ctx, "MS01-0001"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeviceBySerial: %v, want ErrNotFound", err)
	}
	if _, err := fleetd.BindingBySerial(ctx, "MS01-0001"); !errors.Is(err, ErrNotFound) {
		t.Errorf("BindingBySerial: %v, want ErrNotFound", err)
	}
	p, err := nb.Plan(t.Context(), inv)
	noErr(t, err)
	if add, change := p.Counts(); add != 23 || change != 0 {
		t.Errorf("the first plan adds %d and changes %d, want 23 and 0:\n%s", add, change, p)
	}
	text := p.String()
	for _, want := range []string{
		"  + custom field approved_ek_hash (type \"text\", object_types \"dcim.device\", validation_regex \"^[0-9a-f]{64}$\")\n",
		"  + device type nuc-13 (manufacturer \"ASUS\", model \"NUC 13 Pro\")\n",
		"  + device w-02\n",
		"      + status       = \"planned\"\n",
		"      + cable                = \"usw Port 1\"\n",
		"      + primary_ip4         = \"10.40.0.21/24\"\n",
		"Plan: 23 to add, 0 to change.\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "mac") || strings.Contains(text, "approved_ek_hash_ecc = \"\"") {
		t.Errorf("the plan writes a MAC or an empty field:\n%s", text)
	}
	noErr(t, nb.Apply(t.Context(), p))
	again, err := nb.Plan(t.Context(), inv)
	noErr(t, err)
	if !again.Empty() || again.String() != "No changes. NetBox matches the nodes file.\n" {
		t.Fatalf("the plan after apply is not empty:\n%s", again)
	}
	devs, err := nb.Devices(t.Context())
	noErr(t, err)
	for _, d := range devs {
		if d.Status != StatusPlanned || d.MAC != nil || !d.Address.IsValid() || d.SwitchPort == 0 {
			t.Errorf("device %s after apply: %+v", d.Name, d)
		}
	}
}

// terraformFleet is a NetBox holding fleetNodes, and terraform's client of
// it.
func terraformFleet(t *testing.T) (*netboxtest.Server, *NetBox) {
	t.Helper()
	srv := fleetNetBox(t, true)
	nb := client(t, srv, userTerraform, nil)
	applied(t, nb, parseNodes(t, fleetNodes))
	return srv, nb
}

// Plan never touches what fleetd owns: status after planned, attested_*,
// attest_verdict, desired_action, last_run, MAC. fleetd's writes change
// only those fields, and DevicesWithDesiredAction lists the device while
// its desired_action is set.
func TestPlanKeepsWhatFleetdOwns(t *testing.T) {
	srv, nb := terraformFleet(t)
	fleetd := client(t, srv, userFleetd, nil)
	ctx := t.Context()
	d, err := fleetd.DeviceBySerial(ctx, "MS01-0002")
	noErr(t, err)
	mac, _ := net.ParseMAC("58:47:ca:71:0a:01")
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	const run = "provision-w-01-1796119200"
	noErr(t, fleetd.RecordAttestation(ctx, d.ID, Attestation{MAC: mac, EKHash: hashC, EKHashECC: hashD, SwitchPort: 5, At: at, Verdict: "attested"}))
	for _, err := range []error{
		fleetd.SetStatus(ctx, d.ID, StatusActive),
		fleetd.SetDesiredAction(ctx, d.ID, DesiredActionProvision),
		fleetd.SetLastRun(ctx, d.ID, run),
	} {
		noErr(t, err)
	}
	before := deviceOf(t, fleetd, d.ID)
	want := d
	want.MAC, want.AttestedEKHash, want.AttestedEKHashECC, want.AttestedSwitchPort, want.AttestedAt, want.AttestVerdict = mac, hashC, hashD, 5, at, "attested"
	want.Status, want.DesiredAction, want.LastRun = StatusActive, DesiredActionProvision, run
	wantDevice(t, want, before, "after fleetd's writes")
	waiting, err := fleetd.DevicesWithDesiredAction(ctx)
	noErr(t, err)
	if len(waiting) != 1 || waiting[0].Name != "w-01" || waiting[0].SwitchPort != 5 {
		t.Errorf("DevicesWithDesiredAction = %+v, want w-01 with its port", waiting)
	}
	if p, err := nb.Plan(ctx, parseNodes(t, fleetNodes)); err != nil || !p.Empty() {
		t.Fatalf("what fleetd wrote makes a plan: %v\n%s", err, p)
	}
	changed := strings.Replace(fleetNodes, "class: worker\n    switch_port: 5", "class: controlplane\n    switch_port: 5", 1)
	applied(t, nb, parseNodes(t, changed))
	after := deviceOf(t, fleetd, d.ID)
	want = before
	want.Class = "controlplane"
	wantDevice(t, want, after, "an apply changed more than the class")
	noErr(t, fleetd.SetDesiredAction(ctx, d.ID, ""))
	noErr(t, fleetd.SetLastRun(ctx, d.ID, ""))
	if got := deviceOf(t, fleetd, d.ID); got.DesiredAction != "" || got.LastRun != "" {
		t.Errorf("after clearing: desired_action %q, last_run %q", got.DesiredAction, got.LastRun)
	}
	if waiting, err := fleetd.DevicesWithDesiredAction(ctx); err != nil || len(waiting) != 0 {
		t.Errorf("DevicesWithDesiredAction after clearing = %v, %v", waiting, err)
	}
}

// Plans of edits of the nodes file, each applied in turn: one field; w-01
// and w-02 swapping ports and w-01 moving to another address; w-02 left
// out, which fleet never deletes.
func TestPlanEdits(t *testing.T) {
	srv, nb := terraformFleet(t)
	changed := strings.Replace(fleetNodes, "disk_serial: S6B0NL0W412346B", "disk_serial: S6B0NL0W412399Z", 1)
	p, err := nb.Plan(t.Context(), parseNodes(t, changed))
	noErr(t, err)
	want := []Change{{Action: ActionUpdate, Kind: "device", Name: "w-01", Fields: []FieldChange{{Name: "install_disk_serial", Old: "S6B0NL0W412346B", New: "S6B0NL0W412399Z"}}}}
	if diff := cmp.Diff(want, p.Changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	wantText := `fleet will make these changes in NetBox:

  ~ device w-01
      ~ install_disk_serial = "S6B0NL0W412346B" -> "S6B0NL0W412399Z"

Plan: 0 to add, 1 to change.
`
	if got := p.String(); got != wantText {
		t.Errorf("plan text:\n%s\nwant:\n%s", got, wantText)
	}
	srv.ResetRequests()
	noErr(t, nb.Apply(t.Context(), p))
	if n := srv.RequestCount(); n != 1 {
		t.Errorf("applying one field took %d requests, want 1: %v", n, srv.Requests())
	}
	if p, err := nb.Plan(t.Context(), parseNodes(t, changed)); err != nil || !p.Empty() {
		t.Errorf("after applying: %v\n%s", err, p)
	}

	moved := strings.NewReplacer("switch_port: 5", "switch_port: 6", "switch_port: 6", "switch_port: 5", "address: 10.40.0.21", "address: 10.40.0.31").Replace(changed)
	p, err = nb.Plan(t.Context(), parseNodes(t, moved))
	noErr(t, err)
	want = []Change{
		{Action: ActionUpdate, Kind: "device", Name: "w-01", Fields: []FieldChange{
			{Name: "primary_ip4", Old: "10.40.0.21/24", New: "10.40.0.31/24"},
			{Name: "cable", Old: "usw Port 5", New: "usw Port 6"},
		}},
		{Action: ActionUpdate, Kind: "device", Name: "w-02", Fields: []FieldChange{{Name: "cable", Old: "usw Port 6", New: "usw Port 5"}}},
	}
	if diff := cmp.Diff(want, p.Changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	noErr(t, nb.Apply(t.Context(), p))
	devs, err := nb.Devices(t.Context())
	noErr(t, err)
	got := byName(devs)
	if got["w-01"].SwitchPort != 6 || got["w-02"].SwitchPort != 5 || got["w-01"].Address.String() != "10.40.0.31/24" {
		t.Errorf("after the move: w-01 port %d at %s, w-02 port %d", got["w-01"].SwitchPort, got["w-01"].Address, got["w-02"].SwitchPort)
	}
	if p, err := nb.Plan(t.Context(), parseNodes(t, moved)); err != nil || !p.Empty() {
		t.Errorf("after the move: %v\n%s", err, p)
	}
	if n := listed(t, srv, "/api/ipam/ip-addresses/"); n != 3 {
		t.Errorf("%d IP addresses after moving one, want 3", n)
	}

	without := moved[:strings.Index(moved, "  w-02:")]
	p, err = nb.Plan(t.Context(), parseNodes(t, without))
	noErr(t, err)
	if !p.Empty() || !slices.Equal(p.Unlisted, []string{"w-02"}) {
		t.Errorf("plan without w-02: empty %v, unlisted %v", p.Empty(), p.Unlisted)
	}
	if !strings.Contains(p.String(), "names 1 of fleet's devices in NetBox, which fleet never deletes: w-02") {
		t.Errorf("the plan does not note w-02:\n%s", p)
	}
	applied(t, nb, parseNodes(t, without))
	if _, err := nb.DeviceBySerial(t.Context(), "G6NUC13-88121"); err != nil {
		t.Errorf("w-02 after applying a file without it: %v", err)
	}
}

func TestPlanConflicts(t *testing.T) {
	inv := parseNodes(t, fleetNodes)
	for _, c := range []struct {
		name  string
		cfg   NetBoxConfig
		setup func(t *testing.T, srv *netboxtest.Server)
		nodes string // "": fleetNodes
		want  []string
	}{
		{name: "no site", cfg: NetBoxConfig{Site: "nowhere", Switch: "usw"}, want: []string{"site nowhere is not in NetBox"}},
		{name: "no switch", cfg: NetBoxConfig{Site: "folly", Switch: "usw-2"}, want: []string{"switch usw-2 is not a device of site folly"}},
		{
			name: "no such port",
			setup: func(t *testing.T, srv *netboxtest.Server) {
				applied(t, client(t, srv, userTerraform, nil), inv)
			},
			nodes: strings.Replace(fleetNodes, "switch_port: 5", "switch_port: 60", 1),
			want:  []string{`node w-01: switch usw has no interface "Port 60" for switch_port 60`},
		},
		{
			name: "port cabled elsewhere",
			setup: func(t *testing.T, srv *netboxtest.Server) {
				sw2, err := srv.AddSwitch(netboxtest.Switch{Site: "folly", Name: "usw-2", Ports: 2})
				noErr(t, err)
				_, err = srv.Create(userAlice, "/api/dcim/cables/", map[string]any{
					"a_terminations": []any{map[string]any{"object_type": "dcim.interface", "object_id": srv.Interfaces(sw2)["Port 1"]}},
					"b_terminations": []any{map[string]any{"object_type": "dcim.interface", "object_id": srv.Interfaces(uswID)["Port 1"]}},
				})
				noErr(t, err)
			},
			want: []string{"node cp-01: switch usw Port 1 is cabled to usw-2 Port 1 in NetBox"},
		},
		{
			name: "serial on another device",
			setup: func(t *testing.T, srv *netboxtest.Server) {
				nb := client(t, srv, userTerraform, nil)
				applied(t, nb, inv)
				d, err := nb.DeviceBySerial(t.Context(), "MS01-0002")
				noErr(t, err)
				noErr(t, srv.Update(userAlice, "/api/dcim/devices/", map[string]any{"id": d.ID, "name": "old-w-01"}))
			},
			want: []string{
				"node w-01: serial MS01-0002 is the serial of NetBox device old-w-01",
				"node w-01: address 10.40.0.21 is assigned to interface eth0 of device old-w-01 in NetBox",
				"node w-01: switch usw Port 5 is cabled to old-w-01 eth0 in NetBox",
			},
		},
		{
			name: "address on another interface",
			setup: func(t *testing.T, srv *netboxtest.Server) {
				_, err := srv.Create(userAlice, "/api/ipam/ip-addresses/", map[string]any{"address": "10.40.0.22/24", "assigned_object_type": "dcim.interface", "assigned_object_id": srv.Interfaces(uswID)["Port 40"]})
				noErr(t, err)
			},
			want: []string{"node w-02: address 10.40.0.22 is assigned to interface Port 40 of device usw in NetBox"},
		},
		{
			name: "custom field of another type",
			setup: func(t *testing.T, srv *netboxtest.Server) {
				_, err := srv.Create(userAlice, "/api/extras/custom-fields/",
					map[string]any{"name": "attested_switch_port", "type": "text", "object_types": []string{"dcim.device"}},
					map[string]any{"name": "class", "type": "text", "object_types": []string{"dcim.site"}})
				noErr(t, err)
			},
			want: []string{
				"custom field class exists in NetBox for dcim.site, not dcim.device",
				"custom field attested_switch_port is of type text in NetBox; fleet needs type integer",
			},
		},
		{
			name: "device types",
			setup: func(t *testing.T, srv *netboxtest.Server) {
				m, err := srv.Create(userAlice, "/api/dcim/manufacturers/", map[string]any{"name": "Minisforum", "slug": "minisforum"}, map[string]any{"name": "ASUS", "slug": "asus"})
				noErr(t, err)
				_, err = srv.Create(userAlice, "/api/dcim/device-types/",
					map[string]any{"manufacturer": m[0], "model": "MS-02", "slug": "ms-01"},
					map[string]any{"manufacturer": m[1], "model": "NUC 13 Pro", "slug": "asus-nuc-13-pro"})
				noErr(t, err)
			},
			want: []string{
				"device type ms-01 in NetBox is Minisforum MS-02; the nodes file's model ms-01 is Minisforum MS-01",
				"NetBox has ASUS NUC 13 Pro as device type asus-nuc-13-pro: rename model nuc-13 to asus-nuc-13-pro in the nodes file",
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := fleetNetBox(t, true)
			if c.setup != nil {
				c.setup(t, srv)
			}
			cfg := c.cfg
			if cfg.Site == "" {
				cfg = NetBoxConfig{Site: "folly", Switch: "usw"}
			}
			nodes := inv
			if c.nodes != "" {
				nodes = parseNodes(t, c.nodes)
			}
			srv.ResetRequests()
			_, err := client(t, srv, userTerraform, &cfg).Plan(t.Context(), nodes)
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("Plan: %v, want ErrConflict", err)
			}
			var ce *ConflictError
			if !errors.As(err, &ce) || len(ce.Conflicts) != len(c.want) {
				t.Fatalf("Plan: %v, want %d conflicts", err, len(c.want))
			}
			for i, w := range c.want {
				if !strings.HasPrefix(ce.Conflicts[i], w) {
					t.Errorf("conflict %d: %q, want it to begin %q", i, ce.Conflicts[i], w)
				}
			}
			for _, r := range srv.Requests() {
				if r.Method != "GET" {
					t.Errorf("Plan wrote: %s %s", r.Method, r.URI)
				}
			}
		})
	}
}

func TestPlanRefusesConfig(t *testing.T) {
	srv := fleetNetBox(t, false)
	inv := parseNodes(t, fleetNodes)
	for _, cfg := range []NetBoxConfig{{Switch: "usw"}, {Site: "folly"}} {
		if _, err := client(t, srv, userTerraform, &cfg).Plan(t.Context(), inv); err == nil {
			t.Errorf("Plan with %+v succeeded", cfg)
		}
	}
	if _, err := client(t, srv, userTerraform, nil).Plan(t.Context(), nil); err == nil {
		t.Error("Plan(nil) succeeded")
	}
	if err := client(t, srv, userTerraform, nil).Apply(t.Context(), &Plan{}); err == nil {
		t.Error("Apply of a plan Plan did not make succeeded")
	}
}
