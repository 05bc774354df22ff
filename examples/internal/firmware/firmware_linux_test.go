package firmware

import (
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	"k8s.io/client-go/dynamic"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/examples/internal/machinetest"
	"github.com/fleetkit/fleet/examples/templates"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/tinktest"
	"github.com/fleetkit/fleet/inventory"
)

// A fwCase is one machine, booted once: its firmware, how grub loads its
// kernel, its node's class, and what the runbook says it shows.
type fwCase struct {
	name  string
	node  string
	class string // secure (secure_boot: required) or open (optional)
	fw    firmware
	load  string // loadEFI or loadLegacy
	port  int    // the switch port its node declares
	moved int    // the port it is plugged into instead; 0: the declared one

	efiSecureBoot string // the SecureBoot variable efivarfs shows: "1" or "0"
	eventLog      bool   // whether the kernel got the firmware's event log
	secureBoot    string // attested_secure_boot
	unknown       string // secure_boot_unknown, the audit line's reason for "unknown"
	code          bool   // whether fleetd answered an install code
	console       []string
	journal       string // the journal line the attestation wrote
	outcome       string // attest.install's outcome; its reason is the journal's, or "run <run> started"

	serial, addr, mac string
	diskSerial, decoy string // the serials of its install disk and of the decoy beside it
	tpm               tpm
}

// installDisk is where the machine's install disk, on NVMe, appears: the
// nodes file's model declares it.
const installDisk = "/dev/nvme0n1"

// installerRef is the classes' installer image: the stand-in's, in the
// docker stand-in's store, under Talos's name.
const installerRef = "ghcr.io/siderolabs/installer:v1.13.9"

// The classes of the nodes file.
const (
	classSecure = "secure" // secure_boot: required
	classOpen   = "open"   // secure_boot: optional
)

// noEventLog is why a boot whose kernel got no event log is "unknown".
const noEventLog = "the machine sent no event log"

