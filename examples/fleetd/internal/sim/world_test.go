package sim

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/provision"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// bundleOnce makes one secrets bundle per test binary: making one takes
// a second.
var bundleOnce = sync.OnceValues(newBundle)

// testBundle is the test binary's secrets bundle.
func testBundle(t testing.TB) *secrets.Bundle {
	b, err := bundleOnce()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testNode declares one node of a test inventory.
type testNode struct {
	name, class string
	approve     bool                // the entry approves the machine's EKs
	tpm         *attesttest.SoftTPM // nil: a new one
	eccOnly     bool                // the entry approves its ECC EK alone
	addr        string              // "": nodeAddr of its place
}

// testFleet is a world whose nodes live on loopback addresses
// (K8S_NODE_CIDR 127.0.0.0/8), so that a simulated node's installed Talos
// fetches its config from its own address, as a real node does.
//
// newTestFleet's clusters are the test binary's real kube-apiserver
// (internal/kubetest): Tinkerbell's objects in a namespace of the test's
// own (TINKERBELL_NAMESPACE), bootstrap token Secrets in kube-system, which
// the tests share. newFleet's, unless its worldConfig names clusters, are
// client-go's fakes.
type testFleet struct {
	*world
	t        testing.TB
	machines map[string]*simMachine
	sim      *tinkSim
	nodes    string // the nodes file, beside its cluster topology
	ctx      context.Context
	wg       *sync.WaitGroup
}

// newTestFleet is a fleet on the real kube-apiserver, whose NetBox checks
// every request against its schema. It skips t when the control plane
// cannot run (a failure with FLEET_REQUIRE_INTEGRATION=1).
func newTestFleet(t *testing.T, edit func(*daemon.Settings), nodes ...testNode) *testFleet {
	t.Helper()
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	kube, tink := kubetest.Clientset(t, env.Config()), kubetest.Dynamic(t, env.Config())
	withNamespace := func(s *daemon.Settings) {
		s.Namespace = ns
		if edit != nil {
			edit(s)
		}
	}
	return newFleet(t, worldConfig{Validate: t, Edit: withNamespace, Kube: kube, Tink: tink}, nodes...)
}

// attestedWorker is a fleet (edit changes its settings) of one approved
// worker, w-01, whose machine is on and attested, and whose run's started
// line is journaled, and the URL of the config its run's Workflow waits
// for.
func attestedWorker(t *testing.T, edit func(*daemon.Settings)) (*testFleet, string) {
	t.Helper()
	f := newTestFleet(t, edit, testNode{name: "w-01", class: "worker", approve: true})
	f.powerOn("w-01")
	f.attested("w-01")
	return f, f.configURL("w-01")
}

// newFleet makes a fleet of nodes from wc, whose Nodes, Topology and
// Bundle it fills in.
func newFleet(t testing.TB, wc worldConfig, nodes ...testNode) *testFleet {
	t.Helper()
	nodesFile, topo, tpms := writeInventory(t, t.TempDir(), nodes)

	ctx, cancel := context.WithCancel(context.Background())
	wc.Nodes, wc.Topology, wc.Bundle = nodesFile, topo, testBundle(t)
	w, err := newWorld(ctx, wc)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	f := fleetOf(t, ctx, w, w.settings.Namespace, nodes, tpms, func(who, source, text string) { t.Logf("%-6s %-8s %s", who, source, text) })
	f.nodes = nodesFile
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := w.close(); err != nil {
			t.Errorf("fleetd shut down with %v", err)
		}
	})
	f.wg = &wg
	return f
}

// fleetOf is the fleet of w's nodes, whose machines (with their TPMs)
// reach fleetd from their nodes' addresses, and the simulated Tinkerbell
// in Tinkerbell's namespace ns; say tells what each says.
func fleetOf(tb testing.TB, ctx context.Context, w *world, ns string, nodes []testNode, tpms map[string]*attesttest.SoftTPM, say func(who, source, text string)) *testFleet {
	f := &testFleet{world: w, t: tb, machines: map[string]*simMachine{}, ctx: ctx}
	f.sim = &tinkSim{w: w, ns: ns, machines: map[string]*simMachine{}, say: say, failAt: map[string]string{}}
	for i, n := range nodes {
		m := newSimMachine(w, n.name, "SN-"+n.name, tpms[n.name], i+1, say)
		m.client = boundClient(w, cmp.Or(n.addr, nodeAddr(i)))
		f.machines[n.name] = m
		f.sim.machines[m.mac.String()] = m
	}
	return f
}

