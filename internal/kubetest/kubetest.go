package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/repotest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/testproc"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Env is the running control plane of a test binary. Its methods are safe
// for concurrent use. It lives until Run stops it when the tests end.
type Env struct {
	host       string // https://127.0.0.1:<port>
	caData     []byte // PEM of kube-apiserver's self-signed serving certificate
	adminToken string
	kubeconfig string
	admin      kubernetes.Interface

	// own is the control plane of one test (StartOwn), which Kill and
	// Restart act on; nil for the shared one.
	own   *controlPlane
	ownMu sync.Mutex
}

// errUnavailable wraps every reason the control plane could not be built or
// started.
var errUnavailable = errors.New("the test control plane (kube-apiserver and etcd) is unavailable")

var (
	mainRuns atomic.Bool // set by Run

	once     sync.Once
	shared   *Env
	startErr error
	timings  string
	plane    *controlPlane // the processes and directory, for stop
	planeMu  sync.Mutex
	stopOnce sync.Once
)

// Run runs the tests of m and then stops the control plane, if a test
// started one. It returns m.Run's exit code, or 1 when stopping failed. Call
// it from the package's TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }
func Run(m *testing.M) int {
	mainRuns.Store(true)
	code := m.Run()
	t0 := time.Now()
	err := stop()
	if testing.Verbose() && shared != nil {
		fmt.Printf("kubetest: stopped the control plane in %v\n", testproc.Round(time.Since(t0)))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Start returns the control plane of this test binary, starting it on the
// first call (see the package doc). It ends t when the control plane cannot
// run: a skip with the reason by hand, a failure with
// FLEET_REQUIRE_INTEGRATION=1 (internal/testenv). It fails t at once when the
// package's TestMain does not run the tests through Run.
func Start(t testing.TB) *Env {
	t.Helper()
	if !mainRuns.Load() {
		t.Fatal("kubetest.Start needs the package's TestMain to run the tests through kubetest.Run, which stops the control plane when they end: func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }")
	}
	testenv.Short(t)
	first := false
	once.Do(func() {
		first = true
		shared, startErr = start(context.Background(), t.Logf)
	})
	if startErr != nil {
		testenv.Unavailable(t, "%v", startErr)
	}
	if first {
		t.Logf("kubetest: %s", timings)
	}
	return shared
}

// StartOwn starts a control plane for t alone, as Start does the shared
// one, and stops it when t ends: for a test that kills and restarts
// kube-apiserver or etcd (Kill, Restart), which would break every other
// test on a shared one. It ends t as Start does when the control plane
// cannot run. Starting one costs 6 to 9 s.
func StartOwn(t testing.TB) *Env {
	t.Helper()
	testenv.Short(t)
	var cp *controlPlane
	env, timing, err := startWith(context.Background(), t.Logf, func(c *controlPlane) { cp = c })
	if cp != nil {
		t.Cleanup(func() {
			if err := cp.stop(); err != nil {
				t.Errorf("kubetest: %v", err)
			}
		})
	}
	if err != nil {
		testenv.Unavailable(t, "%v", err)
	}
	env.own = cp
	t.Logf("kubetest: a control plane of its own: %s", timing)
	return env
}

// A Component is a process of a control plane StartOwn started.
type Component int

const (
	APIServer Component = iota + 1 // kube-apiserver
	Etcd                           // etcd
)

func (c Component) String() string {
	switch c {
	case APIServer:
		return "kube-apiserver"
	case Etcd:
		return "etcd"
	}
	return fmt.Sprintf("Component(%d)", int(c))
}

// Kill kills c with SIGKILL, as a crash does, and waits for it to exit.
// Its data (etcd's store, kube-apiserver's certificates) stays for
// Restart. Only an Env of StartOwn can.
func (e *Env) Kill(c Component) error {
	e.ownMu.Lock()
	defer e.ownMu.Unlock()
	p, err := e.component(c)
	if err != nil {
		return err
	}
	return p.Kill()
}

// Restart starts c again, with the same arguments, ports and data, after
// Kill, and waits until it is ready (etcd's /health, kube-apiserver's
// /readyz), or ctx ends.
func (e *Env) Restart(ctx context.Context, c Component) error {
	e.ownMu.Lock()
	defer e.ownMu.Unlock()
	p, err := e.component(c)
	if err != nil {
		return err
	}
	np, err := p.restart()
	if err != nil {
		return err
	}
	cp := e.own
	switch c {
	case Etcd:
		cp.etcd = np
		return cp.waitEtcd(ctx)
	default:
		cp.apiserver = np
		return cp.waitAPIServer(ctx)
	}
}

// component returns c's process; the caller holds ownMu.
func (e *Env) component(c Component) (*process, error) {
	if e.own == nil {
		return nil, errors.New("kubetest: only a control plane of a test's own (StartOwn) is killed or restarted")
	}
	switch c {
	case APIServer:
		return e.own.apiserver, nil
	case Etcd:
		return e.own.etcd, nil
	}
	return nil, fmt.Errorf("kubetest: no component %v", c)
}

// start builds or finds the binaries and starts the shared control plane.
// logf reports progress of the slow steps.
func start(ctx context.Context, logf func(string, ...any)) (*Env, error) {
	env, t, err := startWith(ctx, logf, func(cp *controlPlane) {
		planeMu.Lock()
		plane = cp
		planeMu.Unlock()
	})
	timings = t
	return env, err
}

// startWith builds or finds the binaries and starts a control plane,
// handing it to keep as soon as it exists (to be stopped, even when it did
// not become ready), and returns where its time went.
func startWith(ctx context.Context, logf func(string, ...any), keep func(*controlPlane)) (*Env, string, error) {
	root, err := repotest.Root()
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", errUnavailable, err)
	}
	t0 := time.Now()
	bins, err := findBinaries(ctx, logf)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", errUnavailable, err)
	}
	tBuild := time.Since(t0)

	cp, err := startControlPlane(ctx, bins)
	if cp != nil {
		keep(cp)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", errUnavailable, err)
	}
	env := &Env{
		host:       cp.host,
		caData:     cp.caData,
		adminToken: cp.adminToken,
	}
	env.admin, err = kubernetes.NewForConfig(env.Config())
	if err != nil {
		return nil, "", fmt.Errorf("%w: admin client: %w", errUnavailable, err)
	}
	env.kubeconfig = filepath.Join(cp.dir, "kubeconfig")
	if err := env.WriteKubeconfig(env.kubeconfig, "admin", env.adminToken, "default"); err != nil {
		return nil, "", fmt.Errorf("%w: %w", errUnavailable, err)
	}

	t1 := time.Now()
	crdDir := filepath.Join(root, filepath.FromSlash(CRDDir))
	n, establishedAt, err := applyCRDs(ctx, env.Config(), crdDir)
	if err != nil {
		return nil, "", fmt.Errorf("%w: CRDs of %s: %w", errUnavailable, crdDir, err)
	}
	tCRDs := time.Since(t1)
	// kube-apiserver sleeps crdSettle in every create of a custom resource
	// whose CRD's Established lastTransitionTime (to the second) is less
	// than crdSettle ago; wait that out here, once, rather than in every
	// create of the first tests.
	settle := time.Until(establishedAt.Add(crdSettle))
	time.Sleep(settle)

	timing := fmt.Sprintf("binaries %v (go tool -n), etcd ready %v, kube-apiserver ready %v, %d CRDs applied and established %v, then %v until creates are not delayed; total %v",
		testproc.Round(tBuild), testproc.Round(cp.etcdReady), testproc.Round(cp.apiserverReady), n, testproc.Round(tCRDs), testproc.Round(max(settle, 0)), testproc.Round(time.Since(t0)))
	return env, timing, nil
}

