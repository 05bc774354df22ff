package sim

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/bmc"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/provision"
)

// A simMachine is a simulated bare-metal machine: a software TPM, a NIC
// plugged into a switch port, firmware that netboots HookOS, and a disk
// that Talos is installed on. It attests through the real protocol over
// HTTPS, and its installed Talos fetches its config from fleetd.
type simMachine struct {
	w      *world
	name   string // the node it is meant to be (the nodes file's key)
	serial string
	mac    net.HardwareAddr
	tpm    attest.TPM
	port   int // the switch port it is plugged into; 0: the switch sends no LLDP
	say    func(who, source, text string)
	client *http.Client // how it reaches fleetd: world's, or one bound to its address
	// fetchTries is how many times its installed Talos fetches its config
	// while fleetd answers neither the config nor 404 or 410; 0: 20.
	fetchTries int
	// eventLog is the UEFI event log HookOS sends with its TPM's quote
	// (a test measures the same log into the SoftTPM); nil: none.
	eventLog []byte
	// registers: once its installed Talos has its config, its kubelet
	// registers the node: a Node of its name in the world's cluster.
	registers bool

	power chan struct{} // a power cycle (by hand, or Rufio's job)

	mu        sync.Mutex
	boots     int
	retried   int // attestation requests tried again (each boot's tries beyond the first)
	inHookOS  bool
	installed bool
	result    attest.Result
	attested  bool     // the last attestation got a verdict
	attests   int      // attestations ended, with a verdict or not
	console   []string // every console line, oldest first
	code      string
	fetched   int      // configs its installed Talos received
	codes     []string // every install code it received
	statuses  []int    // what each config fetch was answered
}

func newSimMachine(w *world, name, serial string, tpm attest.TPM, port int, say func(who, source, text string)) *simMachine {
	return &simMachine{w: w, name: name, serial: serial, mac: randomMAC(), tpm: tpm, port: port, say: say, client: w.client, power: make(chan struct{}, 1)}
}

// powerCycle resets the machine: it netboots HookOS again.
func (m *simMachine) powerCycle() {
	select {
	case m.power <- struct{}{}:
	default:
	}
}

// run powers the machine on, and again at each power cycle, until ctx
// ends.
func (m *simMachine) run(ctx context.Context) {
	m.powerCycle()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.power:
		}
		m.mu.Lock()
		m.boots++
		m.inHookOS, m.installed, m.code = true, false, ""
		m.mu.Unlock()
		m.hookOS(ctx)
	}
}

