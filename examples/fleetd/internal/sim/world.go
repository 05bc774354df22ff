package sim

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
	"github.com/fleetkit/fleet/provision"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// A world is a whole fleet in one process, for the demo and the end-to-end
// tests: an in-process NetBox holding the nodes file, the Kubernetes
// clusters of Tinkerbell and of the nodes (the clients its config names:
// a real kube-apiserver in the end-to-end tests; client-go's fakes in the
// demo, which has none), and a fleetd serving HTTPS on loopback.
type world struct {
	nbsrv *netboxtest.Server
	admin *inventory.NetBox // the binding author's client: applies the nodes file
	nb    *inventory.NetBox // fleetd's client
	inv   *inventory.Inventory
	kube  kubernetes.Interface // the nodes' cluster: bootstrap token Secrets
	tink  dynamic.Interface    // Tinkerbell's cluster: Workflows, Hardware, Templates, Rufio's objects

	settings daemon.Settings
	parts    daemon.Parts
	d        *daemon.Daemon
	url      string          // https://127.0.0.1:port
	client   *http.Client    // trusts fleetd's certificate
	cert     tls.Certificate // the certificate fleetd serves (every replica's)
	audit    *lockedBuffer
	devices  map[string]inventory.Device // by name, as applied

	stop   context.CancelFunc
	done   chan error // what serve returned; nil once halt read it
	served error

	// A replica's peers' API: its listener until start serves it, and
	// its address, for a restart.
	peersLn   net.Listener
	peersAddr string
}

// worldConfig tunes a world.
type worldConfig struct {
	Nodes, Topology string                 // the nodes file and topology
	Validate        netboxtest.Reporter    // schema checks of the in-process NetBox; nil: none
	Edit            func(*daemon.Settings) // changes fleetd's settings before it starts
	Bundle          *secrets.Bundle        // nil: a new one
	// The clusters fleetd talks to; nil: client-go's fakes, which enforce
	// no schema, RBAC or status subresource (the demo's, which runs with no
	// kube-apiserver). Tinkerbell's namespace is the settings' Namespace.
	Kube kubernetes.Interface
	Tink dynamic.Interface
	// The clients fleetd itself uses, when they differ from Kube and Tink
	// (which the simulated Tinkerbell and the tests use): e.g. ones that
	// carry only fleetd's ServiceAccount token. nil: Kube and Tink.
	FleetdKube kubernetes.Interface
	FleetdTink dynamic.Interface
	// Leases reaches Tinkerbell's cluster's Leases, for fleetd's replicas
	// (daemon.Parts.Leases); nil: none.
	Leases coordinationclient.LeasesGetter
	// Peers is the listener of fleetd's peers' API, for a replica
	// (Settings.Replica, set by Edit); nil: none.
	Peers net.Listener
}

// The NetBox users of a world.
const (
	userTerraform = "terraform" // applies the nodes file: the binding author
	userFleetd    = "fleetd"
	userOperator  = "operator" // sets desired_action by hand
	demoSwitch    = "usw-pro-24"
	approverToken = "demo-approver-token-0123456789"
)

func newWorld(ctx context.Context, wc worldConfig) (*world, error) {
	inv, err := inventory.Load(wc.Nodes, wc.Topology)
	if err != nil {
		return nil, err
	}
	w := &world{inv: inv, audit: &lockedBuffer{}}
	if err := w.startNetBox(ctx, wc.Validate, 0); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			w.nbsrv.Close()
		}
	}()
	w.nb, err = inventory.NewNetBox(w.nbsrv.URL, w.nbsrv.Token(userFleetd), &inventory.NetBoxConfig{
		BindingAuthor: userTerraform, Switch: demoSwitch,
	})
	if err != nil {
		return nil, err
	}

	w.kube, w.tink = wc.Kube, wc.Tink
	if w.kube == nil {
		w.kube = kubefake.NewClientset()
	}
	if w.tink == nil {
		w.tink = dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			provision.WorkflowResource: "WorkflowList",
			provision.HardwareResource: "HardwareList",
			provision.MachineResource:  "MachineList",
			provision.JobResource:      "JobList",
		})
	}
	bundle := wc.Bundle
	if bundle == nil {
		if bundle, err = newBundle(); err != nil {
			return nil, err
		}
	}
	tc, err := testcert.New("fleetd.demo", "127.0.0.1")
	if err != nil {
		return nil, err
	}
	w.cert = tc.TLS
	cert, err := daemon.StaticCert(tc.TLS)
	if err != nil {
		return nil, err
	}
	pool := tc.Pool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w.url = "https://" + ln.Addr().String()
	w.settings = daemon.Settings{
		PublicURL:     w.url,
		ConfigTTL:     time.Hour,
		AutoProvision: true,
		ControlPlanes: true,
		BindingAuthor: userTerraform,
		Namespace:     "tinkerbell",
		ApproverToken: approverToken,
		// The simulated agents report an action every 60 ms:
		// fleetd reads the runs' Workflows about as often.
		PollInterval: 100 * time.Millisecond,
	}
	if wc.Edit != nil {
		wc.Edit(&w.settings)
	}
	fleetdKube, fleetdTink := w.kube, w.tink
	if wc.FleetdKube != nil {
		fleetdKube = wc.FleetdKube
	}
	if wc.FleetdTink != nil {
		fleetdTink = wc.FleetdTink
	}
	w.parts = daemon.Parts{
		NetBox: w.nb, Kube: fleetdKube, Tink: fleetdTink, Inventory: inv, Bundle: bundle, Cert: cert,
		Logger: slog.New(slog.NewJSONHandler(w.audit, nil)), Leases: wc.Leases,
	}
	w.d, err = daemon.New(w.settings, w.parts)
	if err != nil {
		ln.Close()
		return nil, err
	}
	w.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second}
	if wc.Peers != nil {
		w.peersLn, w.peersAddr = wc.Peers, wc.Peers.Addr().String()
	}
	w.start(ln)
	ok = true
	return w, nil
}

