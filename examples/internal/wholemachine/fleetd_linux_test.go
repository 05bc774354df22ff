package wholemachine

import (
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fleetkit/fleet/examples/internal/machinetest"
	"github.com/fleetkit/fleet/internal/kubetest"
)

// approverToken is FLEET_APPROVER_TOKEN: the operator's fleetctl approve
// reads the waiting claims with it.
const approverToken = "approver-token-of-the-whole-machine-test"

// fleet is fleetd running as a process (machinetest.Fleet), read by the
// test of its world.
type fleet struct {
	*machinetest.Fleet
	t       *testing.T
	metrics string // http://127.0.0.1:<port>/metrics
}

// startFleet starts fleetd as machinetest.Start does, with its metrics
// served, its approver token, and fleet's actions as this test built them,
// until t ends.
func startFleet(t *testing.T, env *kubetest.Env, cfg machinetest.Config) *fleet {
	t.Helper()
	metricsAddr := net.JoinHostPort("127.0.0.1", fmt.Sprint(machinetest.FreePort(t, "127.0.0.1")))
	settings := map[string]string{
		"FLEET_METRICS_LISTEN": metricsAddr,
		"FLEET_APPROVER_TOKEN": approverToken,
		// The Templates run fleet's actions as this test built them, in
		// the registry the machine resolves to the test's (actionRegistry).
		"FLEET_IMAGE_WIPE_DISK": actionImage("wipe-disk"),
		"FLEET_IMAGE_INSTALL":   actionImage("install"),
		"FLEET_IMAGE_NEXT_BOOT": actionImage("next-boot"),
	}
	maps.Copy(settings, cfg.Settings)
	cfg.Settings = settings
	return &fleet{Fleet: machinetest.Start(t, env, cfg), t: t, metrics: "http://" + metricsAddr + "/metrics"}
}

// scrape returns fleetd's metrics, as Prometheus scrapes them.
func (f *fleet) scrape() string {
	f.t.Helper()
	rsp, err := http.Get(f.metrics)
	if err != nil {
		f.t.Fatalf("scrape fleetd: %v", err)
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if err != nil || rsp.StatusCode != http.StatusOK {
		f.t.Fatalf("scrape fleetd: %s, %v", rsp.Status, err)
	}
	return string(b)
}

// waitJournal waits up to limit until the node's journal holds a line
// beginning with each of prefixes (Fleet.WaitJournal), and returns it.
func (f *fleet) waitJournal(limit time.Duration, prefixes ...string) []string {
	f.t.Helper()
	lines, err := f.WaitJournal(f.t, node, limit, prefixes...)
	if err != nil {
		f.t.Fatal(err)
	}
	return lines
}
