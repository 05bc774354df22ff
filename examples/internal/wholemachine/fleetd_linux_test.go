package wholemachine

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"go.yaml.in/yaml/v3"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/syncbuf"
	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// binaries are the programs a user deploys, built with go build.
type binaries struct {
	dir string
}

func (b binaries) path(name string) string { return filepath.Join(b.dir, name) }

var (
	buildOnce sync.Once
	built     binaries
	buildErr  error
)

// build builds fleetd, hookos-attest and fleetctl once per test binary, into a
// directory removed when the tests end (through t's Cleanup of the test
// that built them, the parent of every subtest). The actions are images
// (see images).
func build(t *testing.T) binaries {
	t.Helper()
	buildOnce.Do(func() {
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(gomod)))
		dir := t.TempDir()
		t0 := time.Now()
		cmd := exec.Command("go", "build", "-o", dir+"/", "./examples/fleetd", "./examples/hookos-attest", "./examples/fleetctl")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		t.Logf("built fleetd, hookos-attest and fleetctl in %v", time.Since(t0).Round(10*time.Millisecond))
		built = binaries{dir: dir}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
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

// The NetBox users of the test.
const (
	userTerraform = "terraform" // applies the nodes file: the binding author
	userFleetd    = "fleetd"
	userOperator  = "operator"
	switchName    = "usw-pro-24"
	// approverToken is FLEET_APPROVER_TOKEN: the operator's fleetctl
	// approve reads the waiting claims with it.
	approverToken = "approver-token-of-the-whole-machine-test"
)

// fleet is fleetd running as a process, with its NetBox and its namespace
// of the test apiserver.
type fleet struct {
	t         *testing.T
	nb        *netboxtest.Server
	admin     *inventory.NetBox
	devices   map[string]inventory.Device
	ns        string
	publicURL string // https://<uplink address>:<port>
	caFile    string // fleetd's certificate, which is its own CA
	metrics   string // http://127.0.0.1:<port>/metrics
	log       *syncbuf.Buffer
}

// fleetConfig is what a fleet is made of.
type fleetConfig struct {
	nodes, topology string // the nodes file and the cluster topology
	listen          string // the address fleetd listens on
	ns              string // its namespace of the test apiserver
	bins            binaries
	settings        map[string]string // more settings, over startFleet's
}

// startFleet seeds NetBox from the nodes file as Terraform does, and starts
// fleetd, configured by its environment, until t ends.
func startFleet(t *testing.T, env *kubetest.Env, fc fleetConfig) *fleet {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	inv, err := inventory.Load(fc.nodes, fc.topology)
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, ns: fc.ns, log: &syncbuf.Buffer{}}
	f.nb = netboxtest.New(&netboxtest.Config{Validate: t, Users: []string{userTerraform, userFleetd, userOperator}})
	t.Cleanup(f.nb.Close)
	site := inv.Topology.Name
	if _, err := f.nb.AddSite(site); err != nil {
		t.Fatal(err)
	}
	if _, err := f.nb.AddSwitch(netboxtest.Switch{Site: site, Name: switchName, Ports: 24}); err != nil {
		t.Fatal(err)
	}
	f.admin, err = inventory.NewNetBox(f.nb.URL, f.nb.Token(userTerraform), &inventory.NetBoxConfig{
		BindingAuthor: userTerraform, Site: site, Switch: switchName,
	})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := f.admin.Plan(ctx, inv)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.admin.Apply(ctx, plan); err != nil {
		t.Fatal(err)
	}
	devs, err := f.admin.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.devices = map[string]inventory.Device{}
	for _, d := range devs {
		f.devices[d.Name] = d
	}

	host, _, err := net.SplitHostPort(fc.listen)
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
	f.caFile = certFile
	f.publicURL = "https://" + fc.listen
	bundle := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(bundle, secretsBundle(t), 0o600); err != nil {
		t.Fatal(err)
	}
	metricsAddr := net.JoinHostPort("127.0.0.1", fmt.Sprint(freePort(t, "127.0.0.1")))
	f.metrics = "http://" + metricsAddr + "/metrics"
	settings := map[string]string{
		"FLEET_LISTEN":          fc.listen,
		"FLEET_METRICS_LISTEN":  metricsAddr,
		"FLEET_APPROVER_TOKEN":  approverToken,
		"FLEET_TLS_CERT":        certFile,
		"FLEET_TLS_KEY":         keyFile,
		"FLEET_PUBLIC_URL":      f.publicURL,
		"FLEET_SECRETS_BUNDLE":  bundle,
		"FLEET_NODES":           fc.nodes,
		"FLEET_TOPOLOGY":        fc.topology,
		"NETBOX_URL":            f.nb.URL,
		"NETBOX_TOKEN":          f.nb.Token(userFleetd),
		"FLEET_BINDING_AUTHOR":  userTerraform,
		"NETBOX_SWITCH":         switchName,
		"TINKERBELL_KUBECONFIG": env.Kubeconfig(),
		"CLUSTER_KUBECONFIG":    env.Kubeconfig(),
		"TINKERBELL_NAMESPACE":  f.ns,
		// fleetd learns a run's end at its next read of the run's
		// Workflow: every second here rather than every 15 s. Only how long
		// the test waits for the journal's last lines depends on it.
		"FLEET_POLL_INTERVAL": "1s",
		// The Templates run fleet's actions as this test built them, in
		// the registry the machine resolves to the test's (actionRegistry).
		"FLEET_IMAGE_WIPE_DISK": actionImage("wipe-disk"),
		"FLEET_IMAGE_INSTALL":   actionImage("install"),
		"FLEET_IMAGE_NEXT_BOOT": actionImage("next-boot"),
	}
	maps.Copy(settings, fc.settings)
	cmd := exec.Command(fc.bins.path("fleetd"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = f.log, f.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start fleetd: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("fleetd exited with %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("fleetd (PID %d) did not stop within 10 s of SIGTERM; killed", cmd.Process.Pid)
		}
		if t.Failed() {
			t.Logf("fleetd's log:\n%s", f.log.String())
		}
	})
	// fleetd serves once its Templates are in the cluster.
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("fleetd exited at start: %v\n%s", err, f.log.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", fc.listen, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleetd does not listen on %s after 30 s:\n%s", fc.listen, f.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return f
}

// scrape returns fleetd's metrics, as Prometheus scrapes them.
func (f *fleet) scrape() string {
	f.t.Helper()
	rsp, err := http.Get(f.metrics)
	if err != nil {
		f.t.Fatalf("scrape fleetd: %v", err)
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if err != nil || rsp.StatusCode != http.StatusOK {
		f.t.Fatalf("scrape fleetd: %s, %v", rsp.Status, err)
	}
	return string(b)
}

// device reads a device from NetBox.
func (f *fleet) device(name string) inventory.Device {
	f.t.Helper()
	d, err := f.admin.Device(f.t.Context(), f.devices[name].ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

// journal returns the NetBox journal of a device, oldest first, each line
// "kind: text".
func (f *fleet) journal(name string) []string {
	f.t.Helper()
	type entry struct {
		id   int64
		line string
	}
	var out []entry
	next := f.nb.URL + "/api/extras/journal-entries/?limit=1000"
	for next != "" {
		req, err := http.NewRequestWithContext(f.t.Context(), http.MethodGet, next, nil)
		if err != nil {
			f.t.Fatal(err)
		}
		req.Header.Set("Authorization", "Token "+f.nb.Token(userOperator))
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			f.t.Fatal(err)
		}
		var page struct {
			Next    *string `json:"next"`
			Results []struct {
				ID               int64 `json:"id"`
				AssignedObjectID int64 `json:"assigned_object_id"`
				Kind             struct {
					Value string `json:"value"`
				} `json:"kind"`
				Comments string `json:"comments"`
			} `json:"results"`
		}
		err = json.NewDecoder(rsp.Body).Decode(&page)
		rsp.Body.Close()
		if err != nil {
			f.t.Fatal(err)
		}
		for _, r := range page.Results {
			if r.AssignedObjectID == f.devices[name].ID {
				out = append(out, entry{r.ID, r.Kind.Value + ": " + r.Comments})
			}
		}
		next = ""
		if page.Next != nil {
			next = *page.Next
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	lines := make([]string, len(out))
	for i, e := range out {
		lines[i] = e.line
	}
	return lines
}

// waitJournal waits up to limit for a journal line of the device that
// contains text, and returns the journal.
func (f *fleet) waitJournal(name, text string, limit time.Duration) []string {
	f.t.Helper()
	var lines []string
	err := testenv.Until(f.t.Context(), limit, func() bool {
		lines = f.journal(name)
		for _, l := range lines {
			if strings.Contains(l, text) {
				return true
			}
		}
		return false
	})
	if err != nil {
		f.t.Fatalf("the journal of %s says no %q within %v:\n%s", name, text, limit, strings.Join(lines, "\n"))
	}
	return lines
}
