package provision

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/fleetkit/fleet/inventory"
)

// memNetBox is an in-memory NetBox holding devices and their journals.
type memNetBox struct {
	mu      sync.Mutex
	devs    map[int64]*inventory.Device
	journal []journalLine
	calls   int
	down    bool // every call answers inventory.ErrUnavailable

	journalReads int // JournalHas calls
	// lostAnswers: the next UpdateDevice calls write, then answer as if
	// NetBox had not (its answer lost, or the caller's context ended).
	lostAnswers int
	// journalDown: the next Journal calls answer inventory.ErrUnavailable
	// and write nothing.
	journalDown int
}

type journalLine struct {
	ID   int64
	Kind inventory.JournalKind
	Text string
}

func newMemNetBox(devs ...inventory.Device) *memNetBox {
	nb := &memNetBox{devs: map[int64]*inventory.Device{}}
	for _, d := range devs {
		nb.devs[d.ID] = &d
	}
	return nb
}

func (nb *memNetBox) call() error {
	nb.calls++
	if nb.down {
		return fmt.Errorf("GET /api/dcim/devices/: %w", inventory.ErrUnavailable)
	}
	return nil
}

func (nb *memNetBox) DeviceBySerial(_ context.Context, serial string) (inventory.Device, error) {
	return nb.find(func(d *inventory.Device) bool { return d.Serial == serial })
}

func (nb *memNetBox) Device(_ context.Context, id int64) (inventory.Device, error) {
	return nb.find(func(d *inventory.Device) bool { return d.ID == id })
}

// find is one call that answers the device match takes.
func (nb *memNetBox) find(match func(*inventory.Device) bool) (inventory.Device, error) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if err := nb.call(); err != nil {
		return inventory.Device{}, err
	}
	for _, d := range nb.devs {
		if match(d) {
			return *d, nil
		}
	}
	return inventory.Device{}, inventory.ErrNotFound
}

func (nb *memNetBox) Devices(context.Context) ([]inventory.Device, error) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if err := nb.call(); err != nil {
		return nil, err
	}
	out := make([]inventory.Device, 0, len(nb.devs))
	for _, d := range nb.devs {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b inventory.Device) int { return int(a.ID - b.ID) })
	return out, nil
}

func (nb *memNetBox) update(id int64, f func(*inventory.Device)) error {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if err := nb.call(); err != nil {
		return err
	}
	d, ok := nb.devs[id]
	if !ok {
		return inventory.ErrNotFound
	}
	f(d)
	return nil
}

func (nb *memNetBox) RecordMAC(_ context.Context, id int64, mac net.HardwareAddr) error {
	return nb.update(id, func(d *inventory.Device) { d.MAC = mac })
}

func (nb *memNetBox) UpdateDevice(_ context.Context, id int64, u inventory.Update) (err error) {
	defer func() {
		nb.mu.Lock()
		defer nb.mu.Unlock()
		if nb.lostAnswers > 0 {
			nb.lostAnswers--
			err = fmt.Errorf("PATCH /api/dcim/devices/%d/: %w", id, context.Canceled)
		}
	}()
	return nb.update(id, func(d *inventory.Device) {
		if a := u.Attestation; a != nil {
			d.AttestedEKHash, d.AttestedEKHashECC = a.EKHash, a.EKHashECC
			d.AttestedSwitchPort, d.AttestedAt, d.AttestVerdict = a.SwitchPort, a.At, a.Verdict
			d.AttestedSecureBoot, d.AttestedPCR7 = a.SecureBoot, a.PCR7
		}
		if u.LastRun != nil {
			d.LastRun = *u.LastRun
		}
		if u.DesiredAction != nil {
			d.DesiredAction = *u.DesiredAction
		}
	})
}

func (nb *memNetBox) SetDesiredAction(_ context.Context, id int64, action string) error {
	return nb.update(id, func(d *inventory.Device) { d.DesiredAction = action })
}

