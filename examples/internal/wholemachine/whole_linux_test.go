package wholemachine

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/siderolabs/talos/pkg/machinery/meta"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/internal/dockertest"
	"github.com/fleetkit/fleet/internal/imagetest"
	"github.com/fleetkit/fleet/internal/imagetest/standin"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/tinktest"
	"github.com/fleetkit/fleet/inventory"
)

// The node every world declares: a worker on switch port 7.
const (
	node         = "w-01"
	declaredPort = 7
)

// TestIntegrationWholeMachine provisions one machine of real parts (see
// the package doc) through fleetd and the real Tinkerbell, as the
// runbook's "Plug a machine in" does, and refuses it when it is plugged
// into another port, or when its install disk is not the declared one by
// the time wipe-disk runs.
func TestIntegrationWholeMachine(t *testing.T) {
	tl := needTools(t)
	env := kubetest.Start(t)
	bins := build(t)
	img := buildImages(t)
	s := shared{tl: tl, env: env, bins: bins, img: img}

	t.Run("provision", func(t *testing.T) {
		t0 := time.Now()
		w := newWorld(t, s, declaredPort, true)
		ctx := t.Context()
		decoy := digest(t, w.m.decoy)
		before := img.pulls()

		rec := w.attest(ctx)
		wf := w.workflow(ctx)
		end := w.run(ctx, wf)
		if end.Status.State != tinkerbell.WorkflowStateSuccess {
			t.Fatalf("Workflow %s ended %s, want SUCCESS: %s", wf.Name, end.Status.State, progress(end))
		}
		// tink-controller took the global timeout from the Template: the
		// figure fleetd's watch reads for a run that never reports.
		if end.Status.GlobalTimeout != 3600 {
			t.Errorf("the Workflow's globalTimeout is %d, want the Template's 3600", end.Status.GlobalTimeout)
		}
		disk := w.m.install.path
		want := map[string]string{
			"wipe-disk": "wipe: " + disk + " reports the serial " + w.m.cfg.diskSerial,
			"install":   "install: installed Talos to " + disk,
			// The machine has no UEFI firmware (see the package doc).
			"next-boot": "next-boot: this machine booted by legacy BIOS, which has no BootNext; its boot order decides what boots next, and nothing was changed",
			"reboot":    `waitdaemon: a stand-in: would run "reboot" in alpine after 10 s; the test reboots the machine instead`,
		}
		acts := actions(t, end)
		var names []string
		for _, a := range acts {
			names = append(names, a.Name)
			if a.State != tinkerbell.WorkflowStateSuccess {
				t.Errorf("action %s: %s %q, want SUCCESS", a.Name, a.State, a.Message)
			}
			if line, ok := want[a.Name]; ok {
				printed(t, w.d, a, line)
			}
		}
		if !slices.Equal(names, []string{"wipe-disk", "install", "next-boot", "reboot"}) {
			t.Fatalf("the Workflow's actions are %v, want wipe-disk, install, next-boot and reboot", names)
		}
		// Each image was pulled from the registry by the machine's
		// dockerd: the actions' by the agent, the installer's once, by
		// wipe-disk (install runs it from the machine's cache).
		after := img.pulls()
		for repo, n := range after {
			if n == before[repo] {
				t.Errorf("the registry served no pull of %s", repo)
			}
		}
		if n := after[imagetest.InstallerRepo] - before[imagetest.InstallerRepo]; n != 1 {
			t.Errorf("the registry served %d pulls of the installer, want 1", n)
		}

		// The machine reboots into the installed Talos (the stand-in's
		// layout): its code is the one its META holds, as the install
		// action gave it to the installer.
		in := w.installed()
		if in.Image != img.installer {
			t.Errorf("the install disk holds image %q, want %s", in.Image, img.installer)
		}
		code := in.Meta[uint8(meta.DownloadURLCode)]
		if code == "" || code != rec.Code {
			t.Fatalf("META's install code is not the one this boot received (META holds %d values)", len(in.Meta))
		}
		status, body := w.fetch(ctx, code)
		if status != http.StatusOK || !strings.Contains(body, "machine:") {
			t.Fatalf("the first fetch of the config: %d, %d bytes; want 200 and a machine config", status, len(body))
		}
		if !strings.Contains(body, w.m.addr) || !strings.Contains(body, w.m.cfg.diskSerial) {
			t.Errorf("the config does not set the node's address %s and install disk serial %s", w.m.addr, w.m.cfg.diskSerial)
		}
		if err := eventually(ctx, time.Minute, func() bool { return w.f.device(node).Status == inventory.StatusActive }); err != nil {
			t.Errorf("NetBox holds %s %s, want active", node, w.f.device(node).Status)
		}
		t.Logf("the whole machine: from its parts' start to its node active, %v", time.Since(t0).Round(10*time.Millisecond))
		if status, _ := w.fetch(ctx, code); status != http.StatusGone {
			t.Errorf("the second fetch of the config: %d, want 410", status)
		}

		// The journal of the runbook's happy path: the run started, with
		// the note that the machine attested from HookOS, then the config
		// served (and, for the second fetch, the runbook's
		// FleetInstallConfigRefetched line) and the run's end, which
		// fleetd journals as it learns them.
		w.f.waitJournal(node, "Workflow "+wf.Name+" ended SUCCESS", 2*time.Minute)
		w.f.waitJournal(node, "fleetd served the config of "+wf.Name, time.Minute)
		refetched := "warning: the node asked again for the Talos config fleetd served it"
		journal := w.f.waitJournal(node, refetched, time.Minute)
		started := "info: started Workflow " + wf.Name + "; the machine attested from HookOS at " + w.m.addr
		for _, want := range [][]string{
			{started, "success: fleetd served the config of " + wf.Name, refetched},
			{started, "success: Workflow " + wf.Name + " ended SUCCESS"},
		} {
			if !inOrder(journal, want) {
				t.Errorf("journal of %s:\n%s\nwant lines with, in order:\n%s", node, strings.Join(journal, "\n"), strings.Join(want, "\n"))
			}
		}
		t.Logf("journal of %s:\n%s", node, strings.Join(journal, "\n"))
		d := w.f.device(node)
		if d.MAC.String() != w.m.mac.String() || d.AttestVerdict != "attested" || d.AttestedSwitchPort != declaredPort || d.LastRun != wf.Name {
			t.Errorf("NetBox holds %+v", d)
		}
		if digest(t, w.m.decoy) != decoy {
			t.Error("the decoy disk changed")
		}
		w.noSecrets(code)
	})

	t.Run("another port", func(t *testing.T) {
		w := newWorld(t, s, 12, false)
		ctx := t.Context()
		install, decoy := digest(t, w.m.install), digest(t, w.m.decoy)

		r, rec := w.attestRun(ctx)
		const why = "on port 12, expected 7"
		want := "lldp: eth0 is on switch port Port 12 (Port 12) of " + switchName + "\nattest: PASSED\nattest: no provision: refused: " + why + "\n"
		if r.code != 0 || r.stdout != want {
			t.Errorf("hookos-attest: %+v; want exit 0 and %q: attested, refused a run, no install code", r, want)
		}
		if !rec.Attested || rec.Code != "" {
			t.Errorf("the boot record: attested %v, with a code %v; want attested without a code", rec.Attested, rec.Code != "")
		}
		journal := w.f.waitJournal(node, why, time.Minute)
		if !slices.Contains(journal, "warning: refused a run before rendering anything: "+why) {
			t.Errorf("journal of %s:\n%s", node, strings.Join(journal, "\n"))
		}
		if wfs := workflows(ctx, t, w.tink, w.f.ns); len(wfs) != 0 {
			t.Errorf("fleetd created %d Workflows", len(wfs))
		}
		if digest(t, w.m.install) != install || digest(t, w.m.decoy) != decoy {
			t.Error("a disk changed")
		}
	})

	t.Run("disk serial changed after attestation", func(t *testing.T) {
		w := newWorld(t, s, declaredPort, true)
		ctx := t.Context()
		install, decoy := digest(t, w.m.install), digest(t, w.m.decoy)
		before := img.pulls()

		w.attest(ctx)
		wf := w.workflow(ctx)
		// Another disk in the install disk's slot: it reports another
		// serial.
		w.m.setSerial(w.m.install, "S3Z9NB0K999999X")
		end := w.run(ctx, wf)
		if end.Status.State != tinkerbell.WorkflowStateFailed {
			t.Fatalf("Workflow %s ended %s, want FAILED: %s", wf.Name, end.Status.State, progress(end))
		}
		acts := actions(t, end)
		// Tinkerbell's message for a failed action says only that it
		// completed; the reason is the action's output (the runbook's
		// row for a Workflow that ended FAILED).
		if a := acts[0]; a.Name != "wipe-disk" || a.State != tinkerbell.WorkflowStateFailed || a.Message != "action completed" {
			t.Errorf("the first action: %s %s %q, want wipe-disk FAILED \"action completed\"", a.Name, a.State, a.Message)
		} else {
			printed(t, w.d, a, "wipe: no disk reports the serial "+w.m.cfg.diskSerial)
		}
		for _, a := range acts[1:] {
			if a.State != tinkerbell.WorkflowStatePending {
				t.Errorf("action %s: %s, want PENDING: it follows a failed action", a.Name, a.State)
			}
		}
		if n := img.pulls()[imagetest.InstallerRepo] - before[imagetest.InstallerRepo]; n != 0 {
			t.Errorf("the registry served %d pulls of the installer, want none: wipe-disk judges the disks before it pulls", n)
		}
		if digest(t, w.m.install) != install || digest(t, w.m.decoy) != decoy {
			t.Error("a disk changed")
		}
		// The runbook's row: the journal names the action, and where its
		// output is (the address the machine attested from).
		journal := w.f.waitJournal(node, " ended FAILED", 2*time.Minute)
		failed := "warning: Workflow " + wf.Name + " ended FAILED at action wipe-disk; read its output with journalctl -t hookos HOOKOS_HOST=" + w.m.addr
		if !slices.Contains(journal, failed) {
			t.Errorf("journal of %s:\n%s\nwant the line %q", node, strings.Join(journal, "\n"), failed)
		}
		if s := w.f.device(node).Status; s != inventory.StatusPlanned {
			t.Errorf("NetBox holds %s %s, want planned", node, s)
		}
	})
}

