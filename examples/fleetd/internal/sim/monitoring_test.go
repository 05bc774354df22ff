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
	corev1 "k8s.io/api/core/v1"
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
	services := readBase(t, kustomize(t, deployDir)).services
	metricsSvc, ok := services["fleetd-metrics"]
	if !ok {
		t.Fatal("examples/deploy renders no Service fleetd-metrics")
	}
	sm := byKind["ServiceMonitor"]
	if sm.GetNamespace() != metricsSvc.Namespace {
		t.Errorf("the ServiceMonitor is in namespace %q, the Service in %q", sm.GetNamespace(), metricsSvc.Namespace)
	}
	match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(match) == 0 {
		t.Error("the ServiceMonitor selects by no label")
	}
	for name, s := range services {
		if selected := labels.SelectorFromSet(match).Matches(labels.Set(s.Labels)); selected != (name == "fleetd-metrics") {
			t.Errorf("the ServiceMonitor selects %v; it selects the Service %s (labels %v): %v, want it to select fleetd-metrics alone", match, name, s.Labels, selected)
		}
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("the ServiceMonitor has %d endpoints, want 1", len(eps))
	}
	ep := eps[0].(map[string]any)
	found := slices.ContainsFunc(metricsSvc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep["port"] })
	if !found || ep["path"] != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes port %v at %v; fleetd-metrics has ports %v, fleetd serves /metrics", ep["port"], ep["path"], metricsSvc.Spec.Ports)
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