func (nb *memNetBox) SetStatus(_ context.Context, id int64, st inventory.Status) error {
	return nb.update(id, func(d *inventory.Device) { d.Status = st })
}

func (nb *memNetBox) SetLastRun(_ context.Context, id int64, run string) error {
	return nb.update(id, func(d *inventory.Device) { d.LastRun = run })
}

func (nb *memNetBox) Journal(_ context.Context, id int64, kind inventory.JournalKind, text string) error {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	if err := nb.call(); err != nil {
		return err
	}
	if nb.journalDown > 0 {
		nb.journalDown--
		return fmt.Errorf("POST /api/extras/journal-entries/: %w", inventory.ErrUnavailable)
	}
	nb.journal = append(nb.journal, journalLine{id, kind, text})
	return nil
}

// JournalHas makes memNetBox a JournalReader. Its reads are counted in
// journalReads, not calls.
func (nb *memNetBox) JournalHas(_ context.Context, id int64, kind inventory.JournalKind, text string) (bool, error) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	nb.journalReads++
	if nb.down {
		return false, fmt.Errorf("GET /api/extras/journal-entries/: %w", inventory.ErrUnavailable)
	}
	return slices.Contains(nb.journal, journalLine{id, kind, text}), nil
}

// fail makes every later call answer inventory.ErrUnavailable.
func (nb *memNetBox) fail() {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	nb.down = true
}

func (nb *memNetBox) id(id int64) int64 { return id }

// callCount is the number of calls so far, JournalHas's aside.
func (nb *memNetBox) callCount() int {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	return nb.calls
}

func (nb *memNetBox) dev(id int64) inventory.Device {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	return *nb.devs[id]
}

func (nb *memNetBox) set(id int64, f func(*inventory.Device)) {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	f(nb.devs[id])
}

func (nb *memNetBox) lines() []journalLine {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	return slices.Clone(nb.journal)
}

// memConfigs hands out numbered codes and keeps what it holds.
type memConfigs struct {
	mu   sync.Mutex
	n    int
	held map[string]heldConfig
	fail error
}

type heldConfig struct {
	config []byte
	node   string
	run    string
}

func (c *memConfigs) NewCode() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return fmt.Sprintf("SECRETCODE%04d", c.n), nil
}

func (c *memConfigs) Hold(_ context.Context, code string, config []byte, device inventory.Device, run string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	if c.held == nil {
		c.held = map[string]heldConfig{}
	}
	c.held[code] = heldConfig{slices.Clone(config), device.Name, run}
	return nil
}

func (c *memConfigs) Drop(_ context.Context, run string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for code, h := range c.held {
		if h.run == run {
			delete(c.held, code)
		}
	}
	return nil
}

func (c *memConfigs) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

// auditLog records slog records as message plus attributes.
type auditLog struct {
	mu   sync.Mutex
	recs []auditRecord
}

type auditRecord struct {
	Msg   string
	Attrs map[string]string
}

func (a *auditLog) Enabled(context.Context, slog.Level) bool { return true }
func (a *auditLog) WithAttrs([]slog.Attr) slog.Handler       { return a }
func (a *auditLog) WithGroup(string) slog.Handler            { return a }
func (a *auditLog) Handle(_ context.Context, r slog.Record) error {
	rec := auditRecord{Msg: r.Message, Attrs: map[string]string{}}
	r.Attrs(func(at slog.Attr) bool {
		rec.Attrs[at.Key] = at.Value.String()
		return true
	})
	a.mu.Lock()
	a.recs = append(a.recs, rec)
	a.mu.Unlock()
	return nil
}

func (a *auditLog) records(msg string) []auditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(a.recs), func(r auditRecord) bool { return r.Msg != msg })
}

// text is every record as one string, to look for leaked secrets.
func (a *auditLog) text() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b strings.Builder
	for _, r := range a.recs {
		fmt.Fprintf(&b, "%s %v\n", r.Msg, r.Attrs)
	}
	return b.String()
}

