package sim

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// monitoringNamespace is the label of the namespace whose Pods may scrape
// fleetd's metrics, as examples/deploy/README.md documents it.
var monitoringNamespace = map[string]string{"kubernetes.io/metadata.name": "monitoring"}

// baseObjects are the objects of examples/deploy the network checks read,
// typed.
type baseObjects struct {
	sts      appsv1.StatefulSet
	services map[string]corev1.Service
	policies map[string]networkingv1.NetworkPolicy
}

func readBase(t *testing.T, objs []*unstructured.Unstructured) baseObjects {
	t.Helper()
	b := baseObjects{services: map[string]corev1.Service{}, policies: map[string]networkingv1.NetworkPolicy{}}
	from := func(u *unstructured.Unstructured, out any) {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	stses := 0
	for _, u := range objs {
		switch u.GetKind() {
		case "StatefulSet":
			from(u, &b.sts)
			stses++
		case "Service":
			var s corev1.Service
			from(u, &s)
			b.services[s.Name] = s
		case "NetworkPolicy":
			var p networkingv1.NetworkPolicy
			from(u, &p)
			b.policies[p.Name] = p
		}
	}
	if stses != 1 || len(b.sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("examples/deploy holds %d StatefulSets; want one, of one container", stses)
	}
	return b
}

// selectsPods reports whether sel selects the StatefulSet's Pods.
func (b baseObjects) selectsPods(sel *metav1.LabelSelector) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(b.sts.Spec.Template.Labels))
}

