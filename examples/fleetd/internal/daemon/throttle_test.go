package daemon

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/internal/syncbuf"
	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
	"github.com/fleetkit/fleet/provision"
)

// memTransport serves each request with a handler, in memory: no socket is
// involved, so in a testing/synctest bubble every wait is on the bubble's
// clock, which then moves as soon as the bubble is idle.
type memTransport struct {
	h      http.Handler
	remote string // the RemoteAddr the handler sees
}

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// The request as a server reads it: its body once, and no client fields.
	var body io.Reader = http.NoBody
	if req.Body != nil {
		defer req.Body.Close()
		body = req.Body
	}
	r := httptest.NewRequestWithContext(req.Context(), req.Method, req.URL.RequestURI(), body)
	r.Header = req.Header.Clone()
	r.Host = cmp.Or(req.Host, req.URL.Host)
	r.ContentLength = req.ContentLength
	r.RemoteAddr = m.remote
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, r)
	rsp := rec.Result()
	rsp.Request = req
	return rsp, nil
}

// memClient is an HTTP client whose requests h serves in memory, as if
// they came from remote.
func memClient(h http.Handler, remote string) *http.Client {
	return &http.Client{Transport: memTransport{h: h, remote: remote}}
}

// The NetBox users of a memWorld.
const (
	memAuthor   = "terraform" // applies the nodes file: the binding author
	memFleetd   = "fleetd"
	memOperator = "operator"
	memSwitch   = "usw-pro-24"
)

// A memWorld is what a fleetd made by New needs, in process: a NetBox
// (netboxtest) holding the devices of a nodes file, and the nodes file.
// Its NetBox server is made outside any synctest bubble (its listener
// would keep a bubble's clock still); the tests call its handler alone.
type memWorld struct {
	nbsrv   *netboxtest.Server
	inv     *inventory.Inventory
	devices map[string]inventory.Device // by name
	// wrapFleetd, when set, wraps the NetBox handler fleetd's requests
	// meet (a fault of its own).
	wrapFleetd func(http.Handler) http.Handler
	// shareKube, when set, gives every fleetd of the world the same
	// Kubernetes fakes, as replicas share one API server.
	shareKube bool
	kube      *kubefake.Clientset
	tink      *dynfake.FakeDynamicClient
}

// nodeAddr is the address of the i'th worker of a memWorld.
func nodeAddr(i int) string { return fmt.Sprintf("10.0.0.%d", 21+i) }