var (
	bundleOnce sync.Once
	bundle     *secrets.Bundle
	bundleErr  error
)

// testBundle returns one secrets bundle per test binary: NewBundle takes
// about a second.
func testBundle(t testing.TB) *secrets.Bundle {
	t.Helper()
	bundleOnce.Do(func() {
		bundle, bundleErr = secrets.NewBundle(secrets.NewFixedClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), nil)
	})
	if bundleErr != nil {
		t.Fatal(bundleErr)
	}
	return bundle
}

// workerBundle is the bundle without its CA keys: what a worker needs.
func workerBundle(t testing.TB) *secrets.Bundle {
	b := *testBundle(t)
	c := *b.Certs
	etcd, k8s, agg, os := *c.Etcd, *c.K8s, *c.K8sAggregator, *c.OS
	etcd.Key, k8s.Key, agg.Key, os.Key = nil, nil, nil, nil
	c.Etcd, c.K8s, c.K8sAggregator, c.OS = &etcd, &k8s, &agg, &os
	c.K8sServiceAccount = nil
	b.Certs = &c
	return &b
}

// t0 is when a synctest bubble starts (unix 946684800): the time of the
// tests that run in one, on fakes.
var t0 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// The Talos classes of the tests: the nodes file's classes, by name.
const (
	ClassWorker       = "worker"
	ClassControlPlane = "controlplane"
)

// testClasses declares the two classes as a nodes file does.
func testClasses(workerImage, controlPlaneImage string) map[string]inventory.Class {
	return map[string]inventory.Class{
		ClassWorker:       {Name: ClassWorker, Type: inventory.Worker, InstallerImage: workerImage},
		ClassControlPlane: {Name: ClassControlPlane, Type: inventory.ControlPlane, InstallerImage: controlPlaneImage},
	}
}

// pcr7 is a quoted PCR 7 digest, as the glue hands it over.
var pcr7 = strings.Repeat("7e", 32)

// requireSecureBoot makes the worker class require Secure Boot.
func requireSecureBoot(c *Cluster, _ *Config) {
	w := c.Classes[ClassWorker]
	w.RequireSecureBoot = true
	c.Classes = map[string]inventory.Class{ClassWorker: w, ClassControlPlane: c.Classes[ClassControlPlane]}
}

func testCluster(t testing.TB) Cluster {
	return Cluster{
		Name:          "folly",
		Endpoint:      "https://10.0.0.10:6443",
		Bundle:        testBundle(t),
		ControlPlanes: true,
		Classes:       testClasses("factory.talos.dev/metal-installer/abc:v1.13.9", "factory.talos.dev/metal-installer/def:v1.13.9"),
		ExtraSANs:     []string{"api.folly.example"},
	}
}

// worker is a planned worker that holds every field a run needs but its
// MAC, which its first attestation records.
func worker(id int64, name string) inventory.Device {
	return inventory.Device{
		ID: id, Name: name, Serial: "SER-" + name, Status: inventory.StatusPlanned,
		Model: "nuc13", Class: ClassWorker, BMC: "amt",
		Address:     netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte((20 + id) / 256), byte((20 + id) % 256)}), 24),
		SwitchPort:  int(id),
		InstallDisk: "/dev/nvme0n1", InstallDiskSerial: "DISK-" + name,
		ApprovedEKHash: strings.Repeat("a", 64),
	}
}

func macOf(id int64) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0, 0, 0, 0, byte(id)}
}

// attested is dev as it stands after an attestation recorded its MAC and
// port.
func attested(dev inventory.Device) inventory.Device {
	dev.MAC = macOf(dev.ID)
	dev.AttestedSwitchPort = dev.SwitchPort
	dev.AttestVerdict = "attested"
	return dev
}

func claimOf(dev inventory.Device) Claim {
	return Claim{
		Serial: dev.Serial,
		Attestation: inventory.Attestation{
			MAC: macOf(dev.ID), EKHash: dev.ApprovedEKHash, SwitchPort: dev.SwitchPort, At: t0, Verdict: "attested",
		},
		From:      dev.Address.Addr(),
		CheckPort: portCheck(dev.SwitchPort),
	}
}