// hookOS is one boot of HookOS: the switch's LLDP frame, then the
// attestation, as examples/hookos-attest does it.
func (m *simMachine) hookOS(ctx context.Context) {
	console := &lineWriter{emit: func(l string) {
		m.mu.Lock()
		m.console = append(m.console, l)
		m.mu.Unlock()
		m.say(m.name, "console", l)
	}}
	res, err := attest.Run(ctx, m.w.url+"/attest", m.tpm, m.claim(), &attest.ClientConfig{
		HTTPClient: m.client,
		Backoff:    func(int) time.Duration { return 100 * time.Millisecond },
		Console:    console,
		EventLog:   func() ([]byte, error) { return m.eventLog, nil },
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	m.result, m.attested = res, err == nil
	m.attests++
	m.retried += max(res.Tries-1, 0)
	if err == nil && res.InstallCode != "" {
		m.code = res.InstallCode
		m.codes = append(m.codes, res.InstallCode)
		const line = "install code written"
		m.console = append(m.console, line)
		m.say(m.name, "console", line)
	}
}

// claim is what the machine claims: its serial, MAC, and the switch port
// the switch's LLDP frame names, when it sends one.
func (m *simMachine) claim() attest.Machine {
	c := attest.Machine{Serial: m.serial, MAC: m.mac}
	if m.port != 0 {
		c.LLDP = &attest.LLDP{
			ChassisIDSubtype: 4, ChassisID: "74:83:c2:aa:bb:01",
			PortIDSubtype: 7, PortID: fmt.Sprintf("Port %d", m.port),
			PortDescription: fmt.Sprintf("Port %d", m.port), SystemName: demoSwitch,
		}
	}
	return c
}

// state returns what the machine knows.
func (m *simMachine) state() (res attest.Result, attested, inHookOS, installed bool, fetched int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.result, m.attested, m.inHookOS, m.installed, m.fetched
}

// holds reports whether this boot's attestation received the code whose
// SHA-256 a Workflow names (as the actions check the boot record), and
// returns that code.
func (m *simMachine) holds(sum string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.inHookOS || m.code == "" || sum != provision.CodeSHA256(m.code) {
		return "", false
	}
	return m.code, true
}

// bootInstalled reboots the machine into its installed Talos, which fetches
// its config from the URL of its talos.config= kernel argument, with the
// code the install wrote to META.
func (m *simMachine) bootInstalled(ctx context.Context, code string) {
	m.mu.Lock()
	m.inHookOS, m.installed, m.code = false, true, ""
	m.mu.Unlock()
	configURL := m.w.settings.PublicURL + configserve.PathPrefix + code
	tries := m.fetchTries
	if tries == 0 {
		tries = 20
	}
	for try := 1; try <= tries; try++ {
		status, n, err := fetch(ctx, m.client, configURL)
		if err == nil {
			m.mu.Lock()
			m.statuses = append(m.statuses, status)
			m.mu.Unlock()
		}
		switch {
		case err == nil && status == http.StatusOK:
			m.mu.Lock()
			m.fetched++
			m.mu.Unlock()
			m.say(m.name, "talos", fmt.Sprintf("fetched its machine config (%d bytes); the node boots with its address set statically", n))
			if m.registers {
				m.register(ctx)
			}
			return
		case err == nil && (status == http.StatusNotFound || status == http.StatusGone):
			m.say(m.name, "talos", fmt.Sprintf("its config URL answered %d", status))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// register stands in for the node's kubelet, which registers the node in
// the cluster once Talos has its config: a Node of its name, tried until it
// exists or ctx ends (the API server may be down).
func (m *simMachine) register(ctx context.Context) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.name}}
	for {
		_, err := m.w.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			m.say(m.name, "kubelet", "registered the node")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// fetch GETs a config URL as Talos does, reading the whole answer.
func fetch(ctx context.Context, c *http.Client, url string) (status int, n int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	rsp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer rsp.Body.Close()
	n, err = io.Copy(io.Discard, rsp.Body)
	return rsp.StatusCode, n, err
}

// lineWriter calls emit for each line written to it.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	emit func(string)
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			return len(p), nil
		}
		l.emit(strings.TrimSuffix(line, "\n"))
	}
}

// tinkSim plays Tinkerbell's agent and Rufio for simulated machines: it
// power-cycles a machine whose Workflow asks to netboot (as Rufio's job
// does), and runs each Workflow's actions on the machine whose boot record
// holds the install code the Workflow names by its SHA-256, reporting their
// states as the agent does. After the reboot action the machine boots its
// installed Talos.
//
// It writes what Tinkerbell and Rufio write, the way they write it, so
// that a real kube-apiserver takes it: a Job that its CRD's schema admits,
// and the status of Workflows and Jobs through their status subresource
// (UpdateStatus), with the resourceVersion it read. An error of the
// cluster is said on the timeline, and the object is tried again at the
// next poll.
type tinkSim struct {
	w        *world
	ns       string
	machines map[string]*simMachine // by MAC
	say      func(who, source, text string)
	// failAt makes the named run's action fail, for tests.
	failAt map[string]string
	// every is how often it reads the Workflows; 0: every 50 ms.
	every time.Duration

	mu      sync.Mutex
	running map[string]bool
	// deletedMidRun: runs whose Workflow was deleted while their machine
	// ran their actions (a wipe its run no longer stands behind).
	deletedMidRun []string
}

var demoActions = []string{"wipe-disk", "install", "next-boot", "reboot"}

func (t *tinkSim) run(ctx context.Context) {
	t.running = map[string]bool{}
	every := t.every
	if every == 0 {
		every = 50 * time.Millisecond
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		list, err := t.w.tink.Resource(provision.WorkflowResource).Namespace(t.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, u := range list.Items {
			var wf tinkerbell.Workflow
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &wf) != nil {
				continue
			}
			switch wf.Status.State {
			case tinkerbell.WorkflowStateSuccess, tinkerbell.WorkflowStateFailed, tinkerbell.WorkflowStateTimeout:
				continue
			}
			m := t.machines[wf.Spec.HardwareMap[provision.ValueMAC]]
			if m == nil {
				continue
			}
			if wf.Spec.BootOptions.BootMode == tinkerbell.BootModeNetboot && !t.jobDone(ctx, wf.Name) {
				t.netboot(ctx, wf, m)
				continue
			}
			t.mu.Lock()
			busy := t.running[wf.Name]
			if code, ok := m.holds(wf.Spec.HardwareMap[provision.ValueInstallCodeSHA256]); !busy && ok {
				t.running[wf.Name] = true
				busy = true
				go t.actions(ctx, wf.Name, m, code)
			}
			t.mu.Unlock()
		}
	}
}

// jobDone reports whether the Workflow's Rufio job completed.
func (t *tinkSim) jobDone(ctx context.Context, wf string) bool {
	u, err := t.w.tink.Resource(provision.JobResource).Namespace(t.ns).Get(ctx, "netboot-"+wf, metav1.GetOptions{})
	if err != nil {
		return false
	}
	var job bmc.Job
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &job) != nil {
		return false
	}
	for _, c := range job.Status.Conditions {
		if c.Type == bmc.JobCompleted && c.Status == bmc.ConditionTrue {
			return true
		}
	}
	return false
}

