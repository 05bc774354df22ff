// Package alerttest evaluates fleetd's alert rules with promtool over
// what fleetd's /metrics answered.
package alerttest

import (
	"cmp"
	"fmt"
	"maps"
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

// The alerts of the runbook, as Prometheus evaluates them: the rules must
// hold them, whatever else they hold.
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
// alerts/fleet.rules.yaml) with promtool over what fleetd's /metrics
// answered: before, taken 10 minutes before at ("": nothing before), then
// scrape, taken at at. It fails unless exactly want fire 10 minutes after
// at (past every rule's "for"), of every alert the rules name, each with
// the severity its rule gives it. A counter that grew from before to
// scrape grew in those 10 minutes. Timestamps in the scrapes are moved to
// promtool's clock, so that "time() - x" means what it means in
// production. Every scrape comes from one fleetd that answers (up 1).
func Want(t *testing.T, rulesFile, before, scrape string, at time.Time, want ...Firing) {
	t.Helper()
	promtool := testenv.Command(t, "promtool", "prometheus")
	dir := t.TempDir()

	rules, named, severity := readRules(t, rulesFile)
	for _, a := range runbookAlerts {
		if !slices.Contains(named, a) {
			t.Fatalf("the rules name the alerts %v, without the runbook's %s", named, a)
		}
	}
	for _, w := range want {
		if !slices.Contains(named, w.Alert) {
			t.Fatalf("want %s, which the rules do not name (%v)", w.Alert, named)
		}
	}
	write := func(name string, v any) []byte {
		out, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), out, 0o644); err != nil {
			t.Fatal(err)
		}
		return out
	}
	write("rules.yaml", rules)

	// promtool's clock starts 10 minutes before at.
	origin := at.Add(-10 * time.Minute)
	after := samples(t, scrape, origin)
	var earlier map[string]string
	if before != "" {
		earlier = samples(t, before, origin)
	}
	series := slices.Collect(maps.Keys(after))
	for s := range earlier {
		if _, ok := after[s]; !ok {
			series = append(series, s)
		}
	}
	slices.Sort(series)

	inputs := []map[string]string{{"series": `up{job="fleetd"}`, "values": "1+0x30"}}
	for _, s := range series {
		// Before: minutes 0 to 9; then the scrape: minutes 10 to 30. A
		// series a scrape lacks is promtool's missing sample there.
		values := cmp.Or(after[s], "_") + "x30"
		if before != "" {
			values = cmp.Or(earlier[s], "_") + "x9 " + cmp.Or(after[s], "_") + "x20"
		}
		inputs = append(inputs, map[string]string{"series": s, "values": values})
	}
	var tests []map[string]any
	for _, a := range named {
		exp := []map[string]any{}
		for _, w := range want {
			if w.Alert == a {
				labels := map[string]string{"job": "fleetd", "severity": severity[a]}
				if w.Node != "" {
					labels["node"] = w.Node
				}
				exp = append(exp, map[string]any{"exp_labels": labels})
			}
		}
		tests = append(tests, map[string]any{"eval_time": "20m", "alertname": a, "exp_alerts": exp})
	}
	test := write("test.yaml", map[string]any{"rule_files": []string{"rules.yaml"}, "evaluation_interval": "1m",
		"tests": []any{map[string]any{"interval": "1m", "input_series": inputs, "alert_rule_test": tests}}})
	cmd := exec.Command(promtool, "test", "rules", "test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the alerts over fleetd's metrics are not %v: %v\n%s\ninput:\n%s", want, err, out, test)
	}
}

// ruleFile is a Prometheus rules file, each rule a map so that it is
// written back whole.
type ruleFile struct {
	Groups []struct {
		Name  string           `yaml:"name"`
		Rules []map[string]any `yaml:"rules"`
	} `yaml:"groups"`
}

// readRules reads the rules in rulesFile without their annotations:
// promtool compares annotations when it compares alerts, and this test is
// about the expressions. named are the alerts the rules name, in order,
// and severity each one's severity label.
func readRules(t *testing.T, rulesFile string) (rules ruleFile, named []string, severity map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	severity = map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			delete(r, "annotations")
			a, ok := r["alert"].(string)
			if !ok {
				continue
			}
			named = append(named, a)
			if l, ok := r["labels"].(map[string]any); ok {
				severity[a], _ = l["severity"].(string)
			}
		}
	}
	return rules, named, severity
}

// samples reads fleetd's series of a scrape (those named fleet...), each
// with job="fleetd" added, and its value as promtool takes it: a
// timestamp in seconds since origin.
func samples(t *testing.T, scrape string, origin time.Time) map[string]string {
	t.Helper()
	m := map[string]string{}
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
			v -= float64(origin.Unix())
		}
		labels = strings.TrimSuffix(labels, "}")
		if labels != "" {
			labels += ","
		}
		m[fmt.Sprintf("%s{%sjob=\"fleetd\"}", name, labels)] = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return m
}