// newMemWorld applies a nodes file of workers with these names (serial
// SN-<name>, at nodeAddr) to a new NetBox.
func newMemWorld(t *testing.T, names ...string) *memWorld {
	t.Helper()
	var sb strings.Builder
	sb.WriteString(`models:
  box:
    manufacturer: Minisforum
    name: MS-01
    disk: /dev/nvme0n1
classes:
  worker:
    type: worker
    installer_image: factory.talos.dev/installer/w:v1.13.9
nodes:
`)
	for i, n := range names {
		fmt.Fprintf(&sb, "  %s:\n    model: box\n    serial: SN-%s\n    class: worker\n    switch_port: %d\n    address: %s\n    bmc: amt\n    disk_serial: DS-%s\n",
			n, n, i+1, nodeAddr(i), n)
	}
	topo, err := inventory.ParseTopology("cluster-topology.json", []byte(`{"CLUSTER_NAME": "folly", "K8S_NODE_CIDR": "10.0.0.0/24", "API_SERVER_IP": "10.0.0.10"}`))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Parse("nodes.yaml", []byte(sb.String()), topo)
	if err != nil {
		t.Fatal(err)
	}
	w := &memWorld{
		nbsrv: netboxtest.New(&netboxtest.Config{Validate: t, Users: []string{memAuthor, memFleetd, memOperator}}),
		inv:   inv,
	}
	t.Cleanup(w.nbsrv.Close)
	if _, err := w.nbsrv.AddSite("folly"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.nbsrv.AddSwitch(netboxtest.Switch{Site: "folly", Name: memSwitch, Ports: 24}); err != nil {
		t.Fatal(err)
	}
	admin := w.netBox(t, memAuthor, "folly")
	ctx := context.Background()
	plan, err := admin.Plan(ctx, inv)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Apply(ctx, plan); err != nil {
		t.Fatal(err)
	}
	devs, err := admin.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.devices = map[string]inventory.Device{}
	for _, d := range devs {
		w.devices[d.Name] = d
	}
	return w
}

// netBox is a client of the world's NetBox as user, over its handler.
func (w *memWorld) netBox(t *testing.T, user, site string) *inventory.NetBox {
	t.Helper()
	h := w.nbsrv.Handler()
	if user == memFleetd && w.wrapFleetd != nil {
		h = w.wrapFleetd(h)
	}
	nb, err := inventory.NewNetBox(w.nbsrv.URL, w.nbsrv.Token(user), &inventory.NetBoxConfig{
		BindingAuthor: memAuthor, Site: site, Switch: memSwitch,
		HTTPClient: memClient(h, "127.0.0.1:40000"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return nb
}

var (
	memBundleOnce sync.Once
	memBundle     *secrets.Bundle
	memBundleErr  error
)

// replica makes a fleetd the replica name among peers, with the sealing
// key every replica of a world holds.
func replica(name string, peers ...Peer) func(*Settings) {
	return func(s *Settings) { s.Replica, s.Peers, s.SealingKey = name, peers, make([]byte, 32) }
}

// replicaOfTwo makes a fleetd fleetd-0, a replica whose peer, fleetd-1,
// is never reached.
var replicaOfTwo = replica("fleetd-0", Peer{Name: "fleetd-0", URL: "https://127.0.0.1:1"}, Peer{Name: "fleetd-1", URL: "https://127.0.0.1:2"})

// fleetd makes a fleetd with New, on the world's NetBox and client-go's
// fakes, its config server ready to take configs, and stops it when t
// ends. Called in a bubble, its clock and its goroutines are the
// bubble's.
func (w *memWorld) fleetd(t *testing.T, edit ...func(*Settings)) (*Daemon, *syncbuf.Buffer) {
	t.Helper()
	memBundleOnce.Do(func() { memBundle, memBundleErr = secrets.NewBundle(secrets.NewClock(), config.TalosVersionCurrent) })
	if memBundleErr != nil {
		t.Fatal(memBundleErr)
	}
	// Valid as long as an ACME certificate just renewed: no alert fires
	// for its expiry.
	tc, err := testcert.NewUntil(time.Now().Add(90*24*time.Hour), "fleetd.test")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := StaticCert(tc.TLS)
	if err != nil {
		t.Fatal(err)
	}
	tink, kube := w.tink, w.kube
	if tink == nil {
		tink = dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			provision.WorkflowResource: "WorkflowList",
			provision.HardwareResource: "HardwareList",
			provision.MachineResource:  "MachineList",
			provision.JobResource:      "JobList",
		})
		kube = kubefake.NewClientset()
		if w.shareKube {
			w.tink, w.kube = tink, kube
		}
	}
	audit := &syncbuf.Buffer{}
	settings := Settings{ConfigTTL: time.Hour, AutoProvision: true, BindingAuthor: memAuthor, Namespace: "tinkerbell"}
	for _, e := range edit {
		e(&settings)
	}
	d, err := New(settings, Parts{
		NetBox: w.netBox(t, memFleetd, ""), Kube: kube, Tink: tink, Leases: kube.CoordinationV1(),
		Inventory: w.inv, Bundle: memBundle, Cert: cert,
		Logger: slog.New(slog.NewJSONHandler(audit, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.release(context.Background()) })
	// As Serve does before it serves: its config server takes configs.
	if err := d.configs.ConfigureServer(&http.Server{}); err != nil {
		t.Fatal(err)
	}
	return d, audit
}

// journal returns the journal lines of the device, "kind: text" each, in
// the order NetBox holds them.
func (w *memWorld) journal(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, e := range w.nbsrv.Journal(w.devices[name].ID) {
		out = append(out, e.Kind+": "+e.Text)
	}
	return out
}

// wantJournal fails t unless the journal of device name is want, line by
// line; when says when it is read.
func (w *memWorld) wantJournal(t *testing.T, name, when string, want ...string) {
	t.Helper()
	if got := w.journal(t, name); !slices.Equal(got, want) {
		t.Errorf("%s: the journal of %s is\n%s\nwant\n%s", when, name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// answerJournalWrites makes NetBox answer each journal write of fleetd's
// with the status answer, asked once for each, gives; 0: as NetBox does.
func (w *memWorld) answerJournalWrites(answer func() int) {
	w.wrapFleetd = func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/extras/journal-entries/") {
				if s := answer(); s != 0 {
					http.Error(rw, `{"comments": ["This field is required."]}`, s)
					return
				}
			}
			h.ServeHTTP(rw, r)
		})
	}
}

// fleetdRequests returns the requests fleetd made of NetBox since the last
// ResetRequests, "METHOD URI" each.
func (w *memWorld) fleetdRequests() []string {
	var out []string
	for _, r := range w.nbsrv.Requests() {
		if r.User == memFleetd {
			out = append(out, r.Method+" "+r.URI)
		}
	}
	return out
}

// flush waits until fleetd's queued NetBox writes are done.
func flush(t *testing.T, d *Daemon) {
	t.Helper()
	if err := d.Journal().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// metricValue is the value of a series of fleetd's metrics, name and labels
// as a scrape writes them; 0 when absent.
func metricValue(t *testing.T, d *Daemon, series string) float64 {
	t.Helper()
	for _, l := range strings.Split(scrape(d), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// Two NetBox devices hold a machine's serial, and any machine can claim
// it: each device's journal says so once per 10 minutes, however often
// the claim is refused, and again once 10 minutes have passed.
func TestDuplicateSerialJournalEvery(t *testing.T) {
	w := newMemWorld(t, "w-01", "w-02")
	// An operator gives w-02 the serial of w-01's machine.
	if err := w.nbsrv.Update(memOperator, "/api/dcim/devices/", map[string]any{"id": w.devices["w-02"].ID, "serial": "SN-w-01"}); err != nil {
		t.Fatal(err)
	}
	tpm, err := attesttest.NewSoftTPM(nil)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		d, audit := w.fleetd(t)
		machine := memClient(d.Handler(), nodeAddr(0)+":40000")
		refused := func() {
			t.Helper()
			_, err := attest.Run(context.Background(), "https://fleetd.test/attest", tpm,
				attest.Machine{Serial: "SN-w-01", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}},
				&attest.ClientConfig{HTTPClient: machine, Console: &strings.Builder{}})
			if !errors.Is(err, attest.ErrRefused) {
				t.Fatalf("Run: %v, want refused", err)
			}
			flush(t, d)
		}
		line := fmt.Sprintf(`warning: attest: FAILED: NetBox holds more than one device with serial "SN-w-01": w-01 (id %d), w-02 (id %d); fleetd cannot tell which one's approved EK binding to judge`,
			w.devices["w-01"].ID, w.devices["w-02"].ID)
		journaled := func(when string, want int) {
			t.Helper()
			for _, name := range []string{"w-01", "w-02"} {
				n := 0
				for _, l := range w.journal(t, name) {
					if strings.HasPrefix(l, line) {
						n++
					}
				}
				if n != want {
					t.Errorf("%s: %d journal lines of the refusal on %s, want %d:\n%s", when, n, name, want, strings.Join(w.journal(t, name), "\n"))
				}
			}
		}

		first := time.Now()
		refused()
		journaled("after the first refusal", 1)
		refused()
		journaled("after a second refusal at once", 1)
		time.Sleep(time.Until(first.Add(10*time.Minute - time.Second)))
		refused()
		journaled("after a refusal 10 minutes less a second after the first", 1)
		time.Sleep(time.Second)
		refused()
		journaled("after a refusal 10 minutes after the first", 2)
		if n := strings.Count(audit.String(), `"msg":"attest.verdict"`); n != 4 {
			t.Errorf("%d attest.verdict lines for 4 refusals", n)
		}
	})
}

// A node that asks for a config fleetd does not hold (after a reboot of
// fleetd, or a lost code) asks again and again: the first ask is
// journaled on its device, each later one stamps the alert's metric at
// once, and its asks in the minute after a journaled one wait; the first
// ask a minute or more after it journals them in one line that counts
// them. Asks from addresses that are no device's, meanwhile, cost NetBox
// one read of its devices, and no journal line.
func TestMissingConfigAsksJournalEvery(t *testing.T) {
	w := newMemWorld(t, "w-01")
	synctest.Test(t, func(t *testing.T) {
		d, _ := w.fleetd(t)
		node := memClient(d.Handler(), nodeAddr(0)+":40000")
		ask := func(c *http.Client) {
			t.Helper()
			if got := fetchStatus(t, c, "https://fleetd.test"+configserve.PathPrefix+configserve.NewCode()); got != http.StatusNotFound {
				t.Fatalf("a fetch of an unknown code = %d, want 404", got)
			}
		}
		const missing = "warning: the node asked for its Talos config, and fleetd holds none for it"
		lines := func(when string, want ...string) {
			t.Helper()
			flush(t, d)
			w.wantJournal(t, "w-01", when, want...)
		}
		const stamp = `fleet_install_config_missing_last_timestamp_seconds{node="w-01"}`

		first := time.Now()
		ask(node)
		lines("after the first ask", missing)
		if got := metricValue(t, d, stamp); got != float64(first.Unix()) {
			t.Errorf("the missing-config metric is %v after the first ask, want %d", got, first.Unix())
		}

		time.Sleep(30 * time.Second)
		w.nbsrv.ResetRequests()
		since := time.Now()
		const nodeAsks, others = 100, 50
		for i := range nodeAsks {
			ask(node)
			if i < others {
				ask(memClient(d.Handler(), fmt.Sprintf("10.77.0.%d:40000", i+1)))
			}
		}
		if got := metricValue(t, d, stamp); got != float64(since.Unix()) {
			t.Errorf("the missing-config metric is %v after the asks at %d", got, since.Unix())
		}
		lines("30 s after the first ask", missing)
		if got := metricValue(t, d, "fleet_install_config_unknown_asks_total"); got != others {
			t.Errorf("%v asks counted from addresses that are no device's, want %d", got, others)
		}
		reqs := w.fleetdRequests()
		if len(reqs) != 2 || !strings.HasPrefix(reqs[0], "GET /api/dcim/devices/") || !strings.HasPrefix(reqs[1], "GET /api/dcim/interfaces/") {
			t.Errorf("the asks cost NetBox\n%s\nwant one read of the devices", strings.Join(reqs, "\n"))
		}

		time.Sleep(time.Until(first.Add(time.Minute - time.Second)))
		ask(node)
		lines("a minute less a second after the first ask", missing)
		time.Sleep(time.Second)
		ask(node)
		counted := fmt.Sprintf("%s (asked %d times since %s)", missing, nodeAsks+2, since.UTC().Format(time.RFC3339))
		lines("a minute after the first ask", missing, counted)
	})
}

// A replica lends a config for a fetch at another replica, which never
// settles the loan (it died mid-answer): once the loan's deadline passes,
// the lender drops the config and journals it on the device, and never
// lends it again.
func TestLostLoanJournaled(t *testing.T) {
	w := newMemWorld(t, "w-01")
	synctest.Test(t, func(t *testing.T) {
		d, _ := w.fleetd(t)
		dev := w.devices["w-01"]
		const run = "provision-w-01-1767225600"
		code := configserve.NewCode()
		if err := d.configs.Put(code, []byte("machine: {}\n"), configserve.Device{ID: dev.ID, Name: dev.Name}, run); err != nil {
			t.Fatal(err)
		}
		l, err := d.configs.Lend(context.Background(), code)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(l.Deadline) - time.Second)
		synctest.Wait()
		flush(t, d)
		w.wantJournal(t, "w-01", "a second before the loan's deadline")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		flush(t, d)
		want := "warning: the Talos config of " + run + " was lent for a fetch that never reported back; it was dropped, so that it is never served twice"
		w.wantJournal(t, "w-01", "after the loan's deadline", want)
		if _, err := d.configs.Lend(context.Background(), code); !errors.Is(err, configserve.ErrNotHeld) {
			t.Errorf("Lend after the loan was lost: %v, want ErrNotHeld", err)
		}
	})
}

// Admissions past FLEET_MAX_ADMISSIONS wait their turn. A machine that
// gives up while it waits (here with no device held from its binding
// lookup, so no MAC to record) costs NetBox nothing and is counted
// abandoned. A storm's proven claims record their MACs before their
// admissions wait their turn: eight claims waiting behind two running
// admissions share one read of their interfaces, one bulk create of MAC
// objects and one bulk update of the interfaces, rather than each making
// three requests once its turn comes. A waiting admission runs as soon as
// a running one ends.
func TestAdmissionsWaitTheirTurn(t *testing.T) {
	names := []string{"w-01", "w-02", "w-03", "w-04", "w-05", "w-06", "w-07", "w-08"}
	w := newMemWorld(t, names...)
	// NetBox takes a moment to answer, as a real one does: calls that come
	// while a batch is in flight join the next. (Answered at once, each
	// batch could end before the next claim comes, and go alone.)
	w.wrapFleetd = func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			time.Sleep(10 * time.Millisecond)
			h.ServeHTTP(rw, r)
		})
	}
	synctest.Test(t, func(t *testing.T) {
		d, audit := w.fleetd(t, func(s *Settings) { s.MaxAdmissions = 2 })
		ctx := context.Background()
		claim := func(i int) attest.Claim {
			return attest.Claim{Serial: "SN-" + names[i], MAC: net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 1)}, Peer: nodeAddr(i) + ":40000", Proven: time.Now()}
		}
		if err := d.admitting.Acquire(ctx, 2); err != nil { // two admissions run
			t.Fatal(err)
		}
		w.nbsrv.ResetRequests()
		gaveUp, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := d.admit(gaveUp, claim(0))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("an admission whose machine gave up while it waited: %v", err)
		}
		if reqs := w.fleetdRequests(); len(reqs) != 0 {
			t.Errorf("an abandoned admission cost NetBox %q", reqs)
		}
		if got := metricValue(t, d, `fleet_admissions_total{outcome="abandoned"}`); got != 1 {
			t.Errorf("abandoned admissions counted: %v, want 1", got)
		}
		if !strings.Contains(audit.String(), `"msg":"attest.install","serial":"SN-w-01","outcome":"abandoned"`) {
			t.Errorf("no attest.install line for the abandoned admission:\n%s", audit)
		}

		// Each claim's binding lookup read its device, as attest's does.
		for _, n := range names {
			if _, err := (bindings{d}).Binding(ctx, "SN-"+n); err != nil {
				t.Fatal(err)
			}
		}
		w.nbsrv.ResetRequests()
		done := make(chan error, len(names))
		for i := range names {
			go func() {
				_, err := d.admit(ctx, claim(i))
				done <- err
			}()
		}
		time.Sleep(time.Second) // the batches are sent; the admissions wait their turn
		synctest.Wait()
		var macWrites []string
		for _, r := range w.fleetdRequests() {
			if strings.Contains(r, "/api/dcim/interfaces/") || strings.Contains(r, "/api/dcim/mac-addresses/") {
				macWrites = append(macWrites, r)
			}
		}
		// The first claim's batch may go alone, the others then together.
		if len(macWrites) == 0 || len(macWrites) > 6 {
			t.Errorf("eight waiting admissions recorded their MACs in %d requests, want at most 6 (two batches): %q", len(macWrites), macWrites)
		}
		select {
		case err := <-done:
			t.Fatalf("an admission ran while two others did: %v", err)
		default:
		}
		waited := len(w.fleetdRequests())
		d.admitting.Release(1)
		if err := <-done; err != nil {
			t.Error(err)
		}
		if len(w.fleetdRequests()) == waited {
			t.Error("the admission that waited its turn made no NetBox request")
		}
		d.admitting.Release(1)
		for range names[1:] {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		for i, n := range names {
			dev, err := d.nb.DeviceBySerial(ctx, "SN-"+n)
			if want := claim(i).MAC; err != nil || !bytes.Equal(dev.MAC, want) {
				t.Errorf("%s's MAC in NetBox: %v (%v), want %v", n, dev.MAC, err, want)
			}
		}
	})
}

