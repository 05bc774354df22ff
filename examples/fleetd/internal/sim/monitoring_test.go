package sim

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// TestMonitoringDeploy renders examples/deploy/monitoring with kustomize
// and holds it to what it must match: the PrometheusRule's groups are
// fleet.rules.yaml's (the rules promtool tests), the ServiceMonitor
// selects the Service fleetd-metrics of the base by its labels, scrapes
// its metrics port and names the job "fleetd" that the rules select, and
// the dashboard's ConfigMap holds fleetd-dashboard.json as it is (whose
// queries TestAlertsFromFleetd checks against a real fleetd's /metrics).
func TestMonitoringDeploy(t *testing.T) {
	dir := filepath.Join(deployDir, "monitoring")
	objs := kustomize(t, dir)
	byKind := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		if _, dup := byKind[u.GetKind()]; dup {
			t.Fatalf("two objects of kind %s", u.GetKind())
		}
		byKind[u.GetKind()] = u
	}
	for _, k := range []string{"PrometheusRule", "ServiceMonitor", "ConfigMap"} {
		if byKind[k] == nil {
			t.Fatalf("examples/deploy/monitoring renders no %s; it renders %d objects", k, len(objs))
		}
	}

	// The rules, as the operator takes them, are the rules promtool tests.
	src, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(src, &file); err != nil {
		t.Fatal(err)
	}
	groups, _, err := unstructured.NestedSlice(byKind["PrometheusRule"].Object, "spec", "groups")
	if err != nil || len(groups) == 0 {
		t.Fatalf("the PrometheusRule's spec.groups: %v (%v)", groups, err)
	}
	if d := cmp.Diff(normalize(t, file.Groups), normalize(t, groups)); d != "" {
		t.Errorf("prometheusrule.yaml's groups differ from %s (copy them over):\n%s", alertRules, d)
	}
	if !strings.Contains(string(src), `job="fleetd"`) {
		t.Fatalf("%s selects no job=\"fleetd\"", alertRules)
	}

	// The ServiceMonitor finds the metrics Service of the base.
	base := kustomize(t, deployDir)
	i := slices.IndexFunc(base, func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "Service" && u.GetName() == "fleetd-metrics"
	})
	if i < 0 {
		t.Fatal("examples/deploy renders no Service fleetd-metrics")
	}
	metricsSvc := base[i]
	sm := byKind["ServiceMonitor"]
	if sm.GetNamespace() != metricsSvc.GetNamespace() {
		t.Errorf("the ServiceMonitor is in namespace %q, the Service in %q", sm.GetNamespace(), metricsSvc.GetNamespace())
	}
	match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(match) == 0 {
		t.Error("the ServiceMonitor selects by no label")
	}
	for k, v := range match {
		if metricsSvc.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s; fleetd-metrics has labels %v", k, v, metricsSvc.GetLabels())
		}
	}
	for _, u := range base {
		if u.GetKind() == "Service" && u.GetName() != "fleetd-metrics" && labels.SelectorFromSet(match).Matches(labels.Set(u.GetLabels())) {
			t.Errorf("the ServiceMonitor also selects the Service %s", u.GetName())
		}
	}
	ports, _, _ := unstructured.NestedSlice(metricsSvc.Object, "spec", "ports")
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("the ServiceMonitor has %d endpoints, want 1", len(eps))
	}
	ep := eps[0].(map[string]any)
	found := slices.ContainsFunc(ports, func(p any) bool { return p.(map[string]any)["name"] == ep["port"] })
	if !found || ep["path"] != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes port %v at %v; fleetd-metrics has ports %v, fleetd serves /metrics", ep["port"], ep["path"], ports)
	}
	rl, _, _ := unstructured.NestedSlice(ep, "relabelings")
	if !slices.ContainsFunc(rl, func(r any) bool {
		m := r.(map[string]any)
		return m["targetLabel"] == "job" && m["replacement"] == "fleetd" && m["sourceLabels"] == nil
	}) {
		t.Errorf("the ServiceMonitor's relabelings %v do not name the job fleetd, which the rules select", rl)
	}

	// The dashboard, as Grafana's sidecar finds it.
	cm := byKind["ConfigMap"]
	dash, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if data[filepath.Base(dashboard)] != string(dash) {
		t.Errorf("the ConfigMap %s does not hold %s as it is (keys %v)", cm.GetName(), dashboard, slices.Sorted(maps.Keys(data)))
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the ConfigMap %s has labels %v, want grafana_dashboard=1 for Grafana's sidecar", cm.GetName(), cm.GetLabels())
	}
}

// normalize makes YAML values comparable whichever decoder read them:
// numbers as float64, maps as map[string]any.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