// shared are the parts every world uses: the test's programs and control
// plane, fleetd and hookos-attest, and the images.
type shared struct {
	tl   tools
	env  *kubetest.Env
	bins binaries
	img  images
}

// A world is one machine, its switch, the fleetd that provisions it, and,
// when it runs Workflows, Tinkerbell and the machine's dockerd.
type world struct {
	t    *testing.T
	m    *machine
	f    *fleet
	tink dynamic.Interface
	bins binaries
	tb   *tinktest.Tinkerbell // nil in a world that runs no Workflow
	d    *dockertest.Docker   // likewise
}

// newWorld builds a machine plugged into switch port port, declares it in
// a nodes file as node on declaredPort with its TPM's EKs approved, and
// starts fleetd; with tink, also the real Tinkerbell in fleetd's namespace
// and the machine's containerd and dockerd, whose mount namespace becomes
// the machine's. The machine's agent starts once it attested (start).
func newWorld(t *testing.T, s shared, port int, tink bool) *world {
	t.Helper()
	suffix := strings.ToUpper(rand.Text()[:8])
	m := newMachine(t, s.tl, machineConfig{
		serial:     "SN-WHOLE-" + suffix,
		diskSerial: "DS-WHOLE-" + suffix,
		port:       port,
		diskSize:   64 << 20,
	})
	ns := s.env.Namespace(t)
	w := &world{t: t, m: m, bins: s.bins}
	if tink {
		w.tb = tinktest.Start(t, s.env, ns, nil)
		reg := s.img.reg.Host()
		w.d = dockertest.Start(t, &dockertest.Config{
			Netns:      m.mNS,
			Forward:    []string{reg, w.tb.GRPC()},
			Registries: map[string]string{actionRegistry: reg, waitdaemonRegistry: reg},
		})
		m.enterDocker(w.d)
	}
	ek := m.approvedEKs()
	dir := t.TempDir()
	nodes := filepath.Join(dir, "nodes.yaml")
	if err := os.WriteFile(nodes, fmt.Appendf(nil, `models:
  box:
    manufacturer: Minisforum
    name: MS-01
    disk: %s
classes:
  worker:
    type: worker
    installer_image: %s
nodes:
  %s:
    model: box
    serial: %s
    class: worker
    switch_port: %d
    address: %s
    bmc: amt
    disk_serial: %s
    approved_ek_rsa2048: %s
    approved_ek_eccp256: %s
`, m.install.path, s.img.installer, node, m.cfg.serial, declaredPort, m.addr, m.cfg.diskSerial, ek.RSA2048, ek.ECCP256), 0o644); err != nil {
		t.Fatal(err)
	}
	topo := filepath.Join(dir, "cluster-topology.json")
	apiServer := strings.TrimSuffix(m.uplink, ".1") + ".10"
	if err := os.WriteFile(topo, fmt.Appendf(nil, `{"CLUSTER_NAME": "folly", "K8S_NODE_CIDR": %q, "API_SERVER_IP": %q}`, m.subnet, apiServer), 0o644); err != nil {
		t.Fatal(err)
	}
	w.f = startFleet(t, s.env, fleetConfig{
		nodes: nodes, topology: topo, bins: s.bins, ns: ns,
		listen: net.JoinHostPort(m.uplink, fmt.Sprint(freePort(t, m.uplink))),
	})
	var err error
	if w.tink, err = dynamic.NewForConfig(s.env.Config()); err != nil {
		t.Fatal(err)
	}
	return w
}