// crdSettle is both how long after a CRD became Established
// kube-apiserver delays creates of its custom resources, and the delay
// (apiextensions-apiserver's crdHandler, for HA apiservers to catch up).
const crdSettle = 2 * time.Second

// stop stops the control plane if one was started. It runs once.
func stop() error {
	var err error
	stopOnce.Do(func() {
		planeMu.Lock()
		cp := plane
		planeMu.Unlock()
		if cp != nil {
			err = cp.stop()
		}
	})
	return err
}

// Host returns kube-apiserver's URL, https://127.0.0.1:<port>.
func (e *Env) Host() string { return e.host }

// Config returns a new rest.Config of the admin identity (group
// system:masters), without client-side rate limiting. The caller may change
// it.
func (e *Env) Config() *rest.Config { return e.ConfigFor(e.adminToken) }

// ConfigFor returns a new rest.Config that authenticates with the bearer
// token token (a bootstrap token "<id>.<secret>", a ServiceAccount token, or
// anything a test wants refused), without client-side rate limiting. The
// caller may change it.
func (e *Env) ConfigFor(token string) *rest.Config {
	return &rest.Config{
		Host:            e.host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), e.caData...)},
		QPS:             -1, // no client-side rate limiter
		Timeout:         30 * time.Second,
	}
}

// Kubeconfig returns the path of a kubeconfig file of the admin identity,
// for programs a test runs. It lives as long as the control plane; do not
// change it.
func (e *Env) Kubeconfig() string { return e.kubeconfig }

// Admin returns a clientset of the admin identity.
func (e *Env) Admin() kubernetes.Interface { return e.admin }

// Namespace creates a namespace for t alone, named after the test with a
// random suffix, and returns its name. It is not deleted when t ends: no
// namespace controller runs to empty it, and the whole store goes when the
// control plane stops.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := e.admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a namespace for %s: %v", t.Name(), err)
	}
	return got.Name
}

var notLabel = regexp.MustCompile(`[^a-z0-9]+`)

// namespacePrefix turns a test name into the start of a DNS label (at most
// 40 characters, ending in "-"), leaving room for the random suffix.
func namespacePrefix(testName string) string {
	s := notLabel.ReplaceAllString(strings.ToLower(testName), "-")
	s = strings.Trim(s, "-")
	if len(s) > 39 {
		s = strings.TrimRight(s[:39], "-")
	}
	if s == "" {
		s = "test"
	}
	return s + "-"
}

// ServiceAccountToken returns a token of ServiceAccount name in namespace,
// creating the ServiceAccount if it does not exist, through TokenRequest (an
// hour long). The token has only what RBAC grants the ServiceAccount.
func (e *Env) ServiceAccountToken(t testing.TB, namespace, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if _, err := e.admin.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create ServiceAccount %s/%s: %v", namespace, name, err)
	}
	hour := int64(3600)
	tr, err := e.admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a token of ServiceAccount %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// WriteKubeconfig writes a kubeconfig to path that authenticates as user
// with the bearer token token (as ConfigFor's), in namespace ns: for a
// program a test runs as that identity.
func (e *Env) WriteKubeconfig(path, user, token, ns string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: e.host, CertificateAuthorityData: e.caData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: user, Namespace: ns}
	cfg.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