// netboot plays Tinkerbell and Rufio: Tinkerbell creates a Job
// netboot-<workflow> for the Machine its Hardware's bmcRef names, which
// sets the machine to netboot once and power-cycles it; Rufio runs it and
// writes the Job's status Completed. A Job that exists already (a poll
// after a failed status write) is run again.
func (t *tinkSim) netboot(ctx context.Context, wf tinkerbell.Workflow, m *simMachine) {
	name := "netboot-" + wf.Name
	hw, err := t.w.tink.Resource(provision.HardwareResource).Namespace(t.ns).Get(ctx, wf.Spec.HardwareRef, metav1.GetOptions{})
	if err != nil {
		t.say(m.name, "tink", fmt.Sprintf("Workflow %s: read its Hardware: %v", wf.Name, err))
		return
	}
	machine, _, _ := unstructured.NestedString(hw.Object, "spec", "bmcRef", "name")
	if machine == "" {
		t.say(m.name, "tink", fmt.Sprintf("Workflow %s: Hardware %s names no BMC", wf.Name, wf.Spec.HardwareRef))
		return
	}
	off, on := bmc.PowerHardOff, bmc.PowerOn
	job := bmc.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: bmc.GroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.ns},
		Spec: bmc.JobSpec{
			MachineRef: bmc.MachineRef{Name: machine, Namespace: t.ns},
			Tasks: []bmc.Action{
				{PowerAction: &off},
				{OneTimeBootDeviceAction: &bmc.OneTimeBootDeviceAction{Devices: []bmc.BootDevice{bmc.PXE}, EFIBoot: true}},
				{PowerAction: &on},
			},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&job)
	if err != nil {
		return
	}
	jobs := t.w.tink.Resource(provision.JobResource).Namespace(t.ns)
	u, err := jobs.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		u, err = jobs.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		t.say(m.name, "tink", fmt.Sprintf("create job %s: %v", name, err))
		return
	}
	completed := []any{map[string]any{"type": string(bmc.JobCompleted), "status": string(bmc.ConditionTrue)}}
	if err := unstructured.SetNestedSlice(u.Object, completed, "status", "conditions"); err != nil {
		return
	}
	if _, err := jobs.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.say(m.name, "rufio", fmt.Sprintf("job %s: write its status: %v", name, err))
		return
	}
	t.say(m.name, "rufio", fmt.Sprintf("job %s: PXE next, power cycle", name))
	m.powerCycle()
}