// portCheck judges a claimed port as lldpwait does, in its words.
func portCheck(claimed int) func(declared int) error {
	return func(declared int) error {
		if claimed != declared {
			return fmt.Errorf("on port %d, expected %d", claimed, declared)
		}
		return nil
	}
}

// A netboxView is a test's own access to the harness's NetBox, behind
// fleet's back: memNetBox, or netboxtest through its API (netBoxView). It
// names devices by the IDs the test gave them; id is the NetBox's own.
type netboxView interface {
	dev(id int64) inventory.Device
	set(id int64, f func(*inventory.Device))
	lines() []journalLine
	fail() // every later call answers inventory.ErrUnavailable
	id(id int64) int64
}

type harness struct {
	t       testing.TB
	nb      netboxView
	nbAPI   NetBox                     // Deps.NetBox: mem, or netboxtest's client
	mem     *memNetBox                 // nil on netboxtest (newNetBoxHarness)
	kube    *kubefake.Clientset        // nil on the real apiserver (newRealHarness)
	tink    *dynfake.FakeDynamicClient // nil on the real apiserver
	kubeAPI kubernetes.Interface       // kube, or the real apiserver's
	tinkAPI dynamic.Interface          // tink, or the real apiserver's
	ns      string                     // Config.Namespace
	configs *memConfigs
	audit   *auditLog
	cluster Cluster
	cfg     Config
	p       *Provisioner
	booted  []string

	mu     sync.Mutex
	events []runEvent // Config.RunStarted and RunEnded, in order
}

// runEvent is one call of Config.RunStarted ("started") or
// Config.RunEnded.
type runEvent struct {
	kind    RunKind
	outcome string
	took    time.Duration
}

func (h *harness) runEvent(e runEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

// wantRunEvents fails unless Config.RunStarted and RunEnded were called
// as want says, in order.
func (h *harness) wantRunEvents(want ...runEvent) {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.Equal(h.events, want) {
		h.t.Errorf("reported %+v, want %+v", h.events, want)
	}
}

// newHarness builds a Provisioner over fakes; edit tunes its Cluster and
// Config first. A test that reads the time the runs are named by, or waits
// for a timeout, runs in a synctest bubble, where the clock starts at t0.
func newHarness(t testing.TB, edit func(*Cluster, *Config), devs ...inventory.Device) *harness {
	t.Helper()
	kube := kubefake.NewClientset()
	tink := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		WorkflowResource: "WorkflowList",
		HardwareResource: "HardwareList",
		MachineResource:  "MachineList",
		JobResource:      "JobList",
		TaskResource:     "TaskList",
	})
	h := newHarnessOn(t, kube, tink, "tinkerbell", edit, devs...)
	h.kube, h.tink = kube, tink
	return h
}

// newHarnessOn builds a Provisioner over an in-memory NetBox of devs and
// the clusters kube and tink, its runs in namespace ns.
func newHarnessOn(t testing.TB, kube kubernetes.Interface, tink dynamic.Interface, ns string, edit func(*Cluster, *Config), devs ...inventory.Device) *harness {
	t.Helper()
	mem := newMemNetBox(devs...)
	h := &harness{t: t, nb: mem, nbAPI: mem, mem: mem, kubeAPI: kube, tinkAPI: tink, ns: ns,
		configs: &memConfigs{}, audit: &auditLog{}, cluster: testCluster(t)}
	h.setConfig(edit)
	return h
}

// A cluster is what a test body runs on: "fakes", client-go's fakes in a
// synctest bubble whose clock starts at t0 and moves only as the test
// sleeps, "apiserver", the test binary's kube-apiserver
// (internal/kubetest) on real time, or "netbox", the fakes on real time
// with netboxtest as the NetBox. A body reads the names and times it
// expects off the clock (runNamed, runTime), so that it holds on each.
type cluster struct {
	name    string
	harness func(testing.TB, func(*Cluster, *Config), ...inventory.Device) *harness
}

