// Package alerttest evaluates fleetd's alert rules with promtool over
// what fleetd's /metrics answered.
package alerttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fleetkit/fleet/internal/testenv"
)

// The alerts of the runbook, as Prometheus evaluates them.
var runbookAlerts = []string{
	"FleetInstallConfigMissing",
	"FleetInstallConfigRefetched",
	"FleetNodeBootedHookOSAfterInstall",
	"EnrollmentNameNotServed",
}

// A Firing is an alert the rules should fire: its name and its node label
// ("" for an alert without one).
type Firing struct{ Alert, Node string }

// Want evaluates the alert rules in the file rulesFile (fleetd's
// alerts/fleet.rules.yaml) with promtool over what
// fleetd's /metrics answered (scrape), taken at the moment at, and fails
// unless exactly want fire 10 minutes later (past every rule's "for").
// Timestamps in the scrape are moved to promtool's clock, which starts at
// at, so that "time() - x" means what it means in production.
func Want(t *testing.T, rulesFile, scrape string, at time.Time, want ...Firing) {
	t.Helper()
	promtool := testenv.Command(t, "promtool", "prometheus")
	dir := t.TempDir()

	// The rules without their annotations: promtool compares annotations
	// when it compares alerts, and this test is about the expressions.
	raw, err := os.ReadFile(rulesFile)
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
			if w.Alert != a {
				continue
			}
			severity := "warning"
			if a == "EnrollmentNameNotServed" {
				severity = "critical"
			}
			fmt.Fprintf(&b, "\n          - exp_labels: {job: fleetd, severity: %s", severity)
			if w.Node != "" {
				fmt.Fprintf(&b, ", node: %s", w.Node)
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
