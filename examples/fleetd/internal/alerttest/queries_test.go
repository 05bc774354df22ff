package alerttest

import (
	"slices"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/internal/testenv"
)

// MetricNames finds the metrics a query selects, and no function, keyword,
// label, string, range, number or Grafana variable.
func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up{job="fleetd"} == 0 or absent(up{job="fleetd"})`, []string{"up"}},
		{`max by (job) (up{job="fleetd"}) == 0`, []string{"up"}},
		{`sum(rate(fleet_admissions_total{outcome=~"provision|retire"}[$__rate_interval])) by (outcome)`, []string{"fleet_admissions_total"}},
		{`histogram_quantile(0.9, sum by (le, kind) (rate(fleet_workflow_duration_seconds_bucket[1h])))`, []string{"fleet_workflow_duration_seconds_bucket"}},
		{`a_total / on (instance) group_left(node) b{x="}{by (c)"} offset 5m`, []string{"a_total", "b"}},
		{`fleetd_tls_certificate_expiry_timestamp_seconds - time() < 14 * 86400 and x > time()`, []string{"fleetd_tls_certificate_expiry_timestamp_seconds", "x"}},
		{"sum without (instance) (increase(c[1d:5m])) # a comment naming d\n+ e", []string{"c", "e"}},
		{`count(x) > 1e3 unless y == bool Inf`, []string{"x", "y"}},
		{`topk(5, sum by (verdict) (z))`, []string{"z"}},
	} {
		if got := MetricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// WantExported fails for a query that selects a metric the scrape lacks,
// and accepts a histogram's series and up.
func TestWantExported(t *testing.T) {
	scrape := strings.Join([]string{
		"# HELP fleet_workflow_duration_seconds From a run's start to its end.",
		"# TYPE fleet_workflow_duration_seconds histogram",
		`fleet_workflow_duration_seconds_bucket{kind="provision",le="60"} 0`,
		`fleet_workflow_duration_seconds_sum{kind="provision"} 0`,
		`fleet_workflow_duration_seconds_count{kind="provision"} 0`,
		`fleet_provision_leader 1`,
	}, "\n")
	good := []Query{
		{"a", `histogram_quantile(0.5, sum by (le) (rate(fleet_workflow_duration_seconds_bucket[5m])))`},
		{"b", `fleet_workflow_duration_seconds_sum / fleet_workflow_duration_seconds_count`},
		{"c", `max(fleet_provision_leader) < 1 or absent(up{job="fleetd"})`},
	}
	if errs := notExported(scrape, good); len(errs) != 0 {
		t.Errorf("queries of exported metrics refused: %q", errs)
	}
	for _, q := range []Query{
		{"misspelt", `rate(fleet_workflows_ended_total[5m])`},
		{"no metric", `time()`},
		{"a histogram's name alone", `fleet_workflow_duration_seconds`},
	} {
		if errs := notExported(scrape, []Query{q}); len(errs) != 1 || !strings.HasPrefix(errs[0], q.Where+" selects ") {
			t.Errorf("%s (%s): %q, want one error", q.Where, q.Expr, errs)
		}
	}
}

// promtool takes valid queries, Grafana's range variables included, and
// refuses one that is not PromQL.
func TestCheckQueries(t *testing.T) {
	promtool := testenv.Command(t, "promtool", "prometheus")
	good := []Query{{"a", `sum by (kind) (increase(x_total[$__rate_interval]))`}, {"b", `max(y) < 1`}}
	if out, err := checkQueries(promtool, t.TempDir(), good); err != nil {
		t.Errorf("valid queries refused: %v\n%s", err, out)
	}
	bad := append(good, Query{"c", `sum by (kind) increase(x_total[5m])`})
	if out, err := checkQueries(promtool, t.TempDir(), bad); err == nil {
		t.Errorf("an invalid query taken:\n%s", out)
	}
}
