package firmware

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"go.yaml.in/yaml/v3"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/repotest"
	"github.com/fleetkit/fleet/internal/syncbuf"
	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// binaries are the programs the test builds: fleetd, as a user deploys it,
// and, static (the initramfs holds no C library), hookos-attest,
// guestinit, fleet's actions (wipe-disk, install, next-boot), the stand-in
// installer, and the runner (tools/tinkerbell/runner, a module of its own).
type binaries struct{ dir string }

func (b binaries) path(name string) string { return filepath.Join(b.dir, name) }

// build builds the programs into a directory removed when t ends.
func build(t *testing.T) binaries {
	t.Helper()
	root, err := repotest.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t0 := time.Now()
	static := []string{"CGO_ENABLED=0"}
	for _, b := range []struct {
		module string // relative to the repository's root
		env    []string
		args   []string
	}{
		{".", nil, []string{"./examples/fleetd"}},
		{".", static, []string{"-trimpath", "-ldflags=-s -w", "./examples/hookos-attest", "./examples/internal/firmware/guestinit",
			"./examples/wipe-disk", "./examples/install", "./examples/next-boot", "./examples/internal/firmware/installer"}},
		{"tools/tinkerbell", static, []string{"-trimpath", "-ldflags=-s -w", "./runner"}},
	} {
		cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, b.args...)...)
		cmd.Dir, cmd.Env = filepath.Join(root, b.module), append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s (in %s): %v\n%s", strings.Join(b.args, " "), b.module, err, out)
		}
	}
	t.Logf("built fleetd, hookos-attest, guestinit, the actions, the installer and the runner in %v", time.Since(t0).Round(10*time.Millisecond))
	return binaries{dir: dir}
}

// The NetBox users of the test.
const (
	userTerraform = "terraform" // applies the nodes file: the binding author
	userFleetd    = "fleetd"
	userOperator  = "operator"
)

// fleet is fleetd running as a process, with its NetBox and its namespace
// of the test apiserver.
type fleet struct {
	t         *testing.T
	nb        *netboxtest.Server
	admin     *inventory.NetBox
	devices   map[string]inventory.Device
	attestURL string // https://<uplink address>:<port>/attest
	publicURL string // https://<uplink address>:<port>
	ns        string // its namespace of the test apiserver, Tinkerbell's
	caFile    string // fleetd's certificate, which is its own CA
	log       *syncbuf.Buffer
}

// startFleet seeds NetBox from the nodes file as Terraform does, and starts
// fleetd on listen, with ns as its namespace of the test apiserver,
// configured by its environment, until t ends.
func startFleet(t *testing.T, env *kubetest.Env, bins binaries, nodes, topology, listen, ns string) *fleet {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	inv, err := inventory.Load(nodes, topology)
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, ns: ns, log: &syncbuf.Buffer{}}
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

	host, _, err := net.SplitHostPort(listen)
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
	f.publicURL = "https://" + listen
	f.attestURL = f.publicURL + "/attest"
	bundle, err := secrets.NewBundle(secrets.NewClock(), config.TalosVersionCurrent)
	if err != nil {
		t.Fatal(err)
	}
	bundleYAML, err := yaml.Marshal(bundle)
	if err != nil {
		t.Fatal(err)
	}
	bundleFile := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(bundleFile, bundleYAML, 0o600); err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{
		"FLEET_LISTEN":          listen,
		"FLEET_METRICS_LISTEN":  "off",
		"FLEET_TLS_CERT":        certFile,
		"FLEET_TLS_KEY":         keyFile,
		"FLEET_PUBLIC_URL":      f.publicURL,
		"FLEET_SECRETS_BUNDLE":  bundleFile,
		"FLEET_NODES":           nodes,
		"FLEET_TOPOLOGY":        topology,
		"NETBOX_URL":            f.nb.URL,
		"NETBOX_TOKEN":          f.nb.Token(userFleetd),
		"FLEET_BINDING_AUTHOR":  userTerraform,
		"NETBOX_SWITCH":         switchName,
		"TINKERBELL_KUBECONFIG": env.Kubeconfig(),
		"CLUSTER_KUBECONFIG":    env.Kubeconfig(),
		"TINKERBELL_NAMESPACE":  ns,
		// fleetd learns a run's end at its next read of the run's
		// Workflow: every second here rather than every 15 s.
		"FLEET_POLL_INTERVAL": "1s",
	}
	cmd := exec.Command(bins.path("fleetd"))
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
		if c, err := net.DialTimeout("tcp", listen, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleetd does not listen on %s after 30 s:\n%s", listen, f.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return f
}

// device reads a device from NetBox.
func (f *fleet) device(t *testing.T, name string) inventory.Device {
	t.Helper()
	d, err := f.admin.Device(t.Context(), f.devices[name].ID)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// journal returns the NetBox journal of a device, oldest first, each line
// "kind: text".
func (f *fleet) journal(t *testing.T, name string) []string {
	t.Helper()
	type entry struct {
		id   int64
		line string
	}
	var out []entry
	next := f.nb.URL + "/api/extras/journal-entries/?limit=1000"
	for next != "" {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, next, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Token "+f.nb.Token(userOperator))
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
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
			t.Fatal(err)
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

// audit returns fleetd's audit records with message msg about serial, as
// JSON objects, in the order fleetd wrote them.
func (f *fleet) audit(msg, serial string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(f.log.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if rec["msg"] == msg && rec["serial"] == serial {
			out = append(out, rec)
		}
	}
	return out
}

// freePort returns a port free on addr.
func freePort(t *testing.T, addr string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
