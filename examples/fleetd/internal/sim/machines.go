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

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/configserve"
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

// hookOSCode returns, while the machine is in HookOS and this boot's
// attestation received an install code, the boot's number and that code.
func (m *simMachine) hookOSCode() (boot int, code string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.boots, m.code, m.inHookOS && m.code != ""
}

// inBoot reports whether the machine is still in HookOS in boot number
// boot: a power cycle ends the boot, and its agent with it.
func (m *simMachine) inBoot(boot int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.boots == boot && m.inHookOS
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