// An admission that meets another replica's run of the device still
// starting (its Workflow created, NetBox not naming it yet: the machine's
// earlier try, perhaps, whose answer it stopped waiting for) is decided on
// the machine's next try: the hook returns attest.ErrAdmitLater, and the
// machine tries again rather than being told "admission failed" with
// nothing left to try. Once NetBox names the run, the next try is decided.
func TestAdmissionMeetingAStartingRunTriedAgain(t *testing.T) {
	w := newMemWorld(t, "w-01")
	w.shareKube = true
	synctest.Test(t, func(t *testing.T) {
		d0, _ := w.fleetd(t, replica("fleetd-0"))
		d1, audit := w.fleetd(t, replica("fleetd-1"))
		ctx := context.Background()
		claim := attest.Claim{Serial: "SN-w-01", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, Peer: nodeAddr(0) + ":40000", Proven: time.Now(),
			LLDP: &attest.LLDP{ChassisIDSubtype: 4, ChassisID: "74:ac:b9:11:22:33", PortIDSubtype: 7, PortID: "Port 1", SystemName: memSwitch}}
		a, err := d0.admit(ctx, claim)
		if err != nil || a.InstallCode == "" {
			t.Fatalf("fleetd-0's admission: %+v, %v", a, err)
		}
		flush(t, d0)
		dev, err := w.netBox(t, memOperator, "folly").DeviceBySerial(ctx, "SN-w-01")
		named := dev.LastRun
		if err != nil || named == "" {
			t.Fatalf("fleetd-0's admission named no run: %v", err)
		}
		// As it stands before fleetd-0 records its run.
		if err := w.nbsrv.EditCustomField(memAuthor, dev.ID, "last_run", nil); err != nil {
			t.Fatal(err)
		}
		_, err = d1.admit(ctx, claim)
		if !errors.Is(err, attest.ErrAdmitLater) || !errors.Is(err, provision.ErrRunRaced) {
			t.Fatalf("fleetd-1's admission beside the starting run %s: %v, want attest.ErrAdmitLater", named, err)
		}
		if got := metricValue(t, d1, `fleet_admissions_total{outcome="later"}`); got != 1 {
			t.Errorf("admissions tried later counted: %v, want 1", got)
		}
		if !strings.Contains(audit.String(), named+", which NetBox does not name yet") {
			t.Errorf("fleetd-1's attest.install line does not name the starting run %s:\n%s", named, audit)
		}
		// fleetd-0 records its run: the machine's next try is decided.
		if err := w.nbsrv.EditCustomField(memAuthor, dev.ID, "last_run", named); err != nil {
			t.Fatal(err)
		}
		again, err := d0.admit(ctx, claim)
		if err != nil || again.InstallCode != a.InstallCode {
			t.Errorf("the next try at fleetd-0, which holds the run's code: %v, a code of the same run %v; want its code", err, again.InstallCode == a.InstallCode)
		}
	})
}