// fakes is the cluster of newHarness.
var fakes = cluster{"fakes", newHarness}

func (c cluster) apiserver() bool { return c.name == "apiserver" }

// onClusters runs body on each of cs, a subtest each, the fakes in a
// bubble; without cs, on the fakes and on the apiserver.
func onClusters(t *testing.T, body func(t *testing.T, c cluster), cs ...cluster) {
	if len(cs) == 0 {
		cs = []cluster{fakes, apiserver}
	}
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			if c.name != fakes.name {
				body(t, c)
				return
			}
			synctest.Test(t, func(t *testing.T) { body(t, c) })
		})
	}
}

// inBubble runs body as subtest name, in a synctest bubble.
func inBubble(t *testing.T, name string, body func(t *testing.T)) {
	t.Run(name, func(t *testing.T) { synctest.Test(t, body) })
}

// startWorker starts node-01's run on c through its attestation (edit, if
// not nil, tunes the device first), and returns the run's name and its
// started line.
func (c cluster) startWorker(t *testing.T, edit func(*inventory.Device)) (h *harness, run string, started journalLine) {
	t.Helper()
	dev := worker(1, "node-01")
	if edit != nil {
		edit(&dev)
	}
	h = c.harness(t, nil, dev)
	run = h.admitStarts(dev).Run
	return h, run, journalLine{1, inventory.JournalInfo, "started Workflow " + run + "; the machine attested from HookOS at 10.0.0.21"}
}

// admitStarts admits dev's claim, and fails the test unless it started a
// provision run of dev, named for a second of the admission, with its
// code.
func (h *harness) admitStarts(dev inventory.Device) Decision {
	h.t.Helper()
	since := time.Now()
	d, err := h.p.Admit(context.Background(), claimOf(dev))
	if err != nil || d.Outcome != Provision || !runNamed(d.Run, "provision-"+dev.Name+"-", since) || d.Code == "" {
		h.t.Fatalf("Admit(%s) = %+v, %v; want a run started, with its code", dev.Name, d, err)
	}
	return d
}

// passStarts runs a pass, and fails the test unless it started one run,
// named prefix and a second of the pass; it returns the run.
func (h *harness) passStarts(prefix string) string {
	h.t.Helper()
	since := time.Now()
	pass := h.reconcile()
	if len(pass.Started) != 1 || !runNamed(pass.Started[0], prefix, since) {
		h.t.Fatalf("pass = %+v, want one run started, %s<unix seconds>", pass, prefix)
	}
	return pass.Started[0]
}

// rerun sets node-01's desired_action to provision once the second run is
// named by passed, and returns the new run the machine's attestation
// then starts, named for a time since, with its code.
func (h *harness) rerun(run string) Decision {
	h.t.Helper()
	sleepPast(run)
	h.nb.set(1, func(d *inventory.Device) { d.DesiredAction = inventory.DesiredActionProvision })
	d := h.admitStarts(h.nb.dev(1))
	if d.Run == run {
		h.t.Fatalf("Admit after desired_action = %+v; want a new run", d)
	}
	return d
}

// runNamed reports whether name is prefix and the unix seconds of a time
// from since to now: a run started in that span. In a bubble whose clock
// did not move since, the name holds since's second exactly.
func runNamed(name, prefix string, since time.Time) bool {
	secs, err := strconv.ParseInt(strings.TrimPrefix(name, prefix), 10, 64)
	return err == nil && strings.HasPrefix(name, prefix) && secs >= since.Unix() && secs <= time.Now().Unix()
}

// runTime is the time a run is named by: its render time, to the second.
func runTime(run string) time.Time {
	secs, _ := strconv.ParseInt(run[strings.LastIndexByte(run, '-')+1:], 10, 64)
	return time.Unix(secs, 0).UTC()
}

