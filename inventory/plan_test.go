package inventory

import (
	"strings"
	"testing"
)

func TestPlanApplyRoundTrip(t *testing.T) {
	srv := fleetNetBox(t, true)
	nb := client(t, srv, userTerraform, nil)
	inv := parseNodes(t, fleetNodes)
	p := applied(t, nb, inv)
	t.Logf("plan:\n%s", p)
	again, err := nb.Plan(t.Context(), inv)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Empty() {
		t.Fatalf("the plan after apply is not empty:\n%s", again)
	}
	devs, err := nb.Devices(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		t.Logf("%+v", d)
	}
	if !strings.Contains(again.String(), "No changes.") {
		t.Errorf("empty plan reads %q", again)
	}
}