// A replica's served line whose write got no answer in time, but which
// NetBox was still finishing (it lands a second after the replica gave
// up), is journaled once: the queue looks for it only after servedSettle.
func TestServedLineLandingLateIsNotWrittenTwice(t *testing.T) {
	w := newMemWorld(t, "w-01")
	var late atomic.Bool
	w.wrapFleetd = func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/api/extras/journal-entries/") || late.Swap(true) {
				h.ServeHTTP(rw, r)
				return
			}
			// The first journal write: NetBox finishes it a second after
			// its client gave up.
			body, _ := io.ReadAll(r.Body)
			landed := make(chan struct{})
			go func() {
				time.Sleep(servedWriteTimeout + time.Second)
				req := r.Clone(context.WithoutCancel(r.Context()))
				req.Body = io.NopCloser(bytes.NewReader(body))
				h.ServeHTTP(httptest.NewRecorder(), req)
				close(landed)
			}()
			<-r.Context().Done()
			http.Error(rw, "gateway timeout", http.StatusGatewayTimeout)
			<-landed
		})
	}
	synctest.Test(t, func(t *testing.T) {
		d, _ := w.fleetd(t)
		dev := w.devices["w-01"]
		const text = "fleetd served the config of provision-w-01-1767225600"
		d.servedNow(dev.ID, "w-01", text)
		time.Sleep(servedSettle + servedWriteTimeout)
		synctest.Wait()
		flush(t, d)
		w.wantJournal(t, "w-01", "the served line landed late", "success: "+text)
	})
}