// sleepPast sleeps until the second after the one run is named by, so that
// a run started next gets another name.
func sleepPast(run string) {
	time.Sleep(time.Until(runTime(run).Add(time.Second)))
}

// setConfig sets the Config every harness starts from, lets edit tune it
// and the Cluster, and starts the Provisioner.
func (h *harness) setConfig(edit func(*Cluster, *Config)) {
	h.t.Helper()
	h.cfg = Config{
		Namespace:     h.ns,
		AutoProvision: true,
		ConfigTTL:     time.Hour,
		PortCheck: func(declared, recorded int) error {
			switch {
			case recorded == 0:
				return fmt.Errorf("recorded no attested switch port")
			case recorded != declared:
				return fmt.Errorf("on port %d, expected %d", recorded, declared)
			}
			return nil
		},
		BootedHookOSAfterInstall: func(node string) { h.booted = append(h.booted, node) },
		RunStarted:               func(k RunKind) { h.runEvent(runEvent{kind: k, outcome: "started"}) },
		RunEnded:                 func(k RunKind, outcome string, took time.Duration) { h.runEvent(runEvent{k, outcome, took}) },
		Logger:                   slog.New(h.audit),
	}
	if edit != nil {
		edit(&h.cluster, &h.cfg)
	}
	h.restart()
}

// restart replaces the Provisioner with a new one over the same NetBox
// and cluster, as a fleetd restart does.
func (h *harness) restart() {
	h.t.Helper()
	h.p = h.another(nil)
}