// TestIntegrationFirmware boots machines through real UEFI firmware and
// Debian's signed boot chain into hookos-attest (see the package doc), and
// holds each to the runbook's words: Secure Boot on admits a worker whose
// class requires it; Secure Boot off refuses it a run under secure_boot:
// required and provisions it under optional; a kernel that got no event
// log attests "unknown", with its reason, and is refused under required;
// a machine on another switch port than its node's is refused a run. In
// each, the guest's sysfs gives its disks their serials, and disksafe
// finds the declared install disk by its serial.
func TestIntegrationFirmware(t *testing.T) {
	tl := needTools(t)
	// 11.5 to 18.8 min measured on 2 loaded cores (BENCHMARKS.md).
	testenv.Time(t, 20*time.Minute, "./examples/internal/firmware")
	start := time.Now()
	env := kubetest.Start(t)
	// fleetd, as a user deploys it, and, static (the initramfs holds no C
	// library), hookos-attest, guestinit, fleet's actions, the stand-in
	// installer, and the runner (tools/tinkerbell/runner, a module of its
	// own).
	static := []string{"CGO_ENABLED=0"}
	bins := machinetest.BuildAll(t,
		machinetest.Build{Module: ".", Args: []string{"./examples/fleetd"}},
		machinetest.Build{Module: ".", Env: static, Args: []string{"-trimpath", "-ldflags=-s -w", "./examples/hookos-attest", "./examples/internal/firmware/guestinit",
			"./examples/wipe-disk", "./examples/install", "./examples/next-boot", "./internal/imagetest/standin/installer"}},
		machinetest.Build{Module: "tools/tinkerbell", Env: static, Args: []string{"-trimpath", "-ldflags=-s -w", "./runner"}},
	)

	cases := []*fwCase{
		{
			name: "SecureBootOn", node: "fw-on", class: classSecure, fw: secureBootOn, load: loadEFI,
			efiSecureBoot: "1", eventLog: true, secureBoot: inventory.SecureBootOn, code: true,
			console: []string{"attest: PASSED", "install code written"},
			journal: "info: started Workflow provision-fw-on-", outcome: "provision",
		},
		{
			name: "SecureBootOffRequired", node: "fw-off-required", class: classSecure, fw: secureBootOff, load: loadEFI,
			efiSecureBoot: "0", eventLog: true, secureBoot: inventory.SecureBootOff,
			console: []string{"attest: PASSED", "attest: no provision: Secure Boot is off"},
			journal: "warning: no provision: Secure Boot is off", outcome: "no provision",
		},
		{
			name: "SecureBootOffOptional", node: "fw-off-optional", class: classOpen, fw: secureBootOff, load: loadEFI,
			efiSecureBoot: "0", eventLog: true, secureBoot: inventory.SecureBootOff, code: true,
			console: []string{"attest: PASSED", "install code written"},
			journal: "info: started Workflow provision-fw-off-optional-", outcome: "provision",
		},
		{
			name: "NoEventLogRequired", node: "fw-no-log", class: classSecure, fw: secureBootOff, load: loadLegacy,
			efiSecureBoot: "0", secureBoot: inventory.SecureBootUnknown, unknown: noEventLog,
			console: []string{"attest: PASSED", "attest: no provision: Secure Boot is unknown: " + noEventLog},
			journal: "warning: no provision: Secure Boot is unknown: " + noEventLog, outcome: "no provision",
		},
		{
			// Its node declares port 7; the machine is plugged into 12.
			name: "AnotherPort", node: "fw-moved", class: classSecure, fw: secureBootOn, load: loadEFI, port: 7, moved: 12,
			efiSecureBoot: "1", eventLog: true, secureBoot: inventory.SecureBootOn,
			console: []string{"attest: PASSED", "attest: no provision: refused: on port 12, expected 7"},
			journal: "warning: refused a run before rendering anything: on port 12, expected 7", outcome: "refused",
		},
	}
	var ports []int
	for i, c := range cases {
		if c.port == 0 {
			c.port = 3 + i
		}
		ports = append(ports, c.plugged())
	}
	nw := newNetwork(t, ports)
	suffix := strings.ToUpper(rand.Text()[:6])
	t0 := time.Now()
	for i, c := range cases {
		c.serial = fmt.Sprintf("SN-FW-%d-%s", i+1, suffix)
		c.addr = fmt.Sprintf("%s%d", nw.prefix, 20+c.port)
		c.mac = fmt.Sprintf("52:54:00:fa:00:%02x", c.port)
		// NVMe and virtio-blk serials hold at most 20 bytes.
		c.diskSerial, c.decoy = fmt.Sprintf("DS-%d-%s", i+1, suffix), fmt.Sprintf("DC-%d-%s", i+1, suffix)
		c.tpm = manufactureTPM(t, tl, t.TempDir())
	}
	t.Logf("manufactured %d TPMs and read their EKs in %v", len(cases), time.Since(t0).Round(10*time.Millisecond))

	dir := t.TempDir()
	nodes, topology := filepath.Join(dir, "nodes.yaml"), filepath.Join(dir, "cluster-topology.json")
	writeNodes(t, nodes, cases)
	if err := os.WriteFile(topology, fmt.Appendf(nil, `{"CLUSTER_NAME": "folly", "K8S_NODE_CIDR": %q, "API_SERVER_IP": "%s10"}`, nw.subnet, nw.prefix), 0o644); err != nil {
		t.Fatal(err)
	}
	// The real Tinkerbell in fleetd's namespace: tink-controller renders
	// and drives the Workflows fleetd creates, and tink-server serves
	// their actions to the machines, which reach it on the uplink.
	ns := env.Namespace(t)
	t0 = time.Now()
	tb := tinktest.Start(t, env, ns, nil)
	fwd, err := testenv.Forward("", net.JoinHostPort(nw.uplink, "0"), tb.GRPC())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fwd.Close)
	tinkServer := fwd.Addr()
	t.Logf("Tinkerbell ready in %v; the machines reach tink-server at %s", time.Since(t0).Round(10*time.Millisecond), tinkServer)
	tink := kubetest.Dynamic(t, env.Config())
	f := machinetest.Start(t, env, machinetest.Config{
		Fleetd: bins.Path("fleetd"), Nodes: nodes, Topology: topology, NS: ns,
		Listen: net.JoinHostPort(nw.uplink, fmt.Sprint(machinetest.FreePort(t, nw.uplink))),
	})
	ca := readFile(t, f.CAFile)

	t0 = time.Now()
	kernel := kernelVersion(t)
	inst := buildInstaller(t, tl, t.TempDir(), bins, kernel, installerRef, ca, installedArgs(t, f.PublicURL))
	img := buildImage(t, tl, t.TempDir(), bins, inst)
	t.Logf("built the boot image in %v: kernel %s, initramfs %d bytes with modules %s; the installer's EFI system partition %d bytes, the installed kernel's arguments %s",
		time.Since(t0).Round(10*time.Millisecond), img.kernel, img.initrd, strings.Join(img.modules, " "), len(inst.esp), inst.args)
	t0 = time.Now()

	var (
		mu    sync.Mutex
		times []string
	)
	t.Run("boot", func(t *testing.T) {
		// Each boot's VM runs on one core (TCG, one vCPU): two at once.
		slots := make(chan struct{}, parallelBoots)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				slots <- struct{}{}
				defer func() { <-slots }()
				dir := t.TempDir()
				install := oldInstall(t, tl, dir)
				before := machinetest.Digest(t, install)
				decoy := newDisk(t, dir+"/decoy.img", io.LimitReader(rand.Reader, diskSize))
				decoyDigest := machinetest.Digest(t, decoy)
				// The runner waits for a Workflow as long as the case
				// needs: HookOS's agent would wait for ever.
				wait := "10s"
				if c.code {
					wait = "90s"
				}
				disk := img.caseDisk(t, tl, dir, c.load, map[string]string{
					"env": fmt.Sprintf("FLEETD_URL=%s\nFLEETD_CA=/etc/fleet/ca.pem\nFLEET_INTERFACE=eth0\nFLEET_ADDRESS=%s/24\nFLEET_LLDP_WAIT=60s\nFLEET_BOOT_DIR=/run/fleet\nFLEET_INSTALL_DISK=%s\nFLEET_INSTALL_DISK_SERIAL=%s\nFLEET_TINK_SERVER=%s\nFLEET_RUNNER_WAIT=%s\n",
						f.PublicURL+"/attest", c.addr, installDisk, c.diskSerial, tinkServer, wait),
					"ca.pem": string(ca),
				})
				r := boot(t, tl, vmConfig{
					fw: c.fw, disk: disk, tpm: c.tpm, netns: nw.ns, tap: port(c.plugged()), mac: c.mac, serial: c.serial,
					disks: []vmDisk{
						{file: install, serial: c.diskSerial, nvme: true},
						{file: decoy, serial: c.decoy},
					},
					// The installed system's address, where Talos would
					// have it from DHCP.
					fwCfg: map[string]string{"opt/fleet/address": c.addr + "/24"},
					marks: []string{markRunner, markRebooting, markTalos, markFetched},
				})
				mu.Lock()
				times = append(times, c.times(r))
				mu.Unlock()
				t.Logf("booted in %v, /init after %v; console without the kernel's lines:\n%s", r.took.Round(100*time.Millisecond),
					r.toInit.Round(100*time.Millisecond), strings.Join(consoleLines(r.console), "\n"))
				c.check(t, f, r)
				c.checkRun(t, f, tink, r, install, before)
				if machinetest.Digest(t, decoy) != decoyDigest {
					t.Error("the decoy disk changed")
				}
			})
		}
	})
	t.Logf("boots, %d at once, in %v:\n%s\nthe whole test: %v", parallelBoots, time.Since(t0).Round(100*time.Millisecond),
		strings.Join(times, "\n"), time.Since(start).Round(100*time.Millisecond))

	// The same firmware, keys and boot chain measure the same PCR 7; Secure
	// Boot on measures another.
	pcr7 := map[string]string{}
	for _, c := range cases {
		pcr7[c.name] = f.Device(t, c.node).AttestedPCR7
	}
	t.Logf("attested_pcr7: %v", pcr7)
	on, off := pcr7["SecureBootOn"], pcr7["SecureBootOffRequired"]
	if on == off || pcr7["SecureBootOffOptional"] != off || pcr7["NoEventLogRequired"] != off || pcr7["AnotherPort"] != on {
		t.Errorf("attested_pcr7 %v; want the boots with Secure Boot off alike, and those with it on alike, and apart", pcr7)
	}
}