// A replica writes a served config's line before its status: killed
// between the two writes (here NetBox does not answer the status in time,
// and the journal is read before the queue writes it again), it leaves the line in
// NetBox and the device planned, for the provision loop to take active
// once the node registers, never active with no line that says why.
func TestReplicaWritesServedLineBeforeStatus(t *testing.T) {
	w := newMemWorld(t, "w-01")
	var hung atomic.Bool
	var mu sync.Mutex
	var writes []string
	w.wrapFleetd = func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				mu.Lock()
				writes = append(writes, r.Method+" "+r.URL.Path)
				mu.Unlock()
			}
			if r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/api/dcim/devices/") && !hung.Swap(true) {
				<-r.Context().Done()
				http.Error(rw, "gateway timeout", http.StatusGatewayTimeout)
				return
			}
			h.ServeHTTP(rw, r)
		})
	}
	synctest.Test(t, func(t *testing.T) {
		d, _ := w.fleetd(t)
		dev := w.devices["w-01"]
		mu.Lock()
		writes = nil
		mu.Unlock()
		const text = "fleetd served the config of provision-w-01-1767225600"
		d.servedNow(dev.ID, "w-01", text)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		// The status NetBox did not take goes to the queue, which sends it
		// again at once.
		if len(writes) != 3 || !strings.HasPrefix(writes[0], "POST /api/extras/journal-entries/") ||
			!strings.HasPrefix(writes[1], "PATCH /api/dcim/devices/") || writes[2] != writes[1] {
			t.Errorf("the replica's NetBox writes: %q, want the journal line, then the status, then the queue's second try of it", writes)
		}
		w.wantJournal(t, "w-01", "the status not taken", "success: "+text)
	})
}

