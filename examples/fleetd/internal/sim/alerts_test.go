package sim

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/examples/fleetd/internal/alerttest"
)

// alertRules are fleetd's alert rules, from this package's directory.
const alertRules = "../../alerts/fleet.rules.yaml"

// The runbook's alerts fire from what fleetd itself exports, each for its
// node, and none fires on a fleetd that just started: a node that asks for
// a config fleetd does not hold (FleetInstallConfigMissing), one that asks
// again for the config it was served (FleetInstallConfigRefetched), and
// one that boots HookOS again after its run succeeded
// (FleetNodeBootedHookOSAfterInstall).
func TestAlertsFromFleetd(t *testing.T) {
	f := newTestFleet(t, nil,
		testNode{name: "w-01", class: "worker", approve: true},
		testNode{name: "w-02", class: "worker", approve: true},
		testNode{name: "w-03", class: "worker", approve: true})
	alerttest.Want(t, alertRules, f.metrics(), time.Now())

	// w-01 boots its install before any run gave it a config.
	if status, _, err := fetch(f.ctx, f.machines["w-01"].client, f.url+configserve.PathPrefix+configserve.NewCode()); err != nil || status != http.StatusNotFound {
		t.Fatalf("w-01's fetch of an unknown code = %d, %v; want 404", status, err)
	}
	f.waitJournal("w-01", "the node asked for its Talos config, and fleetd holds none for it")

	// w-02's node was served its config, and asks again.
	f.powerOn("w-02")
	f.attested("w-02")
	url := f.configURL("w-02")
	c := f.machines["w-02"].client
	if status, _, err := fetch(f.ctx, c, url); err != nil || status != http.StatusOK {
		t.Fatalf("w-02's first fetch = %d, %v", status, err)
	}
	f.wait("w-02's second fetch told the code is spent", func() bool {
		s, _, err := fetch(f.ctx, c, url)
		return err == nil && s == http.StatusGone
	})
	f.waitJournal("w-02", "the node asked again for the Talos config fleetd served it")

	// w-03's run succeeds, and its firmware netboots HookOS again.
	f.powerOn("w-03")
	f.startTinkerbell()
	f.wait("w-03 active", func() bool {
		d, err := f.device(f.ctx, "w-03")
		return err == nil && d.Status == "active"
	})
	f.waitJournal("w-03", "ended SUCCESS")
	f.machines["w-03"].powerCycle()
	f.waitJournal("w-03", "the node booted HookOS and attested after Workflow")

	// Each gauge is stamped as its journal line is written: wait for all.
	for _, series := range []string{
		`fleet_install_config_missing_last_timestamp_seconds{node="w-01"}`,
		`fleet_install_config_refetched_last_timestamp_seconds{node="w-02"}`,
		`fleet_node_booted_hookos_after_install_timestamp_seconds{node="w-03"}`,
	} {
		f.wait(series, func() bool { return strings.Contains(f.metrics(), series) })
	}
	alerttest.Want(t, alertRules, f.metrics(), time.Now(),
		alerttest.Firing{Alert: "FleetInstallConfigMissing", Node: "w-01"},
		alerttest.Firing{Alert: "FleetInstallConfigRefetched", Node: "w-02"},
		alerttest.Firing{Alert: "FleetNodeBootedHookOSAfterInstall", Node: "w-03"})
}
