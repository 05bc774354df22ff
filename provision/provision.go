package provision

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetkit/fleet/inventory"
)

// NetBox is what provision needs of NetBox: inventory's client has these
// methods. Every method takes a context and returns an error that wraps
// inventory.ErrUnavailable when NetBox did not answer. Admit writes an
// attestation with RecordMAC (only when the device does not hold the
// claimed MAC yet) and one UpdateDevice, which carries the last_run and
// desired_action of the run it starts.
type NetBox interface {
	DeviceBySerial(ctx context.Context, serial string) (inventory.Device, error)
	Device(ctx context.Context, id int64) (inventory.Device, error)
	Devices(ctx context.Context) ([]inventory.Device, error)
	RecordMAC(ctx context.Context, id int64, mac net.HardwareAddr) error
	UpdateDevice(ctx context.Context, id int64, u inventory.Update) error
	SetDesiredAction(ctx context.Context, id int64, action string) error
	SetLastRun(ctx context.Context, id int64, run string) error
	SetStatus(ctx context.Context, id int64, s inventory.Status) error
	Journal(ctx context.Context, id int64, kind inventory.JournalKind, text string) error
}

// A JournalReader is a NetBox that can tell whether a device's journal
// holds a line (inventory's client is one). The loop journals a run's end,
// then marks its Workflow; a process stopped between the two, or a leader
// that lost its Lease there, leaves the mark to the next pass. With a
// JournalReader, a Provisioner's first passes (after New, and whenever Run
// starts, until one pass ends without an error) ask NetBox before they
// journal a run's end, so that no end is journaled twice; without one,
// such a line may be written twice.
type JournalReader interface {
	JournalHas(ctx context.Context, id int64, kind inventory.JournalKind, text string) (bool, error)
}

// Configs is where rendered configs go: fleetd wires configserve here.
// Both methods must be safe for concurrent use.
type Configs interface {
	// NewCode returns a fresh install code. The code is a secret.
	NewCode() (string, error)
	// Hold keeps config for device under code, for run, until it is served
	// or expires: the arguments in configserve.Server.Put's order. provision
	// calls Hold after it creates the run's Workflow and before the run's
	// code is answered; an error stops the run.
	Hold(ctx context.Context, code string, config []byte, device inventory.Device, run string) error
	// Drop lets go of the config held for run, wherever it waits (fleetd's
	// replicas ask each other), for a run that was replaced, deleted, or
	// ended without success, or that did not start: no node may fetch it
	// any more. A run with no config waiting is no error; an error is
	// logged, and the config expires at its TTL.
	Drop(ctx context.Context, run string) error
}

// Deps are the parts a Provisioner drives. Every field is required.
type Deps struct {
	// NetBox holds the devices: inventory's client.
	NetBox NetBox
	// Kube is the API of the cluster the nodes join, where the bootstrap
	// token Secrets go.
	Kube kubernetes.Interface
	// Tink is a dynamic client of the cluster that holds Tinkerbell's and
	// Rufio's objects (often the same cluster).
	Tink dynamic.Interface
	// Configs is where rendered configs go, under their install codes.
	Configs Configs
}

// Cluster holds the facts of the cluster every node joins. All fields
// without a stated default are required; New reports the first missing one.
type Cluster struct {
	// Name is the Kubernetes cluster name, e.g. "folly".
	Name string
	// Endpoint is the control plane endpoint URL, e.g.
	// "https://10.0.0.10:6443" (API_SERVER_IP).
	Endpoint string
	// KubernetesVersion; "" means machinery's default.
	KubernetesVersion string
	// TalosVersion is the Talos version contract the configs are rendered
	// for, e.g. "v1.13"; "" means machinery's current contract.
	TalosVersion string
	// Bundle is the cluster's Talos secrets bundle. Workers need only its
	// certificates and tokens; control planes need its CA keys too.
	Bundle *secrets.Bundle
	// ControlPlanes turns on control-plane runs (homelab.fleetd.controlPlanes).
	// false: a control plane is refused before anything is rendered.
	ControlPlanes bool
	// Classes maps each Talos class a device may have (NetBox's class field)
	// to its machine type and installer image, as the nodes file declares
	// them (inventory.Inventory.Classes). A device whose class is not here,
	// or has no installer image, is refused before anything is rendered.
	Classes map[string]inventory.Class
	// Gateway is the default gateway of K8S_NODE_CIDR; the zero Addr means
	// the first address of each node's prefix.
	Gateway netip.Addr
	// ExtraSANs are API server certificate SANs besides the control planes'
	// addresses (e.g. API_SERVER_IP's DNS name).
	ExtraSANs []string
	// FirstControlPlane is the address of the cluster's first control
	// plane (API_SERVER_IP), which the Talos root bootstraps etcd on: a
	// device at it never gets a run, of any kind, whatever desired_action
	// says (ErrFirstControlPlane). The zero Addr means Endpoint's host,
	// when that is an IP address.
	FirstControlPlane netip.Addr
}