// attestRun boots HookOS's agent: hookos-attest in the machine, and returns
// what it did and this boot's record.
func (w *world) attestRun(ctx context.Context) (result, disksafe.BootRecord) {
	w.t.Helper()
	r := w.m.run(ctx, map[string]string{
		"FLEETD_URL":      w.f.publicURL + "/attest",
		"FLEETD_CA":       w.f.caFile,
		"FLEET_INTERFACE": "eth0",
		"FLEET_TPM":       w.m.tpm,
		"FLEET_BOOT_DIR":  "/run/fleet",
		"FLEET_LLDP_WAIT": "20s",
	}, w.bins.path("hookos-attest"))
	rec, err := disksafe.ReadBootRecord(filepath.Join(w.m.dir, "run/fleet"))
	if err != nil {
		w.t.Fatalf("the boot record: %v", err)
	}
	return r, rec
}

// attest boots HookOS's agent and wants the port it is plugged into
// named, attest: PASSED, and the install code written.
func (w *world) attest(ctx context.Context) disksafe.BootRecord {
	w.t.Helper()
	r, rec := w.attestRun(ctx)
	want := fmt.Sprintf("lldp: eth0 is on switch port Port %d (Port %d) of %s\nattest: PASSED\ninstall code written\n", w.m.cfg.port, w.m.cfg.port, switchName)
	if r.code != 0 || r.stdout != want {
		w.t.Fatalf("hookos-attest: %+v; want exit 0 and %q", r, want)
	}
	if !rec.Attested || rec.Code == "" {
		w.t.Fatalf("the boot record: attested %v, with a code %v; want both", rec.Attested, rec.Code != "")
	}
	return rec
}

