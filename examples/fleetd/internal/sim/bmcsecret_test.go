package sim

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetkit/fleet/provision"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// FLEET_BMC_SECRET names the Secret each Rufio Machine fleetd writes
// refers to, in Tinkerbell's namespace.
func TestBMCSecretReachesMachine(t *testing.T) {
	f := newFleet(t, worldConfig{Validate: t, Edit: func(s *daemon.Settings) { s.BMCSecret = "bmc-lab" }}, testNode{name: "w-01", class: "worker", approve: true})
	f.startTinkerbell()
	f.powerOn("w-01")
	f.waitJournal("w-01", "started Workflow provision-w-01-")
	l := f.list(provision.MachineResource)
	if len(l) != 1 {
		t.Fatalf("%d Machines, want the node's", len(l))
	}
	ref, _, _ := unstructured.NestedStringMap(l[0].Object, "spec", "connection", "authSecretRef")
	if ref["name"] != "bmc-lab" || ref["namespace"] != f.settings.Namespace {
		t.Errorf("Machine %s names the Secret %v, want bmc-lab in %s", l[0].GetName(), ref, f.settings.Namespace)
	}
}