// writeInventory writes the nodes file of nodes (classes controlplane,
// worker and secure-worker; nodes on loopback addresses, from nodeAddr)
// and the cluster topology into dir, and returns the machines' TPMs by
// node name.
func writeInventory(tb testing.TB, dir string, nodes []testNode) (nodesFile, topoFile string, tpms map[string]*attesttest.SoftTPM) {
	tb.Helper()
	tpms = map[string]*attesttest.SoftTPM{}
	var sb strings.Builder
	sb.WriteString(`models:
  box:
    manufacturer: Minisforum
    name: MS-01
    disk: /dev/nvme0n1
classes:
  controlplane:
    type: controlplane
    installer_image: factory.talos.dev/installer/cp:v1.13.9
  worker:
    type: worker
    installer_image: factory.talos.dev/installer/w:v1.13.9
  secure-worker:
    type: worker
    installer_image: factory.talos.dev/installer/w:v1.13.9
    secure_boot: required
nodes:
`)
	for i, n := range nodes {
		tpm := n.tpm
		if tpm == nil {
			var err error
			if tpm, err = attesttest.NewSoftTPM(nil); err != nil {
				tb.Fatal(err)
			}
		}
		tpms[n.name] = tpm
		fmt.Fprintf(&sb, "  %s:\n    model: box\n    serial: SN-%s\n    class: %s\n    switch_port: %d\n    address: %s\n    bmc: amt\n    disk_serial: DS-%s\n",
			n.name, n.name, n.class, i+1, cmp.Or(n.addr, nodeAddr(i)), n.name)
		if n.approve {
			b, err := attesttest.Approve(tpm)
			if err != nil {
				tb.Fatal(err)
			}
			if !n.eccOnly {
				fmt.Fprintf(&sb, "    approved_ek_rsa2048: %s\n", b.RSA2048)
			}
			fmt.Fprintf(&sb, "    approved_ek_eccp256: %s\n", b.ECCP256)
		}
	}
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			tb.Fatal(err)
		}
		return p
	}
	nodesFile = write("nodes.yaml", sb.String())
	topoFile = write("cluster-topology.json", `{"CLUSTER_NAME": "folly", "K8S_NODE_CIDR": "127.0.0.0/8", "API_SERVER_IP": "127.0.0.10"}`)

	return nodesFile, topoFile, tpms
}

// nodeAddr is the address of the i'th node of a test inventory: on
// loopback, from 127.0.0.21.
func nodeAddr(i int) string {
	i += 21
	return fmt.Sprintf("127.0.%d.%d", i/250, i%250)
}

// boundClient reaches fleetd from addr, as a node does from its address.
func boundClient(w *world, addr string) *http.Client {
	tr := w.client.Transport.(*http.Transport).Clone()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	tr.DialContext = d.DialContext
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func listen(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ln
}

// receivedCodes are the install codes the machine was answered so far.
func (m *simMachine) receivedCodes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.codes)
}

func (f *testFleet) powerOn(names ...string) {
	for _, n := range names {
		m := f.machines[n]
		f.wg.Go(func() { m.run(f.ctx) })
	}
}

// startTinkerbell starts the simulated Tinkerbell agent and Rufio.
func (f *testFleet) startTinkerbell() {
	f.wg.Go(func() { f.sim.run(f.ctx) })
}

// attested waits until the machine's first attestation has ended, and
// returns its result.
func (f *testFleet) attested(name string) attest.Result {
	f.t.Helper()
	res, _ := f.attestation(name, 1)
	return res
}

// wait polls cond for up to 20 s.
func (f *testFleet) wait(what string, cond func() bool) {
	f.t.Helper()
	if err := eventually(f.ctx, 20*time.Second, func() (bool, error) { return cond(), nil }); err != nil {
		f.t.Fatalf("%s: %v\njournal: %+v", what, err, f.journal())
	}
}