// another is another replica beside h's Provisioner, over h's NetBox,
// clusters and Config as edit leaves them.
func (h *harness) another(edit func(*Deps, *Config)) *Provisioner {
	h.t.Helper()
	deps, cfg := h.deps(), h.cfg
	if edit != nil {
		edit(&deps, &cfg)
	}
	p, err := New(deps, h.cluster, &cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// deps are the harness's NetBox, clusters and Configs.
func (h *harness) deps() Deps {
	return Deps{NetBox: h.nbAPI, Kube: h.kubeAPI, Tink: h.tinkAPI, Configs: h.configs}
}

// admit admits c, and fails the test on an error.
func (h *harness) admit(c Claim) Decision {
	h.t.Helper()
	d, err := h.p.Admit(context.Background(), c)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

func (h *harness) reconcile() Pass {
	h.t.Helper()
	pass, err := h.p.Reconcile(context.Background())
	if err != nil {
		h.t.Fatalf("Reconcile: %v", err)
	}
	return pass
}

func (h *harness) workflows() []tinkerbell.Workflow {
	h.t.Helper()
	l, err := h.tinkAPI.Resource(WorkflowResource).Namespace(h.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []tinkerbell.Workflow
	for _, u := range l.Items {
		var wf tinkerbell.Workflow
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &wf); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, wf)
	}
	return out
}

func (h *harness) workflow(name string) (wf tinkerbell.Workflow) {
	h.t.Helper()
	h.get(WorkflowResource, name, &wf)
	return wf
}

// setStatus plays Tinkerbell: it sets a Workflow's status, through the
// status subresource as Tinkerbell must (an Update of the Workflow leaves
// its status as it was on the real apiserver).
func (h *harness) setStatus(name string, f func(*tinkerbell.WorkflowStatus)) {
	h.t.Helper()
	wf := h.workflow(name)
	f(&wf.Status)
	u, err := toUnstructured(&wf, tinkerbell.GroupVersion.WithKind("Workflow"))
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.tinkAPI.Resource(WorkflowResource).Namespace(h.ns).UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// get reads one object of the harness's namespace into obj.
func (h *harness) get(gvr schema.GroupVersionResource, name string, obj any) {
	h.t.Helper()
	u, err := h.tinkAPI.Resource(gvr).Namespace(h.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		h.t.Fatal(err)
	}
}

// create creates obj, of kind in gvk's group, in the harness's namespace,
// and then its status, through the status subresource as a controller
// writes it; obj then holds what the server answered.
func (h *harness) create(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, obj any, status func()) {
	h.t.Helper()
	c := h.tinkAPI.Resource(gvr).Namespace(h.ns)
	u, err := c.Create(context.Background(), unstructuredOf(h.t, obj, gvk), metav1.CreateOptions{})
	if err == nil {
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
	}
	if err == nil && status != nil {
		status()
		_, err = c.UpdateStatus(context.Background(), unstructuredOf(h.t, obj, gvk), metav1.UpdateOptions{})
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) secrets() []corev1.Secret {
	h.t.Helper()
	l, err := h.kubeAPI.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + managedBy})
	if err != nil {
		h.t.Fatal(err)
	}
	return l.Items
}

func (h *harness) count(gvr schema.GroupVersionResource) int {
	h.t.Helper()
	l, err := h.tinkAPI.Resource(gvr).Namespace(h.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return len(l.Items)
}

// wantJournal fails unless the journal of id holds exactly want.
func (h *harness) wantJournal(id int64, want ...journalLine) {
	h.t.Helper()
	got := slices.DeleteFunc(h.nb.lines(), func(l journalLine) bool { return l.ID != id })
	if !slices.Equal(got, want) {
		h.t.Errorf("journal of device %d:\n got %+v\nwant %+v", id, got, want)
	}
}

// wantDesired fails unless device id's desired_action is provision: kept
// or set again for a run that waits.
func (h *harness) wantDesired(id int64) {
	h.t.Helper()
	if got := h.nb.dev(id).DesiredAction; got != inventory.DesiredActionProvision {
		h.t.Errorf("device %d: desired_action %q, want provision", id, got)
	}
}

// wantLastRun fails unless device id's last_run is run and its
// desired_action is cleared: run started.
func (h *harness) wantLastRun(id int64, run string) {
	h.t.Helper()
	if got := h.nb.dev(id); got.LastRun != run || got.DesiredAction != "" {
		h.t.Errorf("device %d: last_run %q, desired_action %q; want %s and none", id, got.LastRun, got.DesiredAction, run)
	}
}

// wantNoRun fails if any token, config or Workflow exists: a run that did
// not start (the device's Hardware and Rufio Machine, which describe the
// machine for every run, may).
func (h *harness) wantNoRun() {
	h.t.Helper()
	if n := len(h.secrets()); n != 0 {
		h.t.Errorf("%d bootstrap token Secrets exist, want none", n)
	}
	if n := h.configs.count(); n != 0 {
		h.t.Errorf("%d configs held, want none", n)
	}
	if n := h.count(WorkflowResource); n != 0 {
		h.t.Errorf("%d Workflows exist, want none", n)
	}
}

// wantNothingCreated fails if any token, config, Hardware or Workflow
// exists.
func (h *harness) wantNothingCreated() {
	h.t.Helper()
	h.wantNoRun()
	if n := h.count(HardwareResource); n != 0 {
		h.t.Errorf("%d Hardware objects exist, want none", n)
	}
}

// wantNoSecretsLogged fails if a code or token appears in the audit log.
func (h *harness) wantNoSecretsLogged() {
	h.t.Helper()
	text := h.audit.text()
	if strings.Contains(text, "SECRETCODE") {
		h.t.Errorf("an install code appears in the log:\n%s", text)
	}
	for _, s := range h.secrets() {
		if tok := string(s.Data["token-secret"]); tok != "" && strings.Contains(text, tok) {
			h.t.Errorf("a bootstrap token appears in the log:\n%s", text)
		}
	}
	for _, l := range h.nb.lines() {
		if strings.Contains(l.Text, "SECRETCODE") {
			h.t.Errorf("an install code appears in the journal: %q", l.Text)
		}
	}
}

func unstructuredOf(t testing.TB, obj any, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	t.Helper()
	u, err := toUnstructured(obj, gvk)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