// start serves fleetd on ln, and a replica's peers' API on its own
// listener.
func (w *world) start(ln net.Listener) {
	ctx, stop := context.WithCancel(context.Background())
	w.stop, w.done, w.served = stop, make(chan error, 1), nil
	lns := daemon.Listeners{HTTPS: ln, Peers: w.peersLn}
	w.peersLn = nil
	go func() { w.done <- w.d.Serve(ctx, lns) }()
}

// halt stops fleetd and returns what serve returned, nil when it stopped
// before it served (its Templates' create was cancelled): a reboot may come
// at any time. Later calls return the same.
func (w *world) halt() error {
	w.stop()
	if w.done != nil {
		w.served, w.done = <-w.done, nil
		if errors.Is(w.served, context.Canceled) {
			w.served = nil
		}
	}
	return w.served
}

// restart stops fleetd and starts a new one on the same address, as a
// reboot of its host does: waiting configs are gone, runs in flight stay in
// the cluster.
func (w *world) restart() error {
	addr := w.url[len("https://"):]
	if err := w.halt(); err != nil {
		return err
	}
	d, err := daemon.New(w.settings, w.parts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if w.peersAddr != "" {
		if w.peersLn, err = net.Listen("tcp", w.peersAddr); err != nil {
			ln.Close()
			return err
		}
	}
	w.d = d
	w.start(ln)
	return nil
}

// close stops fleetd and NetBox.
func (w *world) close() error {
	err := w.halt()
	w.nbsrv.Close()
	return err
}

// device reads a device from NetBox.
func (w *world) device(ctx context.Context, name string) (inventory.Device, error) {
	return w.admin.Device(ctx, w.devices[name].ID)
}

// startNetBox starts w's in-process NetBox with fleet's users, w.inv's site
// and a switch with a port for each node, applies w.inv's nodes as the
// binding author (w.admin) and reads their devices into w.devices. timeout
// bounds each of w.admin's requests (0: inventory's default). On an error
// nothing is left running.
func (w *world) startNetBox(ctx context.Context, validate netboxtest.Reporter, timeout time.Duration) (err error) {
	w.nbsrv = netboxtest.New(&netboxtest.Config{Validate: validate, Users: []string{userTerraform, userFleetd, userOperator}})
	defer func() {
		if err != nil {
			w.nbsrv.Close()
		}
	}()
	site := w.inv.Topology.Name
	if _, err := w.nbsrv.AddSite(site); err != nil {
		return err
	}
	ports := 24
	for _, n := range w.inv.Nodes {
		ports = max(ports, n.SwitchPort)
	}
	if _, err := w.nbsrv.AddSwitch(netboxtest.Switch{Site: site, Name: demoSwitch, Ports: ports}); err != nil {
		return err
	}
	if w.admin, err = inventory.NewNetBox(w.nbsrv.URL, w.nbsrv.Token(userTerraform), &inventory.NetBoxConfig{
		BindingAuthor: userTerraform, Site: site, Switch: demoSwitch, Timeout: timeout,
	}); err != nil {
		return err
	}
	if err := w.apply(ctx, w.inv); err != nil {
		return err
	}
	devs, err := w.admin.Devices(ctx)
	if err != nil {
		return err
	}
	w.devices = map[string]inventory.Device{}
	for _, d := range devs {
		w.devices[d.Name] = d
	}
	return nil
}

// apply plans inv against NetBox as the binding author (w.admin), and
// applies the plan.
func (w *world) apply(ctx context.Context, inv *inventory.Inventory) error {
	plan, err := w.admin.Plan(ctx, inv)
	if err != nil {
		return err
	}
	return w.admin.Apply(ctx, plan)
}

// journalEntry is one NetBox journal line of a device.
type journalEntry struct {
	ID     int64
	Device string
	Kind   string
	Text   string
}

// journal returns every journal entry NetBox holds, oldest first.
func (w *world) journal() []journalEntry {
	names := map[int64]string{}
	for n, d := range w.devices {
		names[d.ID] = n
	}
	var out []journalEntry
	for _, e := range w.nbsrv.Journal(0) {
		out = append(out, journalEntry{ID: e.ID, Device: names[e.Device], Kind: e.Kind, Text: e.Text})
	}
	return out
}

// newBundle makes a Talos secrets bundle for the demo's cluster (about a
// second of CPU: an RSA key).
func newBundle() (*secrets.Bundle, error) {
	return secrets.NewBundle(secrets.NewClock(), config.TalosVersionCurrent)
}

// lockedBuffer is an io.Writer many goroutines share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// randomMAC returns a locally administered MAC.
func randomMAC() net.HardwareAddr {
	b := make([]byte, 6)
	rand.Read(b)
	b[0] = b[0]&^1 | 2
	return b
}

var errTimeout = errors.New("timed out")

// eventually polls cond every 20 ms until it holds or d passes.
func eventually(ctx context.Context, d time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return errTimeout
		case <-time.After(20 * time.Millisecond):
		}
	}
}
