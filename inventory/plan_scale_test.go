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
func scaleNetBox(tb testing.TB, n int) (srv *netboxtest.Server, nb *NetBox, inv *Inventory) {
	tb.Helper()
	srv = netboxtest.New(&netboxtest.Config{Users: []string{"admin", userTerraform}})
	tb.Cleanup(srv.Close)
	_, err := srv.AddSwitch(netboxtest.Switch{Site: "folly", Name: "usw", Ports: n})
	noErr(tb, err)
	inv, err = Parse("nodes.yaml", nodesFile(n), wideTopology)
	noErr(tb, err)
	nb = client(tb, srv, userTerraform, &NetBoxConfig{Site: "folly", Switch: "usw", BindingAuthor: userTerraform, BulkSize: 1000})
	return srv, nb, inv
}

// Planning 10,000 nodes against NetBox takes at most 60 requests, both
// when NetBox holds none of them and when it holds them all.
func TestPlanRequests10k(t *testing.T) {
	t.Parallel()
	srv, nb, inv := scaleNetBox(t, scaleNodes)
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

	noErr(t, nb.Apply(ctx, p))
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
	srv, nb, inv := scaleNetBox(b, scaleNodes)
	applied(b, nb, inv)
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
		srv, nb, inv := scaleNetBox(b, scaleNodes)
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
