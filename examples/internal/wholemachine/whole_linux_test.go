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
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/inventory"
)

// The node every world declares: a worker on switch port 7.
const (
	node           = "w-01"
	declaredPort   = 7
	installerImage = "factory.talos.dev/installer/wholemachine:" + installerVersion
)

// TestIntegrationWholeMachine provisions one machine of real parts (see
// the package doc) through fleetd, as the runbook's "Plug a machine in"
// does, and refuses it when it is plugged into another port, or when its
// install disk is not the declared one by the time wipe-disk runs.
func TestIntegrationWholeMachine(t *testing.T) {
	tl := needTools(t)
	env := kubetest.Start(t)
	bins := build(t)

	t.Run("provision", func(t *testing.T) {
		w := newWorld(t, tl, env, bins, declaredPort)
		ctx := t.Context()
		decoy := digest(t, w.m.decoy)

		rec := w.attest(ctx)
		wf := w.workflow(ctx)
		run := render(ctx, t, w.tink, wf)
		results := w.runActions(ctx, wf, run)
		disk := w.m.install.path
		for action, want := range map[string]string{
			"wipe-disk": "wipe: " + disk + " reports the serial " + w.m.cfg.diskSerial + "\n",
			"install":   "install: installed Talos to " + disk + "\n",
			"next-boot": "next-boot: " + disk + " boots next: Boot0000 Talos (fleet)\n",
		} {
			if r, ok := results[action]; !ok || r.code != 0 || r.stdout != want {
				t.Errorf("%s: %+v, want exit 0 and %q", action, r, want)
			}
		}
		if len(results) != 3 {
			t.Fatalf("ran %d actions, want wipe-disk, install and next-boot", len(results))
		}

		// The firmware boots the installed ESP next, once; its boot order
		// is unchanged.
		_, label, path, order := w.m.bootNext()
		esp := w.esp()
		if label != "Talos (fleet)" || !strings.HasPrefix(path, fmt.Sprintf("HD(1,GPT,%s,", esp)) ||
			!strings.HasSuffix(path, `/File(\EFI\BOOT\BOOTX64.EFI)`) || !slices.Equal(order, []uint16{1}) {
			t.Errorf("BootNext is %q %s, BootOrder %v; want the ESP %s's loader, and BootOrder [1]", label, path, order, esp)
		}

		// The installed Talos boots: its code is the one its META holds, as
		// the install action gave it to the installer.
		image, values, ok, err := readInstall(disk)
		if err != nil || !ok || image != installerImage {
			t.Fatalf("the install disk holds image %q (install %v, %v), want %s", image, ok, err, installerImage)
		}
		code := values[uint8(meta.DownloadURLCode)]
		if code == "" || code != rec.Code {
			t.Fatalf("META's install code is not the one this boot received (META holds %d values)", len(values))
		}
		status, body := w.fetch(ctx, code)
		if status != http.StatusOK || !strings.Contains(body, "machine:") {
			t.Fatalf("the first fetch of the config: %d, %d bytes; want 200 and a machine config", status, len(body))
		}
		if !strings.Contains(body, w.m.addr) || !strings.Contains(body, w.m.cfg.diskSerial) {
			t.Errorf("the config does not set the node's address %s and install disk serial %s", w.m.addr, w.m.cfg.diskSerial)
		}
		if err := eventually(ctx, 20*time.Second, func() bool { return w.f.device(node).Status == inventory.StatusActive }); err != nil {
			t.Errorf("NetBox holds %s %s, want active", node, w.f.device(node).Status)
		}
		if status, _ := w.fetch(ctx, code); status != http.StatusGone {
			t.Errorf("the second fetch of the config: %d, want 410", status)
		}

		// The journal of the runbook's happy path: the run started, with
		// the note that the machine attested from HookOS, then the config
		// served (and, for the second fetch, the runbook's
		// FleetInstallConfigRefetched line) and the run's end, which
		// fleetd journals as it learns them.
		w.f.waitJournal(node, "Workflow "+wf.Name+" ended SUCCESS", 60*time.Second)
		w.f.waitJournal(node, "fleetd served the config of "+wf.Name, 20*time.Second)
		refetched := "warning: the node asked again for the Talos config fleetd served it"
		journal := w.f.waitJournal(node, refetched, 20*time.Second)
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
		w := newWorld(t, tl, env, bins, 12)
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
		journal := w.f.waitJournal(node, why, 20*time.Second)
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
		w := newWorld(t, tl, env, bins, declaredPort)
		ctx := t.Context()
		install, decoy := digest(t, w.m.install), digest(t, w.m.decoy)

		w.attest(ctx)
		wf := w.workflow(ctx)
		// Another disk in the install disk's slot: it reports another
		// serial.
		w.m.setSerial(w.m.install, "S3Z9NB0K999999X")
		run := render(ctx, t, w.tink, wf)
		results := w.runActions(ctx, wf, run)
		want := "wipe: no disk reports the serial " + w.m.cfg.diskSerial + "\n"
		if r := results["wipe-disk"]; r.code != 1 || !strings.HasPrefix(r.stderr, want) {
			t.Errorf("wipe-disk: %+v, want exit 1 and %q", r, want)
		}
		if len(results) != 1 {
			t.Errorf("ran %d actions, want wipe-disk alone", len(results))
		}
		if digest(t, w.m.install) != install || digest(t, w.m.decoy) != decoy {
			t.Error("a disk changed")
		}
		journal := w.f.waitJournal(node, " ended FAILED", 60*time.Second)
		if !slices.ContainsFunc(journal, func(l string) bool { return strings.Contains(l, wf.Name) && strings.Contains(l, "wipe-disk") }) {
			t.Errorf("no journal line names the failed action wipe-disk:\n%s", strings.Join(journal, "\n"))
		}
		if s := w.f.device(node).Status; s != inventory.StatusPlanned {
			t.Errorf("NetBox holds %s %s, want planned", node, s)
		}
	})
}

