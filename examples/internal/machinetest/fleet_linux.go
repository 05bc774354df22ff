package machinetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"go.yaml.in/yaml/v3"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/syncbuf"
	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/testproc"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// The NetBox users of the tests, and the switch every machine plugs into.
const (
	UserTerraform = "terraform" // applies the nodes file: the binding author
	UserFleetd    = "fleetd"
	UserOperator  = "operator"
	SwitchName    = "usw-pro-24"
)

// Config is what a Fleet is made of.
type Config struct {
	Fleetd          string            // the fleetd binary
	Nodes, Topology string            // the nodes file and the cluster topology
	Listen          string            // the address fleetd listens on
	NS              string            // its namespace of the test apiserver, Tinkerbell's
	Settings        map[string]string // more settings, over Start's
}

// Fleet is fleetd running as a process, with its NetBox and its namespace
// of the test apiserver. Its methods may be called from any test of the
// one that started it.
type Fleet struct {
	NB        *netboxtest.Server
	Admin     *inventory.NetBox
	Devices   map[string]inventory.Device // as the nodes file's apply left them
	NS        string
	PublicURL string // https://<listen>
	CAFile    string // fleetd's certificate, which is its own CA
	RootCAs   *x509.CertPool
	Log       *syncbuf.Buffer
}

// Start seeds NetBox from the nodes file as Terraform does, and starts
// fleetd, configured by its environment, until t ends.
func Start(t *testing.T, env *kubetest.Env, cfg Config) *Fleet {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	inv, err := inventory.Load(cfg.Nodes, cfg.Topology)
	if err != nil {
		t.Fatal(err)
	}
	f := &Fleet{NS: cfg.NS, Log: &syncbuf.Buffer{}, PublicURL: "https://" + cfg.Listen}
	f.NB = netboxtest.New(&netboxtest.Config{Validate: t, Users: []string{UserTerraform, UserFleetd, UserOperator}})
	t.Cleanup(f.NB.Close)
	site := inv.Topology.Name
	if _, err := f.NB.AddSite(site); err != nil {
		t.Fatal(err)
	}
	if _, err := f.NB.AddSwitch(netboxtest.Switch{Site: site, Name: SwitchName, Ports: 24}); err != nil {
		t.Fatal(err)
	}
	f.Admin, err = inventory.NewNetBox(f.NB.URL, f.NB.Token(UserTerraform), &inventory.NetBoxConfig{
		BindingAuthor: UserTerraform, Site: site, Switch: SwitchName,
	})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := f.Admin.Plan(ctx, inv)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Admin.Apply(ctx, plan); err != nil {
		t.Fatal(err)
	}
	devs, err := f.Admin.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.Devices = map[string]inventory.Device{}
	for _, d := range devs {
		f.Devices[d.Name] = d
	}

	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := testcert.New(host)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := cert.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.CAFile, f.RootCAs = certFile, cert.Pool
	bundle := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(bundle, secretsBundle(t), 0o600); err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{
		"FLEET_LISTEN":          cfg.Listen,
		"FLEET_METRICS_LISTEN":  "off",
		"FLEET_TLS_CERT":        certFile,
		"FLEET_TLS_KEY":         keyFile,
		"FLEET_PUBLIC_URL":      f.PublicURL,
		"FLEET_SECRETS_BUNDLE":  bundle,
		"FLEET_NODES":           cfg.Nodes,
		"FLEET_TOPOLOGY":        cfg.Topology,
		"NETBOX_URL":            f.NB.URL,
		"NETBOX_TOKEN":          f.NB.Token(UserFleetd),
		"FLEET_BINDING_AUTHOR":  UserTerraform,
		"NETBOX_SWITCH":         SwitchName,
		"TINKERBELL_KUBECONFIG": env.Kubeconfig(),
		"CLUSTER_KUBECONFIG":    env.Kubeconfig(),
		"TINKERBELL_NAMESPACE":  f.NS,
		// fleetd learns a run's end at its next read of the run's
		// Workflow: every second here rather than every 15 s. Only how long
		// the test waits for the journal's last lines depends on it.
		"FLEET_POLL_INTERVAL": "1s",
	}
	maps.Copy(settings, cfg.Settings)
	cmd := exec.Command(cfg.Fleetd)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = f.Log, f.Log
	p, err := testproc.Start("fleetd", cmd, f.Log.String)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Error(err)
		} else if err := p.ExitError(); err != nil {
			t.Errorf("fleetd exited with %v", err)
		}
		if t.Failed() {
			t.Logf("fleetd's log:\n%s", f.Log.String())
		}
	})
	// fleetd serves once its Templates are in the cluster.
	if err := p.WaitReady(ctx, 30*time.Second, func(context.Context) error {
		c, err := net.DialTimeout("tcp", cfg.Listen, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}); err != nil {
		t.Fatalf("fleetd does not listen on %s: %v", cfg.Listen, err)
	}
	return f
}

