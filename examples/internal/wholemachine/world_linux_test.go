package wholemachine

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/examples/internal/machinetest"
	"github.com/fleetkit/fleet/internal/dockertest"
	"github.com/fleetkit/fleet/internal/imagetest/standin"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/tinktest"
	"github.com/fleetkit/fleet/inventory"
)

// shared are the parts every world uses: the test's programs and control
// plane, fleetd, fleetctl and hookos-attest, and the images.
type shared struct {
	tl   tools
	env  *kubetest.Env
	bins machinetest.Binaries
	img  images
}

// worldConfig is what a world is made of. Its zero value is the runbook's
// "Plug a machine in": a worker on its declared port, its EKs approved,
// its class's installer the stand-in, no Tinkerbell.
type worldConfig struct {
	tink       bool              // Tinkerbell runs, and the machine's dockerd
	unapproved bool              // the entry approves no EK
	noLLDP     bool              // the switch sends no LLDP frame
	bmc        string            // the entry's bmc; "": amt
	class      string            // the entry's class, worker or controlplane; "": worker
	firstCP    bool              // the node's address is API_SERVER_IP: the cluster's first control plane
	installer  string            // the class's installer_image; "": the stand-in
	settings   map[string]string // more fleetd settings, over the world's
}

// A world is one machine, its switch, the fleetd that provisions it, and,
// when it runs Workflows, Tinkerbell and the machine's dockerd.
type world struct {
	t     *testing.T
	s     shared
	cfg   worldConfig
	m     *machine
	f     *fleet
	tink  dynamic.Interface
	nodes string               // the nodes file
	tb    *tinktest.Tinkerbell // nil in a world that runs no Workflow
	d     *dockertest.Docker   // likewise; the engine of the machine's boot
}

// newWorld builds a machine plugged into switch port declaredPort,
// declares it in a nodes file as node there, with its TPM's EKs approved
// unless cfg.unapproved, and starts fleetd; with cfg.tink, also the real
// Tinkerbell in fleetd's namespace and the machine's containerd and
// dockerd, whose mount namespace becomes the machine's. The machine's agent
// starts once it attested (run).
func newWorld(t *testing.T, s shared, cfg worldConfig) *world {
	t.Helper()
	if cfg.bmc == "" {
		cfg.bmc = "amt"
	}
	if cfg.installer == "" {
		cfg.installer = s.img.installer
	}
	if cfg.class == "" {
		cfg.class = "worker"
	}
	suffix := strings.ToUpper(rand.Text()[:8])
	m := newMachine(t, s.tl, machineConfig{
		serial:     "SN-WHOLE-" + suffix,
		diskSerial: "DS-WHOLE-" + suffix,
		port:       declaredPort,
		diskSize:   64 << 20,
		noLLDP:     cfg.noLLDP,
	})
	ns := s.env.Namespace(t)
	w := &world{t: t, s: s, cfg: cfg, m: m}
	if cfg.tink {
		w.tb = tinktest.Start(t, s.env, ns, nil)
		w.boot()
	}
	approved := ""
	if !cfg.unapproved {
		ek := machinetest.EKs(t, m.tpm)
		approved = "    approved_ek_rsa2048: " + ek.RSA2048 + "\n    approved_ek_eccp256: " + ek.ECCP256 + "\n"
	}
	dir := t.TempDir()
	w.nodes = filepath.Join(dir, "nodes.yaml")
	if err := os.WriteFile(w.nodes, fmt.Appendf(nil, `models:
  box:
    manufacturer: Minisforum
    name: MS-01
    disk: %s
classes:
  worker:
    type: worker
    installer_image: %[2]s
  controlplane:
    type: controlplane
    installer_image: %[2]s
nodes:
  %[3]s:
    model: box
    serial: %[4]s
    class: %[5]s
    switch_port: %[6]d
    address: %[7]s
    bmc: %[8]s
    disk_serial: %[9]s
%[10]s`, m.install.path, cfg.installer, node, m.cfg.serial, cfg.class, declaredPort, m.addr, cfg.bmc, m.cfg.diskSerial, approved), 0o644); err != nil {
		t.Fatal(err)
	}
	topo := filepath.Join(dir, "cluster-topology.json")
	apiServer := strings.TrimSuffix(m.uplink, ".1") + ".10"
	if cfg.firstCP {
		apiServer = m.addr
	}
	if err := os.WriteFile(topo, fmt.Appendf(nil, `{"CLUSTER_NAME": "folly", "K8S_NODE_CIDR": %q, "API_SERVER_IP": %q}`, m.subnet, apiServer), 0o644); err != nil {
		t.Fatal(err)
	}
	w.f = startFleet(t, s.env, machinetest.Config{
		Fleetd: s.bins.Path("fleetd"), Nodes: w.nodes, Topology: topo, NS: ns,
		Listen:   net.JoinHostPort(m.uplink, fmt.Sprint(machinetest.FreePort(t, m.uplink))),
		Settings: cfg.settings,
	})
	var err error
	if w.tink, err = dynamic.NewForConfig(s.env.Config()); err != nil {
		t.Fatal(err)
	}
	return w
}