// firstControlPlane is FirstControlPlane, or Endpoint's host.
func (c Cluster) firstControlPlane() netip.Addr {
	if c.FirstControlPlane.IsValid() {
		return c.FirstControlPlane.Unmap()
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// Config holds provision's optional settings. A nil *Config means every
// default below. A Config must not change after New.
type Config struct {
	// Namespace of the Tinkerbell and Rufio objects; "" means "tinkerbell".
	Namespace string
	// ProvisionTemplate is the Template a provision run uses; "" means
	// "fleet-provision".
	ProvisionTemplate string
	// RetireTemplate is the Template a retirement (wipe) run uses; "" means
	// "fleet-retire".
	RetireTemplate string
	// BMCSecret names the Secret (in Namespace) with the BMC credentials that
	// a Rufio Machine provision creates refers to; "" means "bmc-auth".
	BMCSecret string
	// AutoProvision provisions a planned worker at its first attestation.
	// false: every run waits for desired_action=provision.
	AutoProvision bool
	// ConfigTTL is FLEET_CONFIG_TTL, how long a rendered config waits to be
	// fetched; 0 means one hour. A bootstrap token expires ConfigTTL + 4 h
	// after its render.
	ConfigTTL time.Duration
	// GlobalTimeout is a run's global timeout when its Workflow reports none
	// (Tinkerbell reports it once it rendered the template); 0 means 2 h.
	GlobalTimeout time.Duration
	// PowerRetry is how long after a Rufio job the BMC failed the loop
	// waits before it power-cycles the machine again; 0 means 30 minutes.
	// A job that failed on Rufio's side, with no BMC task failed, waits the
	// lesser of a minute and PowerRetry.
	PowerRetry time.Duration
	// Interval is the loop's poll interval; 0 means 15 s. After an error the
	// loop backs off, doubling up to 5 minutes.
	Interval time.Duration
	// PortCheck judges the switch port a device recorded at its last
	// attestation against the one it declares, for runs started from
	// desired_action without a fresh claim; fleetd wires lldpwait's check.
	// nil: the loop starts no run without a fresh claim (the journal says
	// the device waits for an attestation), and runs start only at an
	// attestation, whose port check the caller passes to Admit.
	PortCheck func(declared, recorded int) error
	// BootedHookOSAfterInstall is called once per run, after the journal
	// line, when a node attests from HookOS after its run succeeded (for
	// FleetNodeBootedHookOSAfterInstall). nil: not called.
	BootedHookOSAfterInstall func(node string)
	// RunStarted is called once for each run this Provisioner started,
	// as its "started Workflow" line is journaled (or queued), with the
	// run's kind. nil: not called.
	RunStarted func(kind RunKind)
	// RunEnded is called once for each run whose end this Provisioner
	// journaled, after the line, with the run's kind, its outcome
	// ("success", "failed", "timeout", "passed-global-timeout",
	// "boot-job-failed", "rufio-job-failed" (the job failed on Rufio's
	// side), or "never-reported" for a run deleted because it
	// never reported its first action) and how long before the line its
	// Workflow was created. A line another process wrote (found at a
	// recheck) is not reported again. nil: not called.
	RunEnded func(kind RunKind, outcome string, took time.Duration)
	// JournalLater, when set, takes the journal lines that nothing waits
	// for (the line of a run that started) to write in the background:
	// fleetd queues them and writes what is queued with one bulk create.
	// It must not block. nil: they are written at once (NetBox.Journal),
	// and a failure is logged (fleet.journal).
	JournalLater func(id int64, kind inventory.JournalKind, text string)
	// JournalUnwritten, when set, takes the line of a run that started
	// that the Provisioner wrote at once (JournalLater nil) and NetBox did
	// not take: it did not answer, or not in time, so the line may yet
	// land. It must not block: fleetd writes the line in the background,
	// unless NetBox's journal holds it by then. nil: the failure is logged
	// (fleet.journal), and the line is lost.
	JournalUnwritten func(id int64, kind inventory.JournalKind, text string)
	// PeerCode, when set, is asked for the install code of a run that
	// waits for its machine when this Provisioner does not hold the code:
	// another replica started the run and holds it (its HeldCode). The
	// code it answers is answered to the machine only when it is the one
	// the run's Workflow names. "" and true: that replica is still
	// starting the run (HeldCode), which is not replaced, and the machine
	// tries again. nil, or no answer: the machine's attestation starts a
	// new run in place of the waiting one.
	PeerCode func(ctx context.Context, run string) (string, bool)
	// Shared says that other Provisioners (replicas) start runs in the
	// same namespace at the same time, each with a lock of its own on a
	// device: after it creates a run's Workflow, a Provisioner reads the
	// device's runs again (one more request), and when another run that
	// has not ended was created before its own, its run gives way: its
	// Workflow is deleted and the start fails with ErrRunRaced, so that
	// the machine's next attestation gets the earlier run's code
	// (PeerCode). Creation order is the API server's: the Workflows'
	// resourceVersions.
	Shared bool
	// Logger receives the audit lines (attest.install, fleet.render) and
	// the loop's errors. nil: silent.
	Logger *slog.Logger
}

// Errors that callers match with errors.Is.
var (
	// ErrControlPlanesOff: a control plane's run was refused because fleetd
	// runs without control-plane support.
	ErrControlPlanesOff = errors.New("fleetd runs without control-plane support (homelab.fleetd.controlPlanes)")
	// ErrFirstControlPlane: a run was refused because the device is at the
	// address of the cluster's first control plane (API_SERVER_IP), which
	// never installs this way.
	ErrFirstControlPlane = errors.New("the cluster's first control plane, which the Talos root bootstraps, never installs this way")
	// ErrNoBundleKeys: a control plane's run was refused because the
	// cluster's secrets bundle holds no CA keys.
	ErrNoBundleKeys = errors.New("fleetd holds no secrets bundle with the cluster's CA keys")
	// ErrBootstrapToken: the node's bootstrap token could not be created in
	// the cluster. No code is answered.
	ErrBootstrapToken = errors.New("bootstrap token")
	// ErrLacks: the device lacks a field a run needs (see LacksError).
	ErrLacks = errors.New("lacks")
	// ErrClass: the device's class has no installer image or is unknown.
	ErrClass = errors.New("unknown class")
	// ErrInvalidConfig: a rendered config failed validation.
	ErrInvalidConfig = errors.New("invalid rendered config")
)

// LacksError says which fields a device lacks for a run. errors.Is finds
// ErrLacks.
type LacksError struct {
	Node   string
	Fields []string // "MAC", "install_disk", "install_disk_serial"
}

func (e *LacksError) Error() string {
	return fmt.Sprintf("%s lacks %s", e.Node, joinAnd(e.Fields))
}

// Is reports ErrLacks.
func (e *LacksError) Is(target error) bool { return target == ErrLacks }

// Provisioner runs nodes from admission to an active node. It is safe for
// concurrent use: Admit may run on many attestations at once beside Run.
// Runs in flight live in the cluster; the install codes of the runs it
// started live only in its memory, as the configs held under them do in
// Configs, and a restart loses both (see Admit).
type Provisioner struct {
	nb      NetBox
	kube    kubernetes.Interface
	tink    dynamic.Interface
	configs Configs
	cluster Cluster
	cfg     Config
	log     *slog.Logger

	mu      sync.Mutex
	noted   map[int64]string // the last waiting line journaled per device
	devLock map[int64]*sync.Mutex
	codes   map[string]heldCode // by run name: the codes of runs this process started
	codeSeq uint64              // the last heldCode.seq given
	// journaled: the runs whose end this process journaled and has not
	// marked on the Workflow yet (the mark failed); the next pass marks
	// them without journaling again.
	journaled map[string]bool
	// succeeded: planned devices' runs that ended SUCCESS, by name, for
	// the look for their nodes (registered.go).
	succeeded map[string]succeededRun
	// recheck: passes ask NetBox (JournalReader) before they journal a
	// run's end, until one ends without an error.
	recheck atomic.Bool
}

// heldCode is the install code of a run this process started. seq orders
// it against a loop pass's listing of the runs. starting: the run's start
// has not yet rendered it and found it standing (giveWay), and its code is
// not answered; its hold tells other starts that the run is starting.
type heldCode struct {
	code     string
	seq      uint64
	starting bool
}

// New returns a Provisioner that drives deps for cluster. cfg may be nil.
// It reports the first missing part of deps or required fact of cluster.
func New(deps Deps, cluster Cluster, cfg *Config) (*Provisioner, error) {
	switch {
	case deps.NetBox == nil:
		return nil, errors.New("provision: no NetBox")
	case deps.Kube == nil:
		return nil, errors.New("provision: no Kubernetes client")
	case deps.Tink == nil:
		return nil, errors.New("provision: no Tinkerbell client")
	case deps.Configs == nil:
		return nil, errors.New("provision: no Configs")
	case cluster.Name == "":
		return nil, errors.New("provision: Cluster.Name is empty")
	case cluster.Endpoint == "":
		return nil, errors.New("provision: Cluster.Endpoint is empty")
	case cluster.Bundle == nil || cluster.Bundle.Secrets == nil || cluster.Bundle.Certs == nil || cluster.Bundle.TrustdInfo == nil || cluster.Bundle.Cluster == nil:
		return nil, errors.New("provision: Cluster.Bundle is missing or incomplete")
	}
	p := &Provisioner{nb: deps.NetBox, kube: deps.Kube, tink: deps.Tink, configs: deps.Configs, cluster: cluster,
		noted: map[int64]string{}, devLock: map[int64]*sync.Mutex{}, codes: map[string]heldCode{}, journaled: map[string]bool{}, succeeded: map[string]succeededRun{}}
	p.recheck.Store(true)
	if cfg != nil {
		p.cfg = *cfg
	}
	c := &p.cfg
	if c.Namespace == "" {
		c.Namespace = "tinkerbell"
	}
	if c.ProvisionTemplate == "" {
		c.ProvisionTemplate = "fleet-provision"
	}
	if c.RetireTemplate == "" {
		c.RetireTemplate = "fleet-retire"
	}
	if c.BMCSecret == "" {
		c.BMCSecret = "bmc-auth"
	}
	if c.ConfigTTL == 0 {
		c.ConfigTTL = time.Hour
	}
	if c.GlobalTimeout == 0 {
		c.GlobalTimeout = 2 * time.Hour
	}
	if c.PowerRetry == 0 {
		c.PowerRetry = 30 * time.Minute
	}
	if c.Interval == 0 {
		c.Interval = 15 * time.Second
	}
	p.log = c.Logger
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

// lockDevice serialises the run decisions of one device between Admit and
// the loop.
func (p *Provisioner) lockDevice(id int64) func() {
	p.mu.Lock()
	m, ok := p.devLock[id]
	if !ok {
		m = &sync.Mutex{}
		p.devLock[id] = m
	}
	p.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// note journals text for a device unless the same line was the last one
// noted for it, so that a waiting device is journaled once, not on every
// pass. A restart journals it once more.
func (p *Provisioner) note(ctx context.Context, id int64, kind inventory.JournalKind, text string) error {
	p.mu.Lock()
	same := p.noted[id] == text
	p.mu.Unlock()
	if same {
		return nil
	}
	if err := p.nb.Journal(ctx, id, kind, text); err != nil {
		return err
	}
	p.mu.Lock()
	p.noted[id] = text
	p.mu.Unlock()
	return nil
}

// holdCode keeps the install code of run, which this process is starting
// (its Workflow created): codeStands makes it answerable.
func (p *Provisioner) holdCode(run, code string) {
	p.mu.Lock()
	p.codeSeq++
	p.codes[run] = heldCode{code: code, seq: p.codeSeq, starting: true}
	p.mu.Unlock()
}

// codeStands makes the code of run, which holdCode keeps, answerable: its
// start rendered the run and found it standing.
func (p *Provisioner) codeStands(run string) {
	p.mu.Lock()
	if h, ok := p.codes[run]; ok {
		h.starting = false
		p.codes[run] = h
	}
	p.mu.Unlock()
}

// codeOf returns the install code of r when this process holds it and it
// is the code r's Workflow names (its SHA-256, compared in constant time);
// "" and true while this process is starting r.
func (p *Provisioner) codeOf(r *run) (string, bool) {
	p.mu.Lock()
	h, ok := p.codes[r.Name()]
	p.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare([]byte(CodeSHA256(h.code)), []byte(r.CodeSHA256())) != 1 {
		return "", false
	}
	if h.starting {
		return "", true
	}
	return h.code, true
}

// HeldCode returns the install code of run when this Provisioner started
// the run and it has not ended: what a replica's Config.PeerCode asks the
// others for. While the run is still starting here (its Workflow created,
// its config not yet rendered or the run not yet found standing), it
// returns "" and true: the run is not to be replaced, and its code is not
// answered yet. The code is a secret.
func (p *Provisioner) HeldCode(run string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.codes[run]
	if h.starting {
		return "", ok
	}
	return h.code, ok
}

// peerCodeOf returns the install code of r that another replica holds
// (Config.PeerCode), when it is the code r's Workflow names; "" and true
// while that replica is starting r.
func (p *Provisioner) peerCodeOf(ctx context.Context, r *run) (string, bool) {
	if p.cfg.PeerCode == nil {
		return "", false
	}
	code, ok := p.cfg.PeerCode(ctx, r.Name())
	if ok && code == "" {
		return "", true
	}
	if !ok || subtle.ConstantTimeCompare([]byte(CodeSHA256(code)), []byte(r.CodeSHA256())) != 1 {
		return "", false
	}
	return code, true
}

// dropConfig lets go of run's config wherever it waits (Configs.Drop),
// logging a failure: the config then expires at its TTL.
func (p *Provisioner) dropConfig(ctx context.Context, run string) {
	if err := p.configs.Drop(ctx, run); err != nil {
		p.log.Warn("fleet.render", "run", run, "error", "drop the config of a run that was replaced, deleted or ended without success: "+err.Error())
	}
}

// endRun lets go of what a run that was deleted or ended without success
// leaves behind: its code, its config wherever it waits, and its
// bootstrap token. Failures are logged: the config and the token expire
// on their own.
func (p *Provisioner) endRun(ctx context.Context, dev *inventory.Device, r *run) {
	p.dropCode(r.Name())
	p.dropConfig(ctx, r.Name())
	if err := p.deleteRunTokens(ctx, r); err != nil {
		p.log.Warn("fleet.render", "node", dev.Name, "run", r.Name(), "error", err.Error())
	}
}

// supersede lets go of what the runs a new run replaces leave behind:
// their configs wherever they wait, and their bootstrap tokens. Failures
// are logged.
func (p *Provisioner) supersede(ctx context.Context, dev inventory.Device, name string, superseded []*run) {
	var old []*run
	for _, r := range superseded {
		if r.Name() != name {
			p.dropConfig(ctx, r.Name())
			old = append(old, r)
		}
	}
	if err := p.deleteRunTokens(ctx, old...); err != nil {
		p.log.Warn("fleet.render", "node", dev.Name, "run", name, "error", err.Error())
	}
}

// dropCode forgets the install code of run.
func (p *Provisioner) dropCode(run string) {
	p.mu.Lock()
	delete(p.codes, run)
	p.mu.Unlock()
}

// codeMark returns what pruneCodes needs to spare the codes of runs
// started after a listing: call it before listing the runs.
func (p *Provisioner) codeMark() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.codeSeq
}

// pruneCodes forgets the codes of runs that ended, and of runs held before
// mark that the listing does not hold (deleted).
func (p *Provisioner) pruneCodes(mark uint64, runs []*run) {
	live := make(map[string]bool, len(runs))
	for _, r := range runs {
		if !r.Terminal() {
			live[r.Name()] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, h := range p.codes {
		if !live[name] && h.seq <= mark {
			delete(p.codes, name)
		}
	}
}

func (p *Provisioner) forget(id int64) {
	p.mu.Lock()
	delete(p.noted, id)
	p.mu.Unlock()
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
