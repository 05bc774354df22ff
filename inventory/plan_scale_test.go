package inventory

import (
	"testing"

	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// The request budget of a plan of 10,000 nodes (DESIGN.md: Terraform's
// refresh spends one or more per resource, over 30,000).
const (
	scaleNodes       = 10000
	scaleMaxRequests = 60
)

// scaleNetBox is a netboxtest server without the schema check (at this
// size the check, not NetBox, would be measured) holding the folly site and
// a switch of n ports, and n generated nodes with a client to plan them.
func scaleNetBox(tb testing.TB, n int) (srv *netboxtest.Server, sw int64, nb *NetBox, inv *Inventory) {
	tb.Helper()
	srv = netboxtest.New(&netboxtest.Config{Users: []string{"admin", userTerraform}})
	tb.Cleanup(srv.Close)
	sw, err := srv.AddSwitch(netboxtest.Switch{Site: "folly", Name: "usw", Ports: n})
	noErr(tb, err)
	inv, err = Parse("nodes.yaml", nodesFile(n), wideTopology)
	noErr(tb, err)
	nb = client(tb, srv, userTerraform, &NetBoxConfig{Site: "folly", Switch: "usw", BindingAuthor: userTerraform, BulkSize: 1000})
	return srv, sw, nb, inv
}

// seedFleet writes into srv, as terraform and without HTTP, what applying
// inv makes: custom fields, role, manufacturers, device types, devices with
// their interfaces, addresses and cables. A plan right after it is empty
// only when it made what Apply makes.
func seedFleet(tb testing.TB, srv *netboxtest.Server, sw int64, nb *NetBox, inv *Inventory) {
	tb.Helper()
	must := func(ids []int64, err error) []int64 {
		tb.Helper()
		noErr(tb, err)
		return ids
	}
	const u = userTerraform
	var cfs []any
	for _, f := range deviceFields {
		cf := map[string]any{"name": f.name, "type": f.typ, "object_types": []string{typeDevice}, "label": f.label, "group_name": fieldGroup}
		if f.regex != "" {
			cf["validation_regex"] = f.regex
		}
		cfs = append(cfs, cf)
	}
	must(srv.Create(u, "/api/extras/custom-fields/", cfs...))
	role := must(srv.Create(u, "/api/dcim/device-roles/", map[string]any{"name": nb.cfg.Role, "slug": nb.cfg.Role}))[0]
	site, err := srv.AddSite("folly")
	noErr(tb, err)
	types := map[string]int64{}
	mfrs := map[string]int64{}
	for key, m := range inv.Models {
		if mfrs[m.Manufacturer] == 0 {
			mfrs[m.Manufacturer] = must(srv.Create(u, "/api/dcim/manufacturers/", map[string]any{"name": m.Manufacturer, "slug": slugify(m.Manufacturer)}))[0]
		}
		types[key] = must(srv.Create(u, "/api/dcim/device-types/", map[string]any{"manufacturer": mfrs[m.Manufacturer], "model": m.Name, "slug": key}))[0]
	}
	devs := make([]any, len(inv.Nodes))
	for i, n := range inv.Nodes {
		cf := map[string]any{}
		for _, kv := range declared(n) {
			if kv[1] != "" {
				cf[kv[0]] = kv[1]
			}
		}
		devs[i] = map[string]any{"name": n.Name, "device_type": types[n.Model], "role": role, "site": site, "status": "planned", "serial": n.Serial, "custom_fields": cf}
	}
	devIDs := must(srv.Create(u, "/api/dcim/devices/", devs...))
	ifaces := make([]any, len(devIDs))
	for i, id := range devIDs {
		ifaces[i] = map[string]any{"device": id, "name": nb.cfg.Interface, "type": nb.cfg.InterfaceType}
	}
	ifaceIDs := must(srv.Create(u, "/api/dcim/interfaces/", ifaces...))
	ips := make([]any, len(ifaceIDs))
	for i, id := range ifaceIDs {
		ips[i] = map[string]any{"address": inv.Prefix(inv.Nodes[i]).String(), "status": "active", "assigned_object_type": typeInterface, "assigned_object_id": id}
	}
	ipIDs := must(srv.Create(u, "/api/ipam/ip-addresses/", ips...))
	primaries := make([]any, len(devIDs))
	for i, id := range devIDs {
		primaries[i] = map[string]any{"id": id, "primary_ip4": ipIDs[i]}
	}
	noErr(tb, srv.Update(u, "/api/dcim/devices/", primaries...))
	ports := srv.Interfaces(sw)
	cables := make([]any, len(ifaceIDs))
	for i, id := range ifaceIDs {
		cables[i] = map[string]any{
			"a_terminations": []any{map[string]any{"object_type": typeInterface, "object_id": id}},
			"b_terminations": []any{map[string]any{"object_type": typeInterface, "object_id": ports[nb.PortName(inv.Nodes[i].SwitchPort)]}},
			"status":         "connected",
		}
	}
	must(srv.Create(u, "/api/dcim/cables/", cables...))
}

// Planning 10,000 nodes against NetBox takes at most 60 requests, both
// when NetBox holds none of them and when it holds them all.
func TestPlanRequests10k(t *testing.T) {
	t.Parallel()
	srv, sw, nb, inv := scaleNetBox(t, scaleNodes)
	ctx := t.Context()
	srv.ResetRequests()
	p, err := nb.Plan(ctx, inv)
	noErr(t, err)
	if add, change := p.Counts(); add != scaleNodes+len(deviceFields)+3 || change != 0 {
		t.Errorf("the plan of an empty NetBox adds %d and changes %d", add, change)
	}
	t.Logf("plan of %d nodes NetBox lacks: %d requests", scaleNodes, srv.RequestCount())
	if n := srv.RequestCount(); n > scaleMaxRequests {
		t.Errorf("planning %d nodes NetBox lacks took %d requests, want at most %d", scaleNodes, n, scaleMaxRequests)
	}

	seedFleet(t, srv, sw, nb, inv)
	srv.ResetRequests()
	p, err = nb.Plan(ctx, inv)
	noErr(t, err)
	if !p.Empty() {
		t.Fatalf("the plan of a NetBox holding every node is not empty:\n%.3000s", p)
	}
	t.Logf("plan of %d nodes NetBox holds: %d requests", scaleNodes, srv.RequestCount())
	if n := srv.RequestCount(); n > scaleMaxRequests {
		t.Errorf("planning %d nodes NetBox holds took %d requests, want at most %d", scaleNodes, n, scaleMaxRequests)
	}
}

// BenchmarkPlan10k plans 10,000 nodes against a netboxtest NetBox that
// holds them all: the steady state, whose plan is empty.
func BenchmarkPlan10k(b *testing.B) {
	srv, sw, nb, inv := scaleNetBox(b, scaleNodes)
	seedFleet(b, srv, sw, nb, inv)
	srv.ResetRequests()
	for b.Loop() {
		p, err := nb.Plan(b.Context(), inv)
		noErr(b, err)
		if !p.Empty() {
			b.Fatal("the plan is not empty")
		}
	}
	b.ReportMetric(float64(srv.RequestCount())/float64(b.N), "requests/op")
}

// BenchmarkApply10k plans and applies 10,000 new nodes, 1,000 objects a
// bulk request, then checks that a second plan is empty.
func BenchmarkApply10k(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		srv, _, nb, inv := scaleNetBox(b, scaleNodes)
		srv.ResetRequests()
		b.StartTimer()
		p, err := nb.Plan(b.Context(), inv)
		noErr(b, err)
		noErr(b, nb.Apply(b.Context(), p))
		b.StopTimer()
		b.ReportMetric(float64(srv.RequestCount()), "requests/op")
		if p, err := nb.Plan(b.Context(), inv); err != nil || !p.Empty() {
			b.Fatalf("the plan after apply: %v", err)
		}
		srv.Close()
		b.StartTimer()
	}
}