var (
	bundleOnce sync.Once
	bundleFile []byte
	bundleErr  error
)

// secretsBundle returns the cluster's Talos secrets bundle as
// FLEET_SECRETS_BUNDLE holds it (made once: it takes a second).
func secretsBundle(t *testing.T) []byte {
	t.Helper()
	bundleOnce.Do(func() {
		b, err := secrets.NewBundle(secrets.NewClock(), config.TalosVersionCurrent)
		if err != nil {
			bundleErr = err
			return
		}
		bundleFile, bundleErr = yaml.Marshal(b)
	})
	if bundleErr != nil {
		t.Fatal(bundleErr)
	}
	return bundleFile
}

// Device reads a device from NetBox.
func (f *Fleet) Device(t testing.TB, name string) inventory.Device {
	t.Helper()
	d, err := f.Admin.Device(t.Context(), f.Devices[name].ID)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Journal returns the NetBox journal of a device, oldest first, each line
// "kind: text".
func (f *Fleet) Journal(t testing.TB, name string) []string {
	t.Helper()
	var lines []string
	for _, e := range f.NB.Journal(f.Devices[name].ID) {
		lines = append(lines, e.Kind+": "+e.Text)
	}
	return lines
}

// WaitJournal waits up to limit until the journal of a device holds, for
// each of prefixes, a line beginning with it, and returns the journal; when
// it does not, it returns the journal and an error that shows it.
func (f *Fleet) WaitJournal(t testing.TB, name string, limit time.Duration, prefixes ...string) ([]string, error) {
	t.Helper()
	var lines []string
	err := testenv.Until(t.Context(), limit, func() bool {
		lines = f.Journal(t, name)
		return !slices.ContainsFunc(prefixes, func(p string) bool {
			return !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, p) })
		})
	})
	if err != nil {
		return lines, fmt.Errorf("the journal of %s holds no line beginning each of %q within %v:\n%s", name, prefixes, limit, strings.Join(lines, "\n"))
	}
	return lines, nil
}

// Audit returns fleetd's audit records (its JSON log lines) with message
// msg, about serial unless serial is "", in the order fleetd wrote them.
func (f *Fleet) Audit(msg, serial string) []map[string]any {
	var out []map[string]any
	for l := range strings.Lines(f.Log.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == msg && (serial == "" || rec["serial"] == serial) {
			out = append(out, rec)
		}
	}
	return out
}

// FetchConfig GETs the config of code from fleetd as Talos does, at the
// URL of its talos.config= kernel argument with the code for ${code},
// dialing with dial (nil: from the test's network namespace), and
// returns the status and the body.
func (f *Fleet) FetchConfig(ctx context.Context, t testing.TB, dial func(ctx context.Context, network, addr string) (net.Conn, error), code string) (int, string) {
	t.Helper()
	c := &http.Client{
		Transport: &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: f.RootCAs}},
		Timeout:   30 * time.Second,
	}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.PublicURL+configserve.PathPrefix+code, nil)
	if err != nil {
		t.Fatal(err)
	}
	rsp, err := c.Do(req)
	if err != nil {
		t.Fatalf("fetch the config: %v", err)
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if err != nil {
		t.Fatalf("read the config: %v", err)
	}
	return rsp.StatusCode, string(b)
}

// FreePort returns a port free on addr.
func FreePort(t testing.TB, addr string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