// workflow returns the one Workflow fleetd created for the node.
func (w *world) workflow(ctx context.Context) tinkerbell.Workflow {
	w.t.Helper()
	wfs := workflows(ctx, w.t, w.tink, w.f.ns)
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
	agent := w.d.StartAgent(w.t, w.m.mac.String(), w.tb.GRPC(), nil)
	end := waitRun(ctx, w.t, w.tink, w.f.ns, wf.Name, agent.Started())
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

// installed reads what the stand-in installer wrote to the install disk,
// as the installed Talos reads its META at its boot.
func (w *world) installed() standin.Installed {
	w.t.Helper()
	f, err := os.Open(w.m.install.path)
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		w.t.Fatal(err)
	}
	in, ok, err := standin.Read(f, size)
	if err != nil || !ok {
		w.t.Fatalf("the install disk holds no install of the stand-in installer (%v)", err)
	}
	return in
}

// fetch GETs the node's config as Talos does, from the machine, at the URL
// of its talos.config= kernel argument with the code for ${code}.
func (w *world) fetch(ctx context.Context, code string) (int, string) {
	w.t.Helper()
	pem, err := os.ReadFile(w.f.caFile)
	if err != nil {
		w.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{
		Transport: &http.Transport{DialContext: w.m.dial, TLSClientConfig: &tls.Config{RootCAs: pool}},
		Timeout:   30 * time.Second,
	}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.f.publicURL+configserve.PathPrefix+code, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	rsp, err := c.Do(req)
	if err != nil {
		w.t.Fatalf("fetch the config: %v", err)
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if err != nil {
		w.t.Fatalf("read the config: %v", err)
	}
	return rsp.StatusCode, string(b)
}

// noSecrets fails when the install code is in fleetd's log, NetBox's
// journal or a Workflow.
func (w *world) noSecrets(code string) {
	w.t.Helper()
	if strings.Contains(w.f.log.String(), code) {
		w.t.Error("fleetd's log holds the install code")
	}
	if slices.ContainsFunc(w.f.journal(node), func(l string) bool { return strings.Contains(l, code) }) {
		w.t.Error("the journal holds the install code")
	}
	for _, wf := range workflows(w.t.Context(), w.t, w.tink, w.f.ns) {
		if strings.Contains(fmt.Sprintf("%+v", wf), code) {
			w.t.Errorf("Workflow %s holds the install code", wf.Name)
		}
	}
}

// inOrder reports whether lines hold, in this order, a line containing
// each of want.
func inOrder(lines, want []string) bool {
	i := 0
	for _, l := range lines {
		if i < len(want) && strings.Contains(l, want[i]) {
			i++
		}
	}
	return i == len(want)
}