// boot starts the machine's container engine of this boot, as HookOS
// does: a dockerd of its own, whose mount namespace is made the machine's.
func (w *world) boot() {
	w.t.Helper()
	reg := w.s.img.reg.Host()
	w.d = dockertest.Start(w.t, &dockertest.Config{
		Netns:      w.m.mNS,
		Forward:    []string{reg, w.tb.GRPC()},
		Registries: map[string]string{actionRegistry: reg, waitdaemonRegistry: reg},
	})
	w.m.enterDocker(w.d)
}

// powerCycle ends the machine's boot as a power loss or a reset does and
// boots HookOS again, but for hookos-attest and the agent: the agent and
// the container engine stop (the agent is killed and reports nothing
// more), HookOS's /run, a tmpfs, starts empty (this boot's record and the
// run's shared directory are gone; the udev database is the same disks'),
// and a new container engine starts with an empty image cache.
func (w *world) powerCycle() {
	w.t.Helper()
	if w.d != nil {
		w.d.Stop(w.t)
	}
	for _, d := range []string{"run/fleet", "run/fleet-workflow"} {
		dir := filepath.Join(w.m.dir, d)
		if err := os.RemoveAll(dir); err != nil {
			w.t.Fatal(err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			w.t.Fatal(err)
		}
	}
	if w.d != nil {
		if err := os.Remove(filepath.Join(w.m.dir, "run/docker.sock")); err != nil {
			w.t.Fatal(err)
		}
		w.boot()
	}
}

// hookosEnv is hookos-attest's environment in the machine.
func (w *world) hookosEnv() map[string]string {
	wait := "20s"
	if w.cfg.noLLDP {
		wait = "3s"
	}
	return map[string]string{
		"FLEETD_URL":      w.f.PublicURL + "/attest",
		"FLEETD_CA":       w.f.CAFile,
		"FLEET_INTERFACE": "eth0",
		"FLEET_TPM":       w.m.tpm,
		"FLEET_BOOT_DIR":  "/run/fleet",
		"FLEET_LLDP_WAIT": wait,
	}
}

// attestRun boots HookOS's agent: hookos-attest in the machine, and returns
// what it did and this boot's record.
func (w *world) attestRun(ctx context.Context) (result, disksafe.BootRecord) {
	w.t.Helper()
	return w.attestEnv(ctx, w.hookosEnv())
}

// attestEnv is attestRun with env for hookos-attest's environment.
func (w *world) attestEnv(ctx context.Context, env map[string]string) (result, disksafe.BootRecord) {
	w.t.Helper()
	r := w.m.run(ctx, env, w.s.bins.Path("hookos-attest"))
	rec, err := disksafe.ReadBootRecord(filepath.Join(w.m.dir, "run/fleet"))
	if err != nil {
		w.t.Fatalf("the boot record: %v", err)
	}
	return r, rec
}

// wantAttest runs hookos-attest as attestEnv does, with env (hookosEnv's
// when nil), and wants it to exit code, its output beginning with prefix
// and holding each of more, and this boot's record attested as attested,
// without an install code.
func (w *world) wantAttest(ctx context.Context, env map[string]string, code int, attested bool, prefix string, more ...string) {
	w.t.Helper()
	if env == nil {
		env = w.hookosEnv()
	}
	r, rec := w.attestEnv(ctx, env)
	if r.code != code || !strings.HasPrefix(r.stdout, prefix) || slices.ContainsFunc(more, func(m string) bool { return !strings.Contains(r.stdout, m) }) {
		w.t.Errorf("hookos-attest: %+v; want exit %d and output beginning %q holding %q", r, code, prefix, more)
	}
	if rec.Attested != attested || rec.Code != "" {
		w.t.Errorf("the boot record: attested %v, with a code %v; want attested %v without a code", rec.Attested, rec.Code != "", attested)
	}
}

// lldpLine is hookos-attest's first line on the machine's port.
func (w *world) lldpLine() string {
	return fmt.Sprintf("lldp: eth0 is on switch port Port %d (Port %d) of %s\n", w.m.cfg.port, w.m.cfg.port, machinetest.SwitchName)
}

// attest boots HookOS's agent and wants the port it is plugged into
// named, attest: PASSED, and the install code written, and returns this
// boot's record, attested with the code. With why, it wants fleetd's
// answer "no provision: <why>" (exit 0) instead, and no install code.
func (w *world) attest(ctx context.Context, why ...string) disksafe.BootRecord {
	w.t.Helper()
	r, rec := w.attestRun(ctx)
	answer := "install code written\n"
	for _, y := range why {
		answer = "attest: no provision: " + y + "\n"
	}
	if want := w.lldpLine() + "attest: PASSED\n" + answer; r.code != 0 || r.stdout != want {
		w.t.Fatalf("hookos-attest: %+v; want exit 0 and %q", r, want)
	}
	if !rec.Attested || (rec.Code == "") != (len(why) > 0) {
		w.t.Fatalf("the boot record: attested %v, with a code %v; want attested, with a code %v", rec.Attested, rec.Code != "", len(why) == 0)
	}
	return rec
}

// workflow returns the one Workflow fleetd created for the node.
func (w *world) workflow(ctx context.Context) tinkerbell.Workflow {
	w.t.Helper()
	wfs := machinetest.Workflows(ctx, w.t, w.tink, w.f.NS)
	if len(wfs) != 1 || !strings.HasPrefix(wfs[0].Name, "provision-"+node+"-") {
		names := make([]string, len(wfs))
		for i, wf := range wfs {
			names[i] = wf.Name
		}
		w.t.Fatalf("Workflows %v, want one provision-%s-<unix seconds>", names, node)
	}
	return wfs[0]
}

// run starts the machine's agent, as HookOS does once hookos-attest is
// done, and follows wf until it ends (see waitRun), logging each action's
// time as Tinkerbell recorded it.
func (w *world) run(ctx context.Context, wf tinkerbell.Workflow) tinkerbell.Workflow {
	w.t.Helper()
	agent := w.d.StartAgent(w.t, w.m.mac.String(), w.tb.GRPC())
	return w.follow(ctx, wf, agent)
}

// follow follows wf, run by agent, until it ends, as run does.
func (w *world) follow(ctx context.Context, wf tinkerbell.Workflow, agent *dockertest.Agent) tinkerbell.Workflow {
	w.t.Helper()
	end := machinetest.Follow(ctx, w.t, w.tink, w.f.NS, wf.Name, agent.Started(), stall, runLimit, machinetest.Ended)
	var times []string
	for _, a := range actions(w.t, end) {
		times = append(times, fmt.Sprintf("%s %s %s", a.Name, a.State, a.ExecutionDuration))
	}
	w.t.Logf("Workflow %s ended %s %v after the agent started; actions: %s", wf.Name, end.Status.State,
		time.Since(agent.Started()).Round(10*time.Millisecond), strings.Join(times, ", "))
	if task := end.Status.Tasks[0]; task.AgentID != w.m.mac.String() {
		w.t.Errorf("the task's agent is %q, want the machine's MAC %s", task.AgentID, w.m.mac)
	}
	return end
}

// waitCurrent waits until wf's current action is name in one of states, as
// tink-server records it, and returns the Workflow then. It fails the test
// when the Workflow ends first or stands still for stall.
func (w *world) waitCurrent(ctx context.Context, name string, states ...tinkerbell.WorkflowState) tinkerbell.Workflow {
	w.t.Helper()
	wf := w.workflow(ctx)
	return machinetest.Follow(ctx, w.t, w.tink, w.f.NS, wf.Name, time.Now(), stall, 0, func(wf tinkerbell.Workflow) bool {
		if machinetest.Ended(wf) {
			w.t.Fatalf("Workflow %s ended before %s was current %v: %s", wf.Name, name, states, machinetest.Progress(wf))
		}
		cs := wf.Status.CurrentState
		return cs != nil && cs.ActionName == name && slices.Contains(states, cs.State)
	})
}

// setGlobalTimeout sets the global_timeout of fleet's fleet-provision
// Template in the world's namespace, once fleetd created it, as an
// operator may: tink-controller
// renders each Workflow's globalTimeout from it, and fleetd leaves a
// Template whose images are its settings' unwritten.
func (w *world) setGlobalTimeout(ctx context.Context, seconds int) {
	w.t.Helper()
	c := w.tink.Resource(tinkerbell.GroupVersion.WithResource("templates")).Namespace(w.f.NS)
	// fleetd creates its Templates as it starts serving.
	var (
		u   *unstructured.Unstructured
		err error
	)
	if testenv.Until(ctx, time.Minute, func() bool {
		u, err = c.Get(ctx, "fleet-provision", metav1.GetOptions{})
		return err == nil
	}) != nil {
		w.t.Fatalf("fleetd created no Template fleet-provision within a minute: %v", err)
	}
	data, _, err := unstructured.NestedString(u.Object, "spec", "data")
	if err != nil || !strings.Contains(data, "global_timeout: 3600\n") {
		w.t.Fatalf("the Template fleet-provision holds no global_timeout: 3600 (%v):\n%s", err, data)
	}
	data = strings.Replace(data, "global_timeout: 3600\n", fmt.Sprintf("global_timeout: %d\n", seconds), 1)
	if err := unstructured.SetNestedField(u.Object, data, "spec", "data"); err != nil {
		w.t.Fatal(err)
	}
	if _, err := c.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// approveFromClaim is the runbook's "Approve a machine's EKs", from
// fleetctl approve's lines on: it adds the two approved_ek_* lines to the
// node's entry and applies the nodes file to NetBox, as the plan and apply
// of terraform/netbox/folly do, and wants the device to hold the hashes.
func (w *world) approveFromClaim(ctx context.Context, lines string) {
	w.t.Helper()
	nodes, err := os.ReadFile(w.nodes)
	if err != nil {
		w.t.Fatal(err)
	}
	entryEnd := "    disk_serial: " + w.m.cfg.diskSerial + "\n"
	var indented strings.Builder
	for l := range strings.Lines(lines) {
		indented.WriteString("    " + l)
	}
	edited := strings.Replace(string(nodes), entryEnd, entryEnd+indented.String(), 1)
	if edited == string(nodes) {
		w.t.Fatalf("the nodes file has no entry ending %q:\n%s", entryEnd, nodes)
	}
	if err := os.WriteFile(w.nodes, []byte(edited), 0o644); err != nil {
		w.t.Fatal(err)
	}
	inv, err := inventory.Load(w.nodes, filepath.Join(filepath.Dir(w.nodes), "cluster-topology.json"))
	if err != nil {
		w.t.Fatal(err)
	}
	plan, err := w.f.Admin.Plan(ctx, inv)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.f.Admin.Apply(ctx, plan); err != nil {
		w.t.Fatal(err)
	}
}

// fleetctl runs fleetctl, the operator's, with args, against the world's
// fleetd as an approver, and returns its exit code and output.
func (w *world) fleetctl(ctx context.Context, args ...string) (int, string) {
	w.t.Helper()
	cmd := exec.CommandContext(ctx, w.s.bins.Path("fleetctl"), args...)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"FLEETD_URL=" + w.f.PublicURL,
		"FLEETD_CA=" + w.f.CAFile,
		"FLEET_APPROVER_TOKEN=" + approverToken,
	}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("fleetctl %s: %v", strings.Join(args, " "), err)
	}
	w.t.Logf("fleetctl %s exited %d:\n%s", strings.Join(args, " "), code, indent(string(out)))
	return code, string(out)
}