// parallelBoots is how many machines boot at once.
const parallelBoots = 2

// plugged is the switch port the machine is plugged into.
func (c *fwCase) plugged() int {
	if c.moved != 0 {
		return c.moved
	}
	return c.port
}

// writeNodes writes the nodes file: each case's node, with its TPM's EKs
// approved.
func writeNodes(t *testing.T, name string, cases []*fwCase) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `models:
  vm:
    manufacturer: QEMU
    name: Standard PC (Q35 + ICH9, 2009)
    disk: %s
classes:
  %s:
    type: worker
    installer_image: %s
    secure_boot: required
  %s:
    type: worker
    installer_image: %s
    secure_boot: optional
nodes:
`, installDisk, classSecure, installerRef, classOpen, installerRef)
	for _, c := range cases {
		fmt.Fprintf(&b, `  %s:
    model: vm
    serial: %s
    class: %s
    switch_port: %d
    address: %s
    bmc: amt
    disk_serial: %s
    approved_ek_rsa2048: %s
    approved_ek_eccp256: %s
`, c.node, c.serial, c.class, c.port, c.addr, c.diskSerial, c.tpm.eks.RSA2048, c.tpm.eks.ECCP256)
	}
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// check holds a boot to the case's words: the console, NetBox's device
// and journal, and fleetd's audit lines.
func (c *fwCase) check(t *testing.T, f *machinetest.Fleet, r bootResult) {
	t.Helper()
	lines := consoleLines(r.console)
	lldp := fmt.Sprintf("lldp: eth0 is on switch port Port %d (Port %d) of %s", c.plugged(), c.plugged(), machinetest.SwitchName)
	want := []string{"fleet-init: efivarfs: SecureBoot=" + c.efiSecureBoot}
	if c.eventLog {
		want = append(want, "fleet-init: event log: ")
	} else {
		want = append(want, "fleet-init: no event log: ")
	}
	want = append(want, lldp)
	want = append(want, c.console...)
	record := "fleet-init: boot record: attested=true install_code=none"
	if c.code {
		record = "fleet-init: boot record: attested=true install_code=set"
	}
	want = append(want, "fleet-init: hookos-attest exited 0 after ", record,
		fmt.Sprintf("fleet-init: disksafe judges: %s (nvme0n1) is the disk that reports the serial %s", installDisk, c.diskSerial))
	want = append(want, c.runLines(f)...)
	want = append(want, "fleet-init: powering off")
	if !machinetest.InOrder(lines, want) {
		t.Errorf("the console does not show, in order, lines beginning:\n%s", strings.Join(want, "\n"))
	}
	if c.eventLog && !slices.ContainsFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "fleet-init: event log: ") && strings.HasSuffix(l, " bytes, banks "+tpmBanks)
	}) {
		t.Errorf("the console does not say the event log carries the banks %s", tpmBanks)
	}
	// The guest kernel's own sysfs gives each disk its serial: the NVMe
	// controller's, and virtio-blk's.
	for _, d := range []string{
		fmt.Sprintf("fleet-init: disk nvme0n1: nvme, 67108864 bytes, serial %q from /sys/block/nvme0n1/device/serial", c.diskSerial),
		fmt.Sprintf(": virtio, 67108864 bytes, serial %q from /sys/block/", c.decoy),
	} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, d) }) {
			t.Errorf("the console has no line with %q", d)
		}
	}
	if !c.code && slices.Contains(lines, "install code written") {
		t.Error("the console says install code written")
	}

	d := f.Device(t, c.node)
	if d.AttestVerdict != "attested" || d.AttestedSecureBoot != c.secureBoot || !hex64.MatchString(d.AttestedPCR7) ||
		d.MAC.String() != c.mac || d.AttestedSwitchPort != c.plugged() {
		t.Errorf("NetBox holds %s: attest_verdict %q, attested_secure_boot %q, attested_pcr7 %q, MAC %v, attested_switch_port %d; want attested, %s, a PCR 7 digest, %s, %d",
			c.node, d.AttestVerdict, d.AttestedSecureBoot, d.AttestedPCR7, d.MAC, d.AttestedSwitchPort, c.secureBoot, c.mac, c.plugged())
	}
	if d.AttestedEKHash != c.tpm.eks.RSA2048 || d.AttestedEKHashECC != c.tpm.eks.ECCP256 {
		t.Errorf("NetBox holds the attested EKs %s and %s, want the approved %s and %s", d.AttestedEKHash, d.AttestedEKHashECC, c.tpm.eks.RSA2048, c.tpm.eks.ECCP256)
	}
	if c.code != (d.LastRun != "") {
		t.Errorf("NetBox holds last_run %q for %s; want a run: %v", d.LastRun, c.node, c.code)
	}

	journal, err := f.WaitJournal(t, c.node, 30*time.Second, c.journal)
	if err != nil {
		t.Error(err)
	}
	t.Logf("journal of %s:\n%s", c.node, strings.Join(journal, "\n"))

	verdicts := f.Audit("attest.verdict", c.serial)
	if len(verdicts) != 1 {
		t.Fatalf("fleetd wrote %d attest.verdict lines for %s, want 1", len(verdicts), c.serial)
	}
	v := verdicts[0]
	unknown, _ := v["secure_boot_unknown"].(string)
	if v["verdict"] != "attested" || v["secure_boot"] != c.secureBoot || v["pcr7"] != d.AttestedPCR7 || unknown != c.unknown {
		t.Errorf("attest.verdict: %v; want attested, secure_boot %s, pcr7 as NetBox holds it, secure_boot_unknown %q", v, c.secureBoot, c.unknown)
	}
	installs := f.Audit("attest.install", c.serial)
	reason := fmt.Sprintf("run %s started", d.LastRun)
	if !c.code {
		_, reason, _ = strings.Cut(c.journal, ": ")
		reason = strings.TrimPrefix(strings.TrimPrefix(reason, "no provision: "), "refused a run before rendering anything: ")
	}
	if len(installs) != 1 || installs[0]["outcome"] != c.outcome || installs[0]["reason"] != reason {
		t.Errorf("attest.install: %v; want one, outcome %q, reason %q", installs, c.outcome, reason)
	}
}