// The Services and NetworkPolicies of examples/deploy, against the
// StatefulSet's own ports, so that they cannot drift apart: machines reach
// https alone, through a LoadBalancer that keeps their address
// (externalTrafficPolicy Local); metrics and peers have Services of their
// own; each port the StatefulSet declares is named by exactly one policy
// (a port none names is closed once a policy selects the Pods), https
// open to all, peers to fleetd's Pods alone, metrics to the monitoring
// namespace alone; the probes read /readyz and /healthz on the metrics
// port; and the replicas spread over nodes.
func TestDeployServicesAndPolicies(t *testing.T) {
	b := readBase(t, kustomize(t, deployDir))
	ports := map[string]corev1.ContainerPort{}
	for _, p := range b.sts.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p
	}
	if got, want := slices.Sorted(maps.Keys(ports)), []string{"https", "metrics", "peers"}; !slices.Equal(got, want) {
		t.Fatalf("the StatefulSet's container ports are %q, want %q", got, want)
	}

	wantServices := map[string]struct {
		typ   corev1.ServiceType
		ports []string
	}{
		"fleetd":         {corev1.ServiceTypeLoadBalancer, []string{"https"}},
		"fleetd-metrics": {corev1.ServiceTypeClusterIP, []string{"metrics"}},
		"fleetd-peers":   {"", []string{"peers"}},
	}
	if len(b.services) != len(wantServices) {
		t.Errorf("examples/deploy holds the Services %v, want %d", slices.Sorted(maps.Keys(b.services)), len(wantServices))
	}
	for name, want := range wantServices {
		s, ok := b.services[name]
		if !ok {
			t.Errorf("no Service %s", name)
			continue
		}
		if s.Spec.Type != want.typ {
			t.Errorf("Service %s is of type %q, want %q", name, s.Spec.Type, want.typ)
		}
		if !b.selectsPods(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}) {
			t.Errorf("Service %s selects %v, not fleetd's Pods (%v)", name, s.Spec.Selector, b.sts.Spec.Template.Labels)
		}
		var names []string
		for _, p := range s.Spec.Ports {
			names = append(names, p.Name)
			if p.TargetPort.Type != intstr.String || p.TargetPort.StrVal != p.Name {
				t.Errorf("Service %s: port %s targets %s, want the container port of its name", name, p.Name, p.TargetPort.String())
			}
			if cp, ok := ports[p.Name]; !ok || cp.ContainerPort != p.Port {
				t.Errorf("Service %s: port %s (%d) is no container port of the StatefulSet's, or not at the same number (%d)", name, p.Name, p.Port, cp.ContainerPort)
			}
		}
		if !slices.Equal(names, want.ports) {
			t.Errorf("Service %s exposes %q, want %q alone", name, names, want.ports)
		}
	}
	if s := b.services["fleetd"]; s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		t.Errorf("Service fleetd has externalTrafficPolicy %q, want Local: the machine's own address and TCP connection reach fleetd", s.Spec.ExternalTrafficPolicy)
	}
	if s := b.services["fleetd-metrics"]; s.Labels["app.kubernetes.io/component"] != "metrics" {
		t.Errorf("Service fleetd-metrics is labelled %v, want app.kubernetes.io/component: metrics, which the ServiceMonitor selects", s.Labels)
	}
	if s := b.services["fleetd-peers"]; s.Spec.ClusterIP != corev1.ClusterIPNone || !s.Spec.PublishNotReadyAddresses {
		t.Errorf("Service fleetd-peers: clusterIP %q, publishNotReadyAddresses %v; want headless, naming replicas not yet ready", s.Spec.ClusterIP, s.Spec.PublishNotReadyAddresses)
	}

	// Who each policy lets in, by port name: "all", "fleetd's Pods", or
	// the namespaces' labels.
	admits := map[string][]string{}
	for name, p := range b.policies {
		if !b.selectsPods(&p.Spec.PodSelector) {
			t.Errorf("NetworkPolicy %s selects %v, not fleetd's Pods", name, p.Spec.PodSelector)
		}
		if !slices.Equal(p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("NetworkPolicy %s: policyTypes %v, want Ingress alone (fleetd's own requests go out to NetBox, the API servers and its peers)", name, p.Spec.PolicyTypes)
		}
		for _, r := range p.Spec.Ingress {
			var who []string
			for _, peer := range r.From {
				switch {
				case peer.IPBlock != nil:
					who = append(who, "ipBlock "+peer.IPBlock.CIDR)
				case peer.NamespaceSelector != nil && peer.PodSelector == nil:
					who = append(who, fmt.Sprint("namespaces ", peer.NamespaceSelector.MatchLabels))
				case peer.NamespaceSelector == nil && b.selectsPods(peer.PodSelector):
					who = append(who, "fleetd's Pods")
				default:
					who = append(who, fmt.Sprintf("other: %+v", peer))
				}
			}
			if len(r.From) == 0 {
				who = []string{"all"}
			}
			if len(r.Ports) == 0 {
				t.Errorf("NetworkPolicy %s: a rule names no port, so it opens every port", name)
			}
			for _, port := range r.Ports {
				if port.Port == nil || port.Port.Type != intstr.String {
					t.Errorf("NetworkPolicy %s: port %v is not named: name the StatefulSet's container port", name, port.Port)
					continue
				}
				if _, ok := ports[port.Port.StrVal]; !ok {
					t.Errorf("NetworkPolicy %s names port %s, which the StatefulSet does not declare", name, port.Port.StrVal)
				}
				if port.Protocol == nil || *port.Protocol != corev1.ProtocolTCP {
					t.Errorf("NetworkPolicy %s: port %s is not TCP", name, port.Port.StrVal)
				}
				admits[port.Port.StrVal] = append(admits[port.Port.StrVal], who...)
			}
		}
	}
	want := map[string][]string{
		"https":   {"all"},
		"peers":   {"fleetd's Pods"},
		"metrics": {fmt.Sprint("namespaces ", monitoringNamespace)},
	}
	if diff := cmp.Diff(want, admits); diff != "" {
		t.Errorf("who the NetworkPolicies let in, by port (-want +got):\n%s", diff)
	}

	c := b.sts.Spec.Template.Spec.Containers[0]
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s is not an HTTP GET", p.what)
			continue
		}
		if g := p.probe.HTTPGet; g.Path != p.path || g.Port.String() != "metrics" {
			t.Errorf("%s reads %s on port %s, want %s on port metrics (the port the kubelet reaches from the Pod's node)", p.what, g.Path, g.Port.String(), p.path)
		}
	}
	if l := c.LivenessProbe; l != nil && l.PeriodSeconds*l.FailureThreshold < 60 {
		t.Errorf("livenessProbe restarts fleetd after %d s without an answer; want a minute at least", l.PeriodSeconds*l.FailureThreshold)
	}

	if !slices.ContainsFunc(b.sts.Spec.Template.Spec.TopologySpreadConstraints, func(tsc corev1.TopologySpreadConstraint) bool {
		return tsc.TopologyKey == corev1.LabelHostname && tsc.MaxSkew == 1 && b.selectsPods(tsc.LabelSelector)
	}) {
		t.Errorf("the StatefulSet does not spread its replicas over nodes (a topologySpreadConstraint on %s of fleetd's Pods): %+v",
			corev1.LabelHostname, b.sts.Spec.Template.Spec.TopologySpreadConstraints)
	}
}

