package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/internal/testenv"
)

// The alerts of the runbook, as Prometheus evaluates them.
var runbookAlerts = []string{
	"FleetInstallConfigMissing",
	"FleetInstallConfigRefetched",
	"FleetNodeBootedHookOSAfterInstall",
	"EnrollmentNameNotServed",
}

// firing is an alert the rules should fire: its name and its node label
// ("" for an alert without one).
type firing struct{ alert, node string }

// wantAlerts evaluates alerts/fleet.rules.yaml with promtool over what
// fleetd's /metrics answered (scrape), taken at the moment at, and fails
// unless exactly want fire 10 minutes later (past every rule's "for").
// Timestamps in the scrape are moved to promtool's clock, which starts at
// at, so that "time() - x" means what it means in production.
func wantAlerts(t *testing.T, scrape string, at time.Time, want ...firing) {
	t.Helper()
	promtool := testenv.Command(t, "promtool", "prometheus")
	dir := t.TempDir()

	// The rules without their annotations: promtool compares annotations
	// when it compares alerts, and this test is about the expressions.
	raw, err := os.ReadFile("alerts/fleet.rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string           `yaml:"name"`
			Rules []map[string]any `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			delete(r, "annotations")
			if a, ok := r["alert"].(string); ok {
				named = append(named, a)
			}
		}
	}
	if !slices.Equal(named, runbookAlerts) {
		t.Fatalf("the rules name the alerts %v, want %v", named, runbookAlerts)
	}
	out, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}

	var b strings.Builder
	b.WriteString("rule_files: [rules.yaml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n")
	b.WriteString("      - series: 'up{job=\"fleetd\"}'\n        values: '1+0x20'\n")
	for _, l := range strings.Split(scrape, "\n") {
		if !strings.HasPrefix(l, "fleet") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		series, value := l[:i], l[i+1:]
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("scrape line %q: %v", l, err)
		}
		name, labels, _ := strings.Cut(series, "{")
		if strings.HasSuffix(name, "_timestamp_seconds") {
			v -= float64(at.Unix())
		}
		labels = strings.TrimSuffix(labels, "}")
		if labels != "" {
			labels += ","
		}
		fmt.Fprintf(&b, "      - series: '%s{%sjob=\"fleetd\"}'\n        values: '%s+0x20'\n", name, labels, strconv.FormatFloat(v, 'f', -1, 64))
	}
	b.WriteString("    alert_rule_test:\n")
	for _, a := range runbookAlerts {
		fmt.Fprintf(&b, "      - eval_time: 10m\n        alertname: %s\n        exp_alerts:", a)
		n := 0
		for _, w := range want {
			if w.alert != a {
				continue
			}
			severity := "warning"
			if a == "EnrollmentNameNotServed" {
				severity = "critical"
			}
			fmt.Fprintf(&b, "\n          - exp_labels: {job: fleetd, severity: %s", severity)
			if w.node != "" {
				fmt.Fprintf(&b, ", node: %s", w.node)
			}
			b.WriteString("}")
			n++
		}
		if n == 0 {
			b.WriteString(" []")
		}
		b.WriteString("\n")
	}
	test := filepath.Join(dir, "test.yaml")
	if err := os.WriteFile(test, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the alerts over fleetd's metrics are not %v: %v\n%s\ninput:\n%s", want, err, out, b.String())
	}
}

// Before fleetd holds a certificate it exports no expiry, so
// EnrollmentNameNotServed does not fire on a zero; once it holds one, the
// alert fires only when that certificate lapses.
func TestAlertCertificateExpiry(t *testing.T) {
	now := time.Now()
	for name, tc := range map[string]struct {
		notAfter time.Time
		want     []firing
	}{
		"none loaded": {},
		"valid":       {notAfter: now.Add(90 * 24 * time.Hour)},
		"lapsed":      {notAfter: now.Add(-time.Hour), want: []firing{{alert: "EnrollmentNameNotServed"}}},
	} {
		t.Run(name, func(t *testing.T) {
			m := newMetrics(func() time.Time { return tc.notAfter }, func() int { return 0 })
			d := &daemon{metrics: m}
			rec := httptest.NewRecorder()
			d.metricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			wantAlerts(t, rec.Body.String(), now, tc.want...)
		})
	}
}

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
	wantAlerts(t, f.metrics(), time.Now())

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
	wantAlerts(t, f.metrics(), time.Now(),
		firing{"FleetInstallConfigMissing", "w-01"},
		firing{"FleetInstallConfigRefetched", "w-02"},
		firing{"FleetNodeBootedHookOSAfterInstall", "w-03"})
}