// A world is one machine, its switch, and the fleetd that provisions it.
type world struct {
	t    *testing.T
	m    *machine
	f    *fleet
	tink dynamic.Interface
	bins binaries
}

// newWorld builds a machine plugged into switch port port, declares it in
// a nodes file as node on declaredPort with its TPM's EKs approved, and
// starts fleetd.
func newWorld(t *testing.T, tl tools, env *kubetest.Env, bins binaries, port int) *world {
	t.Helper()
	suffix := strings.ToUpper(rand.Text()[:8])
	m := newMachine(t, tl, machineConfig{
		serial:     "SN-WHOLE-" + suffix,
		diskSerial: "DS-WHOLE-" + suffix,
		port:       port,
		diskSize:   64 << 20,
	})
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
`, m.install.path, installerImage, node, m.cfg.serial, declaredPort, m.addr, m.cfg.diskSerial, ek.RSA2048, ek.ECCP256), 0o644); err != nil {
		t.Fatal(err)
	}
	topo := filepath.Join(dir, "cluster-topology.json")
	apiServer := strings.TrimSuffix(m.uplink, ".1") + ".10"
	if err := os.WriteFile(topo, fmt.Appendf(nil, `{"CLUSTER_NAME": "folly", "K8S_NODE_CIDR": %q, "API_SERVER_IP": %q}`, m.subnet, apiServer), 0o644); err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, env, fleetConfig{
		nodes: nodes, topology: topo, bins: bins,
		listen: net.JoinHostPort(m.uplink, fmt.Sprint(freePort(t, m.uplink))),
	})
	tink, err := dynamic.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, m: m, f: f, tink: tink, bins: bins}
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

// runActions plays Tinkerbell's agent: it runs the rendered actions in
// order, each built binary in the machine with the action's environment,
// reporting each action's state as Tinkerbell's controller writes it, and
// stops at the first that fails. The last action, reboot, is
// waitdaemon's: it reports success and reboots the machine, which the test
// then plays. It returns what each action that ran did.
func (w *world) runActions(ctx context.Context, wf tinkerbell.Workflow, run tinkRun) map[string]result {
	w.t.Helper()
	task := run.Tasks[0]
	if task.Worker != w.m.mac.String() {
		w.t.Errorf("the task's worker is %q, want the machine's MAC %s", task.Worker, w.m.mac)
	}
	states := make([]tinkerbell.WorkflowState, len(task.Actions))
	for i := range states {
		states[i] = tinkerbell.WorkflowStatePending
	}
	say := func(state tinkerbell.WorkflowState, action string) {
		if err := report(ctx, w.tink, wf, run, state, action, states); err != nil {
			w.t.Fatal(err)
		}
	}
	results := map[string]result{}
	for i, a := range task.Actions {
		states[i] = tinkerbell.WorkflowStateRunning
		say(tinkerbell.WorkflowStateRunning, a.Name)
		if a.Name == "reboot" {
			if i != len(task.Actions)-1 {
				w.t.Fatalf("reboot is not the last action of %s", wf.Name)
			}
			states[i] = tinkerbell.WorkflowStateSuccess
			say(tinkerbell.WorkflowStateSuccess, a.Name)
			return results
		}
		if !slices.Contains([]string{"wipe-disk", "install", "next-boot"}, a.Name) {
			w.t.Fatalf("the Template's action %s (%s) is none of fleet's", a.Name, a.Image)
		}
		env := environment(task, a)
		if a.Name == "wipe-disk" {
			env["FLEET_LOOP_DEVICES"] = "true" // the machine's disks are loop devices
		}
		r := w.m.run(ctx, env, w.bins.path(a.Name))
		results[a.Name] = r
		if r.code != 0 {
			states[i] = tinkerbell.WorkflowStateFailed
			say(tinkerbell.WorkflowStateFailed, a.Name)
			return results
		}
		states[i] = tinkerbell.WorkflowStateSuccess
	}
	w.t.Fatalf("the Template of %s has no reboot action", wf.Name)
	return nil
}

// esp returns the unique GUID of the install disk's EFI system partition.
func (w *world) esp() disksafe.GUID {
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
	gpt, err := disksafe.ReadGPT(f, size, 512)
	if err != nil || len(gpt.Partitions) == 0 || gpt.Partitions[0].Type != disksafe.ESPType {
		w.t.Fatalf("the install disk's GPT: %+v, %v", gpt, err)
	}
	return gpt.Partitions[0].ID
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