// TestIntegrationFleetdReadyz runs fleetd, built with go build, on a
// control plane of its own with FLEET_READY_WINDOW=2s: /readyz answers 200
// once NetBox and the API server answered; 503 naming NetBox alone when
// NetBox stops answering fleetd, and 200 again when it is back; 503 naming
// the API server alone when kube-apiserver is killed, and 200 again when
// it is restarted. /healthz answers 200 throughout, and the process is
// never restarted.
func TestIntegrationFleetdReadyz(t *testing.T) {
	pf := newProcFleet(t, procFleetConfig{replicas: 1, alone: true, own: true, settings: func(_ int, s map[string]string) {
		s["FLEET_READY_WINDOW"] = "2s"
	}}, stormNodes(t, 1)...)
	p := pf.replicas[0]
	// await polls /readyz until ok says its answer is the one awaited; it
	// fails when that takes longer than a minute, far more than the 2 s
	// window and the asks every 0.5 s need, or /healthz fails meanwhile.
	await := func(what string, ok func(code int, body string) bool) {
		t.Helper()
		start := time.Now()
		var code int
		var body string
		for time.Since(start) < time.Minute {
			if code, body = p.get(t.Context(), "/readyz"); ok(code, body) {
				t.Logf("%s after %v: %d %q", what, time.Since(start).Round(10*time.Millisecond), code, body)
				return
			}
			if hc, hb := p.get(t.Context(), "/healthz"); hc != http.StatusOK {
				t.Fatalf("/healthz while waiting for %s: %d %q, want 200", what, hc, hb)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: /readyz still answers %d %q after a minute", what, code, body)
	}
	ready := func(code int, body string) bool { return code == http.StatusOK && body == "ok\n" }
	unready := func(cause string) func(int, string) bool {
		return func(code int, body string) bool {
			lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
			return code == http.StatusServiceUnavailable && len(lines) == 1 && strings.HasPrefix(lines[0], cause)
		}
	}

	await("ready at start", ready)
	pf.nbsrv.Inject(netboxtest.Fault{Kind: netboxtest.Down, User: userFleetd})
	await("unready, NetBox down", unready("NetBox has not answered for "))
	pf.nbsrv.Inject(netboxtest.Fault{})
	await("ready, NetBox back", ready)

	if err := pf.env.Kill(kubetest.APIServer); err != nil {
		t.Fatal(err)
	}
	await("unready, kube-apiserver killed", unready("Tinkerbell's API server has not answered for "))
	if err := pf.env.Restart(t.Context(), kubetest.APIServer); err != nil {
		t.Fatal(err)
	}
	await("ready, kube-apiserver restarted", ready)

	if err := p.process().Exited(); err != nil {
		t.Error(err)
	}
}
