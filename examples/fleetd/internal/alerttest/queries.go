package alerttest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/fleetkit/fleet/internal/testenv"
)

// A Query is one PromQL expression of the rules or the dashboard, and
// where it is (an alert's or a panel's name).
type Query struct{ Where, Expr string }

// RuleQueries returns the expression of every rule in the rules file.
func RuleQueries(t *testing.T, rulesFile string) []Query {
	t.Helper()
	rules, _, _ := readRules(t, rulesFile)
	var qs []Query
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alert, _ := r["alert"].(string)
			record, _ := r["record"].(string)
			expr, _ := r["expr"].(string)
			qs = append(qs, Query{Where: "rule " + alert + record, Expr: expr})
		}
	}
	if len(qs) == 0 {
		t.Fatalf("%s holds no rule", rulesFile)
	}
	return qs
}

// dashboardPanel is what DashboardQueries reads of a Grafana panel: its
// queries, and the panels of a row.
type dashboardPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// DashboardQueries returns the query of every panel of a Grafana
// dashboard, rows' panels included. It fails when a panel that shows data
// has no query, or a query is empty.
func DashboardQueries(t *testing.T, dashboardFile string) []Query {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var qs []Query
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s: panel %q has an empty query", dashboardFile, p.Title)
				}
				qs = append(qs, Query{Where: fmt.Sprintf("panel %q", p.Title), Expr: tg.Expr})
			}
		}
	}
	walk(d.Panels)
	if len(qs) == 0 {
		t.Fatalf("%s holds no query", dashboardFile)
	}
	return qs
}

// grafanaRanges are the range variables Grafana fills in, and what a
// check puts in their place.
var grafanaRanges = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// WantValid fails unless promtool finds every query valid PromQL, as it
// checks a rule's expression; Grafana's range variables stand for
// durations.
func WantValid(t *testing.T, queries []Query) {
	t.Helper()
	promtool := testenv.Command(t, "promtool", "prometheus")
	if out, err := checkQueries(promtool, t.TempDir(), queries); err != nil {
		var list strings.Builder
		for i, q := range queries {
			fmt.Fprintf(&list, "query_%d: %s: %s\n", i, q.Where, q.Expr)
		}
		t.Errorf("promtool check rules: %v\n%s\n%s", err, out, list.String())
	}
}

// checkQueries runs promtool check rules over the queries, each the
// expression of a recording rule query_<index>, written in dir.
func checkQueries(promtool, dir string, queries []Query) ([]byte, error) {
	var rules []map[string]string
	for i, q := range queries {
		rules = append(rules, map[string]string{"record": fmt.Sprintf("query_%d", i), "expr": grafanaRanges.Replace(q.Expr)})
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "queries", "rules": rules}}})
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "queries.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		return nil, err
	}
	return exec.Command(promtool, "check", "rules", file).CombinedOutput()
}

// WantExported fails unless every metric each query selects is a series
// name in scrape (what fleetd's /metrics answered: a histogram's _bucket,
// _sum and _count among them), or up, which Prometheus writes for each
// target.
func WantExported(t *testing.T, scrape string, queries []Query) {
	t.Helper()
	for _, e := range notExported(scrape, queries) {
		t.Error(e)
	}
}

// notExported says, one line each, what WantExported fails for.
func notExported(scrape string, queries []Query) []string {
	exported := map[string]bool{"up": true}
	for _, l := range strings.Split(scrape, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(l, " ")
		name, _, _ = strings.Cut(name, "{")
		exported[name] = true
	}
	var errs []string
	for _, q := range queries {
		names := MetricNames(q.Expr)
		if len(names) == 0 {
			errs = append(errs, fmt.Sprintf("%s selects no metric: %s", q.Where, q.Expr))
		}
		for _, n := range names {
			if !exported[n] {
				errs = append(errs, fmt.Sprintf("%s selects %s, which fleetd does not export: %s", q.Where, n, q.Expr))
			}
		}
	}
	return errs
}

// promqlWords are PromQL's words that are not metric names when they
// stand alone: aggregation operators (which may come before their
// "by (...)"), binary operators, modifiers and literals.
var promqlWords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"offset": true, "start": true, "end": true, "Inf": true, "inf": true, "NaN": true, "nan": true,
}

// notMetrics are the parts of a PromQL expression that name no metric,
// removed in this order: strings; comments, to the end of their line;
// label matchers ({...}), ranges and subqueries ([...]); and the label
// lists of by, without, on, ignoring, group_left and group_right.
var notMetrics = []*regexp.Regexp{
	regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`"),
	regexp.MustCompile(`#[^\n]*`),
	regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`),
	regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`),
}

// word is an identifier of what notMetrics leave of an expression (group
// 2): part of a number, a duration or a Grafana variable when a digit,
// "." or "$" comes before it (group 1); a function when "(" comes after
// it (group 3).
var word = regexp.MustCompile(`([0-9.$]?)([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?`)

// MetricNames returns the metric names a PromQL expression selects, in
// the order of their first use: its identifiers that are not a function
// (a name before "("), a PromQL word, a label (in braces, or in the list
// after by, without, on, ignoring, group_left or group_right), in a
// string, a range or subquery ("[...]"), a number, a duration, or a
// Grafana variable ("$...").
func MetricNames(expr string) []string {
	for _, re := range notMetrics {
		expr = re.ReplaceAllString(expr, " ")
	}
	var names []string
	for _, m := range word.FindAllStringSubmatch(expr, -1) {
		if m[1] == "" && m[3] == "" && !promqlWords[m[2]] && !slices.Contains(names, m[2]) {
			names = append(names, m[2])
		}
	}
	return names
}
