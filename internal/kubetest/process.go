package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetkit/fleet/internal/repotest"
)

// Readiness deadlines: a loaded 2-core machine has been seen to take 3 s for
// kube-apiserver; these leave a wide margin.
const (
	etcdReadyTimeout      = 30 * time.Second
	apiserverReadyTimeout = 90 * time.Second
	stopTimeout           = 10 * time.Second
)

// controlPlane is a started etcd and kube-apiserver and their directory.
type controlPlane struct {
	dir        string
	bins       binaries
	etcd       *process
	apiserver  *process
	etcdURL    string // its client URL, for its health
	host       string
	caData     []byte
	adminToken string

	etcdReady, apiserverReady time.Duration
}

// process is one program the control plane started.
type process struct {
	name string
	path string
	args []string
	cmd  *exec.Cmd
	log  string        // path of its combined output
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done is closed
}

// startControlPlane starts etcd and kube-apiserver in a new temporary
// directory and waits until both are ready. On error it stops what it
// started, but the returned controlPlane (when not nil) still names the
// directory for stop to remove.
func startControlPlane(ctx context.Context, bins binaries) (*controlPlane, error) {
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, fmt.Errorf("make the control plane's directory: %w", err)
	}
	cp := &controlPlane{dir: dir, bins: bins}
	// A port found free can be taken by another program before etcd or
	// kube-apiserver binds it: start again on new ports.
	for attempt := 1; ; attempt++ {
		err := cp.start(ctx, bins)
		if err == nil {
			return cp, nil
		}
		if stopErr := cp.stopProcesses(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		if attempt == 3 || !errors.Is(err, errPortTaken) {
			return cp, err
		}
		if err := os.RemoveAll(filepath.Join(dir, "etcd")); err != nil {
			return cp, fmt.Errorf("clear etcd's data directory: %w", err)
		}
	}
}

// errPortTaken is wrapped when a process exited because its port was taken.
var errPortTaken = errors.New("a port was taken")

func (cp *controlPlane) start(ctx context.Context, bins binaries) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	securePort := ports[2]

	t0 := time.Now()
	cp.etcd, err = startProcess("etcd", bins.etcd, filepath.Join(cp.dir, "etcd.log"),
		"--name=kubetest",
		"--data-dir="+filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubetest="+peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	if err := waitReady(ctx, cp.etcd, etcdReadyTimeout, plain, clientURL+"/health", ""); err != nil {
		return err
	}
	cp.etcdURL = clientURL
	cp.etcdReady = time.Since(t0)

	keyFile, pubFile, err := writeServiceAccountKey(cp.dir)
	if err != nil {
		return err
	}
	cp.adminToken, err = randomToken()
	if err != nil {
		return err
	}
	tokenFile := filepath.Join(cp.dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(cp.adminToken+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return fmt.Errorf("write the token file: %w", err)
	}
	certDir := filepath.Join(cp.dir, "certs")
	t1 := time.Now()
	cp.apiserver, err = startProcess("kube-apiserver", bins.apiserver, filepath.Join(cp.dir, "kube-apiserver.log"),
		"--etcd-servers="+clientURL,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(securePort),
		"--cert-dir="+certDir,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pubFile,
		"--service-account-signing-key-file="+keyFile,
		"--token-auth-file="+tokenFile,
		"--authorization-mode=RBAC",
		"--enable-bootstrap-token-auth",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
	)
	if err != nil {
		return err
	}
	cp.host = "https://127.0.0.1:" + strconv.Itoa(securePort)
	// kube-apiserver writes its self-signed serving certificate before it
	// listens; it is the clients' CA.
	caFile := filepath.Join(certDir, "apiserver.crt")
	deadline := time.Now().Add(apiserverReadyTimeout)
	for {
		cp.caData, err = os.ReadFile(caFile)
		if err == nil && len(cp.caData) > 0 {
			break
		}
		if err := cp.apiserver.exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver wrote no %s within %v: %s", caFile, apiserverReadyTimeout, cp.apiserver.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.caData) {
		return fmt.Errorf("kube-apiserver's %s holds no PEM certificate", caFile)
	}
	secure := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	if err := waitReady(ctx, cp.apiserver, time.Until(deadline), secure, cp.host+"/readyz", cp.adminToken); err != nil {
		return err
	}
	cp.apiserverReady = time.Since(t1)
	return nil
}

// kill kills p (SIGKILL) and waits for it to exit.
func (p *process) kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, p.cmd.Process.Pid, err)
	}
	<-p.done
	return nil
}