// A replica writes a missing line in the fetch that will be told 404, not
// through its queue, which dies with it: the node, told 404, does not ask
// again, and nothing else would tell the operator. When NetBox does not
// take the line, the fetch fails (503): the node asks again, and the next
// ask writes the line, counting both.
func TestReplicaWritesMissingLineAtOnce(t *testing.T) {
	w := newMemWorld(t, "w-01")
	var refuse atomic.Int64 // NetBox's answer to the next journal write
	w.answerJournalWrites(func() int { return int(refuse.Swap(0)) })
	synctest.Test(t, func(t *testing.T) {
		d, _ := w.fleetd(t, replicaOfTwo)
		// The queue is busy: a line it held would not reach NetBox.
		release := make(chan struct{})
		defer close(release)
		d.journal.Do(func(context.Context) error { <-release; return nil })
		node := netip.MustParseAddr(nodeAddr(0))
		ctx := context.Background()
		const text = "the node asked for its Talos config, and fleetd holds none for it"

		// NetBox refuses the line: the fetch gets the error, not 404.
		refuse.Store(http.StatusServiceUnavailable)
		if err := d.recordMissing(ctx, node); err == nil {
			t.Fatal("recordMissing with the line refused: nil, want an error (503 to the node)")
		}
		w.wantJournal(t, "w-01", "after a refused line")
		// The node asks again: the line is written before the answer, and
		// counts both asks.
		if err := d.recordMissing(ctx, node); err != nil {
			t.Fatal(err)
		}
		got := w.journal(t, "w-01")
		if len(got) != 1 || !strings.HasPrefix(got[0], "warning: "+text+" (asked 2 times since ") {
			t.Errorf("w-01's journal once the replica could answer 404: %q, want the missing line, asked 2 times", got)
		}
		// A third ask within the minute writes nothing more.
		if err := d.recordMissing(ctx, node); err != nil {
			t.Fatal(err)
		}
		w.wantJournal(t, "w-01", "after a third ask", got...)
	})
}

