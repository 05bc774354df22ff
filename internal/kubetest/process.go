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
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fleetkit/fleet/internal/testproc"
)

// How long a starting etcd or kube-apiserver may stand still
// (Process.WaitReady): a loaded 2-core machine has been seen to take 3 s
// for kube-apiserver, and minutes under many other tests' load.
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

// process is one program the control plane started, with what restart
// needs to start it again.
type process struct {
	*testproc.Process
	path, log string
	args      []string
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
		if attempt == 3 || !errors.Is(err, testproc.ErrPortTaken) {
			return cp, err
		}
		if err := os.RemoveAll(filepath.Join(dir, "etcd")); err != nil {
			return cp, fmt.Errorf("clear etcd's data directory: %w", err)
		}
	}
}

func (cp *controlPlane) start(ctx context.Context, bins binaries) error {
	ports, err := testproc.FreePorts(3)
	if err != nil {
		return err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	securePort := ports[2]

	t0 := time.Now()
	cp.etcd, err = launch("etcd", bins.etcd, filepath.Join(cp.dir, "etcd.log"), false, []string{
		"--name=kubetest",
		"--data-dir=" + filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=kubetest=" + peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	})
	if err != nil {
		return err
	}
	cp.etcdURL = clientURL
	if err := cp.waitEtcd(ctx); err != nil {
		return err
	}
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
	cp.apiserver, err = launch("kube-apiserver", bins.apiserver, filepath.Join(cp.dir, "kube-apiserver.log"), false, []string{
		"--etcd-servers=" + clientURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(securePort),
		"--cert-dir=" + certDir,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pubFile,
		"--service-account-signing-key-file=" + keyFile,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--enable-bootstrap-token-auth",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
	})
	if err != nil {
		return err
	}
	cp.host = "https://127.0.0.1:" + strconv.Itoa(securePort)
	// kube-apiserver writes its self-signed serving certificate before it
	// listens; it is the clients' CA.
	caFile := filepath.Join(certDir, "apiserver.crt")
	if err := cp.apiserver.WaitReady(ctx, apiserverReadyTimeout, func(context.Context) error {
		cp.caData, err = os.ReadFile(caFile)
		if err == nil && len(cp.caData) == 0 {
			err = fmt.Errorf("%s is empty", caFile)
		}
		return err
	}); err != nil {
		return err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(cp.caData) {
		return fmt.Errorf("kube-apiserver's %s holds no PEM certificate", caFile)
	}
	if err := cp.waitAPIServer(ctx); err != nil {
		return err
	}
	cp.apiserverReady = time.Since(t1)
	return nil
}

// waitEtcd waits (Process.WaitReady) until etcd answers 200 at /health.
func (cp *controlPlane) waitEtcd(ctx context.Context) error {
	return cp.etcd.WaitReady(ctx, etcdReadyTimeout, testproc.HTTPReady(&http.Client{Timeout: 2 * time.Second}, cp.etcdURL+"/health", ""))
}

// waitAPIServer waits (Process.WaitReady) until kube-apiserver answers
// the admin 200 at /readyz, over TLS with its serving certificate as the
// CA.
func (cp *controlPlane) waitAPIServer(ctx context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.caData)
	secure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return cp.apiserver.WaitReady(ctx, apiserverReadyTimeout, testproc.HTTPReady(secure, cp.host+"/readyz", cp.adminToken))
}

// restart starts p's program again, with the same arguments and log (its
// output appended), after it exited.
func (p *process) restart() (*process, error) {
	return launch(p.Name(), p.path, p.log, true, p.args)
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
			errs = append(errs, p.Stop(stopTimeout))
		}
	}
	return errors.Join(errs...)
}

// launch starts path with args, its output going to logPath, appended to
// when appendLog.
func launch(name, path, logPath string, appendLog bool, args []string) (*process, error) {
	p, err := testproc.StartLogged(name, exec.Command(path, args...), logPath, appendLog)
	if err != nil {
		return nil, err
	}
	return &process{Process: p, path: path, log: logPath, args: args}, nil
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