// restart starts p's program again, with the same arguments and log (its
// output appended), after it exited.
func (p *process) restart() (*process, error) {
	logFile, err := os.OpenFile(p.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("restart %s: %w", p.name, err)
	}
	defer logFile.Close()
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr()
	if err := startOnSpawner(cmd); err != nil {
		return nil, fmt.Errorf("restart %s (%s): %w", p.name, p.path, err)
	}
	np := &process{name: p.name, path: p.path, args: p.args, cmd: cmd, log: p.log, done: make(chan struct{})}
	go func() {
		np.err = cmd.Wait()
		close(np.done)
	}()
	return np, nil
}

// stop stops kube-apiserver, then etcd, and removes the directory.
func (cp *controlPlane) stop() error {
	err := cp.stopProcesses()
	if rmErr := os.RemoveAll(cp.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove the control plane's directory: %w", rmErr))
	}
	return err
}

func (cp *controlPlane) stopProcesses() error {
	var errs []error
	for _, p := range []*process{cp.apiserver, cp.etcd} {
		if p != nil {
			errs = append(errs, p.stop())
		}
	}
	return errors.Join(errs...)
}

// startProcess starts path with args, its output going to logPath.
func startProcess(name, path, logPath string, args ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr()
	if err := startOnSpawner(cmd); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, path, err)
	}
	p := &process{name: name, path: path, args: args, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// spawns carries commands to the spawner goroutine, which starts them.
var (
	spawnerOnce sync.Once
	spawns      chan spawn
)

type spawn struct {
	cmd  *exec.Cmd
	done chan error
}

// startOnSpawner starts cmd from one goroutine locked to its OS thread for
// the life of the test binary. Linux ties a child's parent-death signal
// (procAttr) to the thread that started it, and Go ends a thread when a
// goroutine that locked it returns: a child started from an ordinary
// goroutine could be signalled mid-test because some unrelated test locked
// and left that thread.
func startOnSpawner(cmd *exec.Cmd) error {
	spawnerOnce.Do(func() {
		spawns = make(chan spawn)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives on
			for s := range spawns {
				s.done <- s.cmd.Start()
			}
		}()
	})
	s := spawn{cmd: cmd, done: make(chan error, 1)}
	spawns <- s
	return <-s.done
}

// exited returns an error when p has exited, nil while it runs.
func (p *process) exited() error {
	select {
	case <-p.done:
		log := p.logTail()
		if strings.Contains(log, "address already in use") {
			return fmt.Errorf("%s exited (%v): %w: %s", p.name, p.err, errPortTaken, log)
		}
		return fmt.Errorf("%s exited (%v): %s", p.name, p.err, log)
	default:
		return nil
	}
}

// stop sends p SIGTERM and waits for it to exit; after stopTimeout it sends
// SIGKILL. Only p's own process is signalled.
func (p *process) stop() error {
	select {
	case <-p.done:
		return nil // exited already; start reported it
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s (pid %d): %w", p.name, p.cmd.Process.Pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, p.cmd.Process.Pid, err)
	}
	<-p.done
	return fmt.Errorf("%s (pid %d) did not exit within %v of SIGTERM and was killed", p.name, p.cmd.Process.Pid, stopTimeout)
}

// logTail returns the end of p's output, for error messages.
func (p *process) logTail() string {
	f, err := os.Open(p.log)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const n = 1500
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		if _, err := f.Seek(fi.Size()-n, io.SeekStart); err != nil {
			return "(log unreadable: " + err.Error() + ")"
		}
	}
	data, _ := io.ReadAll(f)
	return "its log " + p.log + " ends:\n" + repotest.Tail(string(data), n)
}

// waitReady polls url until it answers 200, p exits, or timeout passes.
func waitReady(ctx context.Context, p *process, timeout time.Duration, client *http.Client, url, token string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", p.name, err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s answered %s: %s", url, resp.Status, repotest.Tail(string(body), 500))
		} else {
			last = err.Error()
		}
		if err := p.exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready within %v (last: %s): %s", p.name, timeout, last, p.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePorts returns n distinct ports of 127.0.0.1 that were free a moment
// ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeServiceAccountKey writes a new RSA key pair for kube-apiserver to
// sign and check ServiceAccount tokens, as PEM, and returns the files.
func writeServiceAccountKey(dir string) (keyFile, pubFile string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("make the service-account key: %w", err)
	}
	priv, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("encode the service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("encode the service-account public key: %w", err)
	}
	keyFile = filepath.Join(dir, "sa.key")
	pubFile = filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv}), 0o600); err != nil {
		return "", "", fmt.Errorf("write the service-account key: %w", err)
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return "", "", fmt.Errorf("write the service-account public key: %w", err)
	}
	return keyFile, pubFile, nil
}

// randomToken returns 32 random bytes as hex.
func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make the admin token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