// installed reads what the stand-in installer wrote to the install disk,
// as the installed Talos reads its META at its boot.
func (w *world) installed() standin.Installed {
	w.t.Helper()
	f, err := os.Open(w.m.install.path)
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	size := w.m.cfg.diskSize
	in, ok, err := standin.Read(f, size)
	if err != nil || !ok {
		w.t.Fatalf("the install disk holds no install of the stand-in installer (%v)", err)
	}
	return in
}

// partial reports whether the install disk holds what the stand-in
// installer writes first, its partition table, without its marks: an
// install it started and did not finish.
func (w *world) partial() bool {
	w.t.Helper()
	f, err := os.Open(w.m.install.path)
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	size := w.m.cfg.diskSize
	gpt, err := disksafe.ReadGPT(f, size, 512)
	if err != nil || len(gpt.Partitions) != 4 {
		return false
	}
	_, ok, _ := standin.Read(f, size)
	return !ok
}

// fetchUnread asks for the node's config from the machine as fetch does,
// from a socket with the smallest receive buffer, and never reads the
// answer, as a node whose network or power fails mid-answer: its kernel
// takes a little of it and closes its window. It returns the socket's
// address, the one fleetd's journal names; the connection closes when the
// test ends.
func (w *world) fetchUnread(ctx context.Context, code string) string {
	w.t.Helper()
	raw := testenv.Within(w.t, w.m.mNS, func() (net.Conn, error) {
		d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1)
			}); err != nil {
				return err
			}
			return serr
		}}
		return d.DialContext(ctx, "tcp", strings.TrimPrefix(w.f.PublicURL, "https://"))
	})
	w.t.Cleanup(func() { raw.Close() })
	conn := tls.Client(raw, &tls.Config{RootCAs: w.f.RootCAs, ServerName: w.m.uplink})
	if err := conn.HandshakeContext(ctx); err != nil {
		w.t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "GET %s%s HTTP/1.1\r\nHost: %s\r\n\r\n", configserve.PathPrefix, code, w.m.uplink); err != nil {
		w.t.Fatal(err)
	}
	return raw.LocalAddr().String()
}