// Console lines whose first appearance a boot times: the runner's start,
// the reboot, the installed system's start, and its config fetched.
const (
	markRunner    = "runner: worker "
	markRebooting = "runner: waitdaemon: rebooting"
	markTalos     = "fleet-init: talos: started"
	markFetched   = "fleet-init: talos: fetched the config: "
)

// runLines are the console's lines, from the runner's start on: for a
// machine with a code, the Workflow's actions, the reboot, and the
// installed system's boot, which fetches its config; for one without, the
// runner finding no action.
func (c *fwCase) runLines(f *machinetest.Fleet) []string {
	start := fmt.Sprintf("runner: worker %s asks tink-server ", c.mac)
	if !c.code {
		return []string{start, fmt.Sprintf("runner: no action for %s for 10s; stopping", c.mac), "fleet-init: runner exited 0 after "}
	}
	im := templates.DefaultImages
	action := func(name, image string) string {
		return fmt.Sprintf("runner: action %s (%s) of Workflow %s/provision-%s-", name, image, f.NS, c.node)
	}
	return []string{
		start,
		action("wipe-disk", im.WipeDisk),
		"wipe: " + installDisk + " reports the serial " + c.diskSerial,
		"runner: action wipe-disk SUCCESS after ",
		action("install", im.Install),
		"install: installed Talos to " + installDisk,
		"runner: action install SUCCESS after ",
		action("next-boot", im.NextBoot),
		"next-boot: " + installDisk + " boots next: Boot",
		"runner: action next-boot SUCCESS after ",
		action("reboot", im.Reboot),
		"runner: waitdaemon: reboot in 10s",
		"runner: action reboot SUCCESS after ",
		markRebooting,
		markTalos,
		"fleet-init: talos: the firmware booted Boot",
		"fleet-init: talos: talos.config=" + f.PublicURL + configserve.PathPrefix + "${code}",
		fmt.Sprintf("fleet-init: talos: META on nvme0n1 (serial %s) holds the install code", c.diskSerial),
		markFetched,
	}
}