// actions runs the Workflow's actions on m, one after another; code is
// the install code of m's boot record.
func (t *tinkSim) actions(ctx context.Context, name string, m *simMachine, code string) {
	states := make([]tinkerbell.WorkflowState, len(demoActions))
	for i := range states {
		states[i] = tinkerbell.WorkflowStatePending
	}
	for i, a := range demoActions {
		states[i] = tinkerbell.WorkflowStateRunning
		if err := t.report(ctx, name, tinkerbell.WorkflowStateRunning, a, states); err != nil {
			t.say(m.name, "agent", fmt.Sprintf("%s: %v", a, err))
			if i > 0 && apierrors.IsNotFound(err) {
				t.mu.Lock()
				t.deletedMidRun = append(t.deletedMidRun, name)
				t.mu.Unlock()
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(60 * time.Millisecond):
		}
		if t.failAt[name] == a {
			states[i] = tinkerbell.WorkflowStateFailed
			t.say(m.name, "agent", fmt.Sprintf("%s FAILED", a))
			t.report(ctx, name, tinkerbell.WorkflowStateFailed, a, states)
			return
		}
		states[i] = tinkerbell.WorkflowStateSuccess
		t.say(m.name, "agent", fmt.Sprintf("%s SUCCESS", a))
	}
	if err := t.report(ctx, name, tinkerbell.WorkflowStateSuccess, "reboot", states); err != nil {
		t.say(m.name, "agent", err.Error())
		if apierrors.IsNotFound(err) {
			t.mu.Lock()
			t.deletedMidRun = append(t.deletedMidRun, name)
			t.mu.Unlock()
		}
		return
	}
	m.bootInstalled(ctx, code)
}

// report writes a Workflow's status as Tinkerbell does: through the status
// subresource, from the Workflow as last read, read again after a
// conflict (fleetd annotates Workflows while they run). While the API
// server does not answer, the agent's report is tried again every second,
// up to two minutes.
func (t *tinkSim) report(ctx context.Context, name string, state tinkerbell.WorkflowState, current string, states []tinkerbell.WorkflowState) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := t.reportOnce(ctx, name, state, current, states)
		if err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

func (t *tinkSim) reportOnce(ctx context.Context, name string, state tinkerbell.WorkflowState, current string, states []tinkerbell.WorkflowState) error {
	res := t.w.tink.Resource(provision.WorkflowResource).Namespace(t.ns)
	var err error
	for try := 0; try < 5; try++ {
		var u *unstructured.Unstructured
		if u, err = res.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("workflow %s: %w", name, err)
		}
		var wf tinkerbell.Workflow
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &wf); err != nil {
			return err
		}
		acts := make([]tinkerbell.Action, len(demoActions))
		for i, a := range demoActions {
			acts[i] = tinkerbell.Action{Name: a, State: states[i]}
		}
		wf.Status.State = state
		wf.Status.GlobalTimeout = 3600
		wf.Status.CurrentState = &tinkerbell.CurrentState{ActionName: current, State: state}
		wf.Status.Tasks = []tinkerbell.Task{{Name: "provision", Actions: acts}}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&wf)
		if err != nil {
			return err
		}
		if _, err = res.UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{}); err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			break
		}
	}
	return fmt.Errorf("workflow %s: write its status: %w", name, err)
}

// demoKeys reads the demo TPMs' EKs: serial -> RSA and ECC private keys.
func demoKeys(path string) (map[string][2]crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys := map[string][2]crypto.Signer{}
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pair := keys[b.Headers["Serial"]]
		switch k := k.(type) {
		case *rsa.PrivateKey:
			pair[0] = k
		case *ecdsa.PrivateKey:
			pair[1] = k
		}
		keys[b.Headers["Serial"]] = pair
	}
	return keys, nil
}

// softTPM makes a machine's TPM from its EKs; nil keys: new ones (a TPM no
// entry approves).
func softTPM(keys [2]crypto.Signer) (*attesttest.SoftTPM, error) {
	cfg := &attesttest.SoftConfig{}
	if k, ok := keys[0].(*rsa.PrivateKey); ok {
		cfg.RSAEK = k
	}
	if k, ok := keys[1].(*ecdsa.PrivateKey); ok {
		cfg.ECCEK = k
	}
	return attesttest.NewSoftTPM(cfg)
}