// A replica's started line that NetBox does not take (it answers 503) is
// written later, once: the replica answers the code at once and hands the
// line to its queue, which looks for it in NetBox's journal after
// servedSettle.
func TestReplicaStartedLineNetBoxDidNotTake(t *testing.T) {
	w := newMemWorld(t, "w-01")
	var refuse atomic.Int64 // NetBox's answer to the next journal write
	refuse.Store(http.StatusServiceUnavailable)
	w.answerJournalWrites(func() int { return int(refuse.Swap(0)) })
	synctest.Test(t, func(t *testing.T) {
		d, _ := w.fleetd(t, replicaOfTwo)
		dev := w.devices["w-01"]
		got, err := d.prov.Admit(context.Background(), provision.Claim{
			Serial:      dev.Serial,
			Attestation: inventory.Attestation{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, SwitchPort: dev.SwitchPort, At: time.Now(), Verdict: "attested"},
			From:        dev.Address.Addr(),
			CheckPort:   func(int) error { return nil },
		})
		if err != nil || got.Outcome != provision.Provision || got.Code == "" {
			t.Fatalf("Admit = %+v, %v; want a provision run with its code", got, err)
		}
		if refuse.Load() != 0 {
			t.Fatal("the started line was never written")
		}
		w.wantJournal(t, "w-01", "right after NetBox refused the started line")
		time.Sleep(servedSettle + time.Second)
		synctest.Wait()
		flush(t, d)
		w.wantJournal(t, "w-01", "after servedSettle", fmt.Sprintf("info: started Workflow %s; the machine attested from HookOS at %s", got.Run, dev.Address.Addr()))
	})
}