// times says how long the boot's parts took.
func (c *fwCase) times(r bootResult) string {
	s := fmt.Sprintf("%s: %v, /init at %v", c.name, r.took.Round(100*time.Millisecond), r.toInit.Round(100*time.Millisecond))
	at := func(m string) time.Duration { return r.marks[m].Round(100 * time.Millisecond) }
	// since says how long after the mark from the mark to came, or that
	// the console never showed it.
	since := func(from, to string) string {
		if _, ok := r.marks[to]; !ok {
			return "never"
		}
		return (at(to) - at(from)).String()
	}
	if _, ok := r.marks[markRebooting]; ok {
		s += fmt.Sprintf("; the actions from the runner's start to the reboot %s, the reboot to the installed system's /init %s, to its config fetched %s",
			since(markRunner, markRebooting), since(markRebooting, markTalos), since(markRebooting, markFetched))
	} else if _, ok := r.marks[markRunner]; ok {
		s += fmt.Sprintf("; the runner from %v to the power-off", at(markRunner))
	}
	return s
}

// lineWith returns the console's first line beginning with prefix.
func lineWith(lines []string, prefix string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// checkRun holds the run to the case's words, after the machine's
// power-off: with a code, the Workflow SUCCESS through the real
// controller, each action run by the machine; the install disk installed,
// the entry next-boot made the one the firmware booted, from the
// installed disk's EFI system partition; the config served once (a second
// fetch with META's code is 410) and the device active. Without one, no
// Workflow, and the install disk as it was.
func (c *fwCase) checkRun(t *testing.T, f *machinetest.Fleet, tink dynamic.Interface, r bootResult, install, before string) {
	t.Helper()
	ctx := t.Context()
	if !c.code {
		for _, wf := range machinetest.Workflows(ctx, t, tink, f.NS) {
			if strings.HasPrefix(wf.Name, "provision-"+c.node+"-") {
				t.Errorf("fleetd created Workflow %s for %s", wf.Name, c.node)
			}
		}
		if machinetest.Digest(t, install) != before {
			t.Error("the install disk changed")
		}
		return
	}
	name := f.Device(t, c.node).LastRun
	// The controller moves the Workflow from POST to its end after the
	// last report.
	wf := machinetest.Follow(ctx, t, tink, f.NS, name, time.Now(), time.Minute, 0, machinetest.Ended)
	var acts []string
	if len(wf.Status.Tasks) == 1 {
		for _, a := range wf.Status.Tasks[0].Actions {
			acts = append(acts, fmt.Sprintf("%s %s %s", a.Name, a.State, a.ExecutionDuration))
			if a.State != tinkerbell.WorkflowStateSuccess {
				t.Errorf("action %s: %s %q, want SUCCESS", a.Name, a.State, a.Message)
			}
		}
		if got := wf.Status.Tasks[0].AgentID; got != c.mac {
			t.Errorf("the task's agent is %q, want the machine's MAC %s", got, c.mac)
		}
	}
	t.Logf("Workflow %s ended %s; actions, as Tinkerbell recorded them: %s", name, wf.Status.State, strings.Join(acts, ", "))
	if wf.Status.State != tinkerbell.WorkflowStateSuccess || len(acts) != 4 {
		t.Errorf("Workflow %s ended %s with %d actions, want SUCCESS with wipe-disk, install, next-boot and reboot", name, wf.Status.State, len(acts))
	}

	disk := installed(t, install)
	lines := consoleLines(r.console)
	// next-boot's entry is the one the firmware booted, and it names the
	// installed disk's EFI system partition.
	entry, _, _ := strings.Cut(strings.TrimPrefix(lineWith(lines, "next-boot: "+installDisk+" boots next: "), "next-boot: "+installDisk+" boots next: "), " ")
	booted := lineWith(lines, "fleet-init: talos: the firmware booted ")
	want := fmt.Sprintf("fleet-init: talos: the firmware booted %s %q: HD(%d,GPT,%s)/", entry, "Talos (fleet)", disk.ESP.Index, disk.ESP.ID)
	if entry == "" || !strings.HasPrefix(booted, want) || !strings.EqualFold(booted[len(want):], `\EFI\BOOT\BOOTX64.EFI`) {
		t.Errorf("the installed system says %q; want %s\\EFI\\BOOT\\BOOTX64.EFI: the entry next-boot set, on the installed EFI system partition", booted, want)
	}
	if l := lineWith(lines, markFetched); !strings.HasSuffix(l, fmt.Sprintf(" bytes, a worker's v1alpha1 machine config for %s, install disk serial %s", c.addr, c.diskSerial)) {
		t.Errorf("the installed system says %q", l)
	}

	// Served once: META's code, which the installed system fetched with,
	// is spent.
	code := disk.Meta[0x0b]
	if code == "" {
		t.Fatal("META holds no install code")
	}
	if st, _ := f.FetchConfig(ctx, t, nil, code); st != http.StatusGone {
		t.Errorf("a second fetch of the config with META's code: %d, want 410", st)
	}
	if err := testenv.Until(ctx, time.Minute, func() bool { return f.Device(t, c.node).Status == inventory.StatusActive }); err != nil {
		t.Errorf("NetBox holds %s %s, want active", c.node, f.Device(t, c.node).Status)
	}
	journal, err := f.WaitJournal(t, c.node, time.Minute, "success: fleetd served the config of "+name,
		"success: Workflow "+name+" ended SUCCESS", "warning: the node asked again for the Talos config fleetd served it")
	if err != nil {
		t.Error(err)
	}
	if strings.Contains(f.Log.String(), code) || slices.ContainsFunc(journal, func(l string) bool { return strings.Contains(l, code) }) || strings.Contains(r.console, code) {
		t.Error("fleetd's log, the journal or the console holds the install code")
	}
}