// journalOf returns the journal lines of a device, "kind: text" each.
func (f *testFleet) journalOf(name string) []string {
	f.t.Helper()
	var out []string
	for _, e := range f.journal() {
		if e.Device == name {
			out = append(out, e.Kind+": "+e.Text)
		}
	}
	return out
}

// journalWith returns the journal lines of a device ("kind: text" each)
// that start with prefix.
func (f *testFleet) journalWith(name, prefix string) []string {
	f.t.Helper()
	return slices.DeleteFunc(f.journalOf(name), func(l string) bool { return !strings.HasPrefix(l, prefix) })
}

// waitJournal waits for a journal line of the device that contains text.
func (f *testFleet) waitJournal(name, text string) string {
	f.t.Helper()
	var got string
	f.wait(fmt.Sprintf("journal of %s says %q", name, text), func() bool {
		for _, l := range f.journalOf(name) {
			if strings.Contains(l, text) {
				got = l
				return true
			}
		}
		return false
	})
	return got
}

// runOf is the run a journal line of a started run names; "" for
// another line.
func runOf(line string) string {
	_, run, _ := strings.Cut(line, "started Workflow ")
	run, _, _ = strings.Cut(run, ";")
	return run
}

// startedRun waits for the journal line of the device's first started
// run, and returns the run.
func (f *testFleet) startedRun(name string) string {
	f.t.Helper()
	return runOf(f.waitJournal(name, "started Workflow "))
}

// runTokens are the bootstrap token Secrets whose description names run
// (the test API server's kube-system holds every test's tokens).
func (f *testFleet) runTokens(run string) []corev1.Secret {
	f.t.Helper()
	l, err := f.kube.CoreV1().Secrets("kube-system").List(f.ctx, metav1.ListOptions{LabelSelector: provision.LabelManagedBy})
	if err != nil {
		f.t.Fatal(err)
	}
	return slices.DeleteFunc(l.Items, func(s corev1.Secret) bool { return !strings.HasSuffix(string(s.Data["description"]), " for "+run) })
}

// provisioned waits until the run that the machine's attestation from addr
// started (its journal line names addr) has served its config and ended
// SUCCESS, with the device active, and returns the device.
func (f *testFleet) provisioned(name, addr string) inventory.Device {
	f.t.Helper()
	line := f.waitJournal(name, "started Workflow provision-"+name+"-")
	if !strings.HasSuffix(line, "; the machine attested from HookOS at "+addr) {
		f.t.Errorf("journal: %q", line)
	}
	f.waitJournal(name, "fleetd served the config of provision-"+name+"-")
	f.waitJournal(name, "ended SUCCESS")
	f.wait(name+" active", func() bool { return f.status(name) == inventory.StatusActive })
	return f.readDevice(name)
}

func (f *testFleet) metrics() string { return scrape(f.d) }

func scrape(d *daemon.Daemon) string {
	rec := httptest.NewRecorder()
	d.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// list returns the objects of gvr in Tinkerbell's namespace.
func (f *testFleet) list(gvr schema.GroupVersionResource) []unstructured.Unstructured {
	f.t.Helper()
	l, err := f.tink.Resource(gvr).Namespace(f.settings.Namespace).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return l.Items
}

// waitTemplates waits until fleetd made its Templates.
func (f *testFleet) waitTemplates() {
	f.t.Helper()
	for _, name := range []string{"fleet-provision", "fleet-retire"} {
		f.wait("Template "+name, func() bool {
			_, err := f.tink.Resource(daemon.TemplateResource).Namespace(f.settings.Namespace).Get(f.ctx, name, metav1.GetOptions{})
			return err == nil
		})
	}
}

// setDesiredAction sets a device's desired_action to provision, as the
// operator does in NetBox.
func (f *testFleet) setDesiredAction(name string) {
	f.t.Helper()
	op, err := inventory.NewNetBox(f.nbsrv.URL, f.nbsrv.Token(userOperator), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := op.SetDesiredAction(f.ctx, f.devices[name].ID, inventory.DesiredActionProvision); err != nil {
		f.t.Fatal(err)
	}
}