// noSecrets fails when the install code is in fleetd's log, NetBox's
// journal or a Workflow.
func (w *world) noSecrets(code string) {
	w.t.Helper()
	if strings.Contains(w.f.Log.String(), code) {
		w.t.Error("fleetd's log holds the install code")
	}
	if slices.ContainsFunc(w.f.Journal(w.t, node), func(l string) bool { return strings.Contains(l, code) }) {
		w.t.Error("the journal holds the install code")
	}
	for _, wf := range machinetest.Workflows(w.t.Context(), w.t, w.tink, w.f.NS) {
		if strings.Contains(fmt.Sprintf("%+v", wf), code) {
			w.t.Errorf("Workflow %s holds the install code", wf.Name)
		}
	}
}

// wantJournal waits for a journal line of the node equal to line, and
// returns the journal.
func (w *world) wantJournal(line string) []string {
	w.t.Helper()
	journal := w.f.waitJournal(2*time.Minute, line)
	if !slices.Contains(journal, line) {
		w.t.Errorf("journal of %s:\n%s\nwant the line %q", node, strings.Join(journal, "\n"), line)
	}
	return journal
}

// wantNoRun fails when fleetd created a Workflow.
func (w *world) wantNoRun() {
	w.t.Helper()
	if wfs := machinetest.Workflows(w.t.Context(), w.t, w.tink, w.f.NS); len(wfs) != 0 {
		w.t.Errorf("fleetd created %d Workflows", len(wfs))
	}
}

// wantNothingWritten fails when NetBox holds anything of the machine's
// attestation: a MAC, a verdict, an attested port or a run.
func (w *world) wantNothingWritten() {
	w.t.Helper()
	d := w.f.Device(w.t, node)
	if len(d.MAC) != 0 || d.AttestVerdict != "" || d.AttestedEKHash != "" || d.AttestedSwitchPort != 0 || d.LastRun != "" {
		w.t.Errorf("NetBox holds the machine's attestation: MAC %v, verdict %q, EK %q, port %d, last run %q",
			d.MAC, d.AttestVerdict, d.AttestedEKHash, d.AttestedSwitchPort, d.LastRun)
	}
}
