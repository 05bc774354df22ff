package tinktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/testproc"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
)

// readyTimeout is how long a starting tinkerbell may stand still
// (Process.WaitReady): its own wait for kube-apiserver and its CRD
// migration take about a second here.
const readyTimeout = 60 * time.Second

// Config holds the optional settings of Start. A nil *Config means every
// default. It must not change while Start runs.
type Config struct {
	// Args are more flags for tinkerbell, after Start's own, so that a
	// flag given here overrides Start's (e.g. "--rufio-log-level=3",
	// "--enable-crd-migrations=false"). nil adds none.
	Args []string
}

// Tinkerbell is a tinkerbell process (tink-server, tink-controller and
// Rufio) that Start started for one test. Its methods are safe for
// concurrent use. It stops when that test ends.
type Tinkerbell struct {
	grpc      string
	namespace string
	log       string
}

// GRPC returns tink-server's address, 127.0.0.1:<port>, for agents'
// --grpc-server. It serves plain gRPC and authenticates no client: any
// agent may ask for any worker's actions.
func (tb *Tinkerbell) GRPC() string { return tb.grpc }

// Namespace returns the namespace of tink-server's backend: the
// namespace whose Hardware and Workflows it serves to agents.
func (tb *Tinkerbell) Namespace() string { return tb.namespace }

// Log returns the path of tinkerbell's combined output. It is removed when
// the test ends; Start logs its end when the test failed.
func (tb *Tinkerbell) Log() string { return tb.log }

// running holds the hosts of the control planes a Tinkerbell runs on, and
// the test that started it.
var (
	runningMu sync.Mutex
	running   = map[string]string{}
)

// Start starts tinkerbell for t on env's control plane, with ns as the
// namespace of tink-server's backend, authenticated as ServiceAccount in ns
// with the grant of rules, and waits until it serves (see the package doc).
// It stops tinkerbell, and removes the grant, when t ends.
//
// Start ends t as kubetest.Start does when tinkerbell cannot be built or
// does not become ready: a skip with the reason by hand, a failure with
// FLEET_REQUIRE_INTEGRATION=1. It fails t at once when another Tinkerbell
// runs on env's control plane.
func Start(t testing.TB, env *kubetest.Env, ns string, cfg *Config) *Tinkerbell {
	t.Helper()
	testenv.Short(t)
	if cfg == nil {
		cfg = &Config{}
	}
	claim(t, env.Host())

	ctx := context.Background()
	// tink-server, tink-controller and Rufio are one binary, a tool of
	// tools/tinkerbell (go tool tinkerbell).
	bin, err := testproc.Tool(ctx, "tools/tinkerbell", "tinkerbell", t.Logf)
	if err != nil {
		testenv.Unavailable(t, "Tinkerbell: %v", err)
	}

	dir := t.TempDir()
	if err := grant(ctx, t, env, ns); err != nil {
		t.Fatalf("tinktest: %v", err)
	}
	token := env.ServiceAccountToken(t, ns, ServiceAccount)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig, ServiceAccount, token, ns); err != nil {
		t.Fatalf("tinktest: %v", err)
	}

	t1 := time.Now()
	tb, p, err := run(ctx, bin, dir, kubeconfig, ns, cfg.Args)
	if p != nil {
		t.Cleanup(func() {
			if err := p.Stop(stopTimeout); err != nil {
				t.Errorf("tinktest: %v", err)
			}
			if tb != nil && t.Failed() {
				t.Logf("tinktest: tinkerbell: %s", p.Tail())
				t.Logf("tinktest: %s", keepLog(tb.log))
			}
		})
	}
	if err != nil {
		testenv.Unavailable(t, "Tinkerbell: %v", err)
	}
	t.Logf("tinktest: tinkerbell ready in %v, tink-server on %s, its log %s", testproc.Round(time.Since(t1)), tb.grpc, tb.log)
	return tb
}

// claim marks host's control plane as running a Tinkerbell for t until t
// ends, and fails t when one runs there already.
func claim(t testing.TB, host string) {
	t.Helper()
	runningMu.Lock()
	defer runningMu.Unlock()
	if other, ok := running[host]; ok {
		t.Fatalf("tinktest: a Tinkerbell, of %s, runs on the control plane %s already: its controllers act on every namespace, so a second would act on the same objects; run these tests one after another, or give each a control plane of its own (kubetest.StartOwn)", other, host)
	}
	running[host] = t.Name()
	t.Cleanup(func() {
		runningMu.Lock()
		defer runningMu.Unlock()
		delete(running, host)
	})
}

// run starts tinkerbell and waits until it serves, on new ports when one
// it was given was taken meanwhile. The returned process, when not nil, is
// to be stopped, even when it did not become ready.
func run(ctx context.Context, bin, dir, kubeconfig, ns string, extra []string) (*Tinkerbell, *testproc.Process, error) {
	log := filepath.Join(dir, "tinkerbell.log")
	for attempt := 1; ; attempt++ {
		ports, err := testproc.FreePorts(2)
		if err != nil {
			return nil, nil, err
		}
		grpc := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		health := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])) + "/readyz"
		args := append([]string{
			"--enable-smee=false",
			"--enable-tootles=false",
			"--enable-secondstar=false",
			"--enable-ui=false",
			"--enable-tink-server=true",
			"--enable-tink-controller=true",
			"--enable-rufio-controller=true",
			"--backend=kube",
			"--backend-kube-config=" + kubeconfig,
			"--backend-kube-namespace=" + ns,
			"--bind-address=127.0.0.1",
			"--tink-server-bind-port=" + strconv.Itoa(ports[0]),
			"--http-port=" + strconv.Itoa(ports[1]),
		}, extra...)
		// Its environment holds no TINKERBELL_* variable (each would set a
		// flag) and no KUBECONFIG.
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, testproc.Env("TINKERBELL_", "KUBECONFIG=")
		p, err := testproc.StartLogged("tinkerbell", cmd, log, false)
		if err != nil {
			return nil, nil, err
		}
		err = waitReady(ctx, p, readyTimeout, health, grpc)
		if err == nil {
			return &Tinkerbell{grpc: grpc, namespace: ns, log: log}, p, nil
		}
		if attempt == 3 || !errors.Is(err, testproc.ErrPortTaken) {
			return nil, p, err
		}
	}
}

// grant binds ServiceAccount of ns to a ClusterRole of rules, both named
// tinktest-<ns>, and deletes them when t ends.
func grant(ctx context.Context, t testing.TB, env *kubetest.Env, ns string) error {
	missing, err := crdsMissing(ctx, env)
	if err != nil {
		return err
	}
	name := "tinktest-" + ns
	rbac := env.Admin().RbacV1()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules(missing)}
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ClusterRole %s: %w", name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccount, Namespace: ns}},
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, err := range []error{
			rbac.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}),
			rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("tinktest: remove the grant of %s: %v", name, err)
			}
		}
	})
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ClusterRoleBinding %s: %w", name, err)
	}
	return nil
}

// crdsMissing reports whether one of the CRDs tinkerbell applies is missing
// from env's control plane.
func crdsMissing(ctx context.Context, env *kubetest.Env) (bool, error) {
	dyn, err := dynamic.NewForConfig(env.Config())
	if err != nil {
		return false, fmt.Errorf("dynamic client: %w", err)
	}
	for _, name := range crdNames {
		_, err := dyn.Resource(kubetest.CRDResource).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("get CRD %s: %w", name, err)
		}
	}
	return false, nil
}
