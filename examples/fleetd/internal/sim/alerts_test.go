package sim

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/examples/fleetd/internal/alerttest"
)

// alertRules are fleetd's alert rules, and dashboard its Grafana
// dashboard, from this package's directory.
const (
	alertRules = "../../alerts/fleet.rules.yaml"
	dashboard  = "../../../deploy/monitoring/fleetd-dashboard.json"
)

// The alerts fire from what fleetd itself exports, each for its node, and
// none fires on a fleetd that just started but for its certificate's: the
// test's certificate is valid for a day, so
// FleetServingCertificateExpiresSoon fires throughout. A node that asks
// for a config fleetd does not hold (FleetInstallConfigMissing), one that
// asks again for the config it was served (FleetInstallConfigRefetched),
// one that boots HookOS again after its run succeeded
// (FleetNodeBootedHookOSAfterInstall), and a TPM that claims a node's
// serial with another EK than the one its entry approves
// (FleetEKHashMismatch). Then every query of the rules and of the
// dashboard is valid PromQL that selects only metrics this fleetd
// exported, having run a Workflow to its end.
func TestAlertsFromFleetd(t *testing.T) {
	f := newTestFleet(t, nil,
		testNode{name: "w-01", class: "worker", approve: true},
		testNode{name: "w-02", class: "worker", approve: true},
		testNode{name: "w-03", class: "worker", approve: true},
		testNode{name: "w-04", class: "worker", approve: true})
	// fleetd runs alone: it leads the provision loop from its start.
	f.wait("fleetd leads the provision loop", func() bool { return strings.Contains(f.metrics(), "\nfleet_provision_leader 1\n") })
	start := f.metrics()
	certSoon := alerttest.Firing{Alert: "FleetServingCertificateExpiresSoon"}
	alerttest.Want(t, alertRules, "", start, time.Now(), certSoon)

	// w-01 boots its install before any run gave it a config.
	if status, _, err := fetch(f.ctx, f.machines["w-01"].client, f.url+configserve.PathPrefix+configserve.NewCode()); err != nil || status != http.StatusNotFound {
		t.Fatalf("w-01's fetch of an unknown code = %d, %v; want 404", status, err)
	}
	f.waitJournal("w-01", "the node asked for its Talos config, and fleetd holds none for it")

	// w-02's node was served its config, and asks again.
	f.powerOn("w-02")
	f.attested("w-02")
	f.refetch("w-02", f.configURL("w-02"))

	// w-03's run succeeds, and its firmware netboots HookOS again.
	f.powerOn("w-03")
	f.startTinkerbell()
	f.provisioned("w-03", nodeAddr(2))
	f.machines["w-03"].powerCycle()
	f.waitJournal("w-03", "the node booted HookOS and attested after Workflow")

	// Another TPM claims w-04's serial, as after a board swap.
	swapped, err := attesttest.NewSoftTPM(nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := attest.Run(f.ctx, f.url+"/attest", swapped, attest.Machine{Serial: "SN-w-04", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x44}},
		&attest.ClientConfig{HTTPClient: f.client, Console: &strings.Builder{}})
	if res.Verdict != attest.EKHashMismatch {
		t.Fatalf("the swapped TPM's claim of SN-w-04: %v, %v; want %s", res.Verdict, err, attest.EKHashMismatch)
	}

	// Each gauge is stamped as its journal line is written, a run's end
	// counted as it is journaled (w-02's run ends too): wait for all.
	for _, series := range []string{
		`fleet_install_config_missing_last_timestamp_seconds{node="w-01"}`,
		`fleet_install_config_refetched_last_timestamp_seconds{node="w-02"}`,
		`fleet_node_booted_hookos_after_install_timestamp_seconds{node="w-03"}`,
		`fleet_workflows_ended_total{kind="provision",outcome="success"}`,
		`fleet_workflow_duration_seconds_count{kind="provision",outcome="success"}`,
		`fleet_attest_verdicts_total{verdict="ek-hash-mismatch"}`,
	} {
		f.wait(series, func() bool { return metricValue(f.metrics(), series) > 0 })
	}
	end := f.metrics()
	alerttest.Want(t, alertRules, start, end, time.Now(),
		alerttest.Firing{Alert: "FleetInstallConfigMissing", Node: "w-01"},
		alerttest.Firing{Alert: "FleetInstallConfigRefetched", Node: "w-02"},
		alerttest.Firing{Alert: "FleetNodeBootedHookOSAfterInstall", Node: "w-03"},
		alerttest.Firing{Alert: "FleetEKHashMismatch"},
		certSoon)

	queries := append(alerttest.RuleQueries(t, alertRules), alerttest.DashboardQueries(t, dashboard)...)
	alerttest.WantValid(t, queries)
	alerttest.WantExported(t, end, queries)
}
