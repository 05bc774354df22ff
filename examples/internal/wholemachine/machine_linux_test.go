package wholemachine

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetkit/fleet/examples/internal/machinetest"
	"github.com/fleetkit/fleet/internal/dockertest"
	"github.com/fleetkit/fleet/internal/testenv"
)

// tools are the programs the machine is made with.
type tools struct {
	ip, lldpd, lldpcli, swtpm, swtpmSetup, swtpmLocalCA, losetup, sfdisk, nsenter string
}

// needTools ends t unless it runs as root with every program the machine
// needs.
func needTools(t *testing.T) tools {
	t.Helper()
	testenv.Short(t)
	testenv.Root(t, "network namespaces, mount namespaces, loop devices")
	return tools{
		ip:           testenv.Command(t, "ip", "iproute2"),
		lldpd:        testenv.Command(t, "lldpd", "lldpd"),
		lldpcli:      testenv.Command(t, "lldpcli", "lldpd"),
		swtpm:        testenv.Command(t, "swtpm", "swtpm"),
		swtpmSetup:   testenv.Command(t, "swtpm_setup", "swtpm-tools"),
		swtpmLocalCA: testenv.Command(t, "swtpm_localca", "swtpm-tools"),
		losetup:      testenv.Command(t, "losetup", "mount"),
		sfdisk:       testenv.Command(t, "sfdisk", "fdisk"),
		nsenter:      testenv.Command(t, "nsenter", "util-linux"),
	}
}

// machineConfig is what a machine is made of.
type machineConfig struct {
	serial     string // its SMBIOS serial
	diskSerial string // its install disk's serial
	port       int    // the switch port it is plugged into, as lldpd names it "Port N"
	diskSize   int64
	noLLDP     bool // the switch sends no LLDP frame: no lldpd runs
}

// A machine is a bare-metal machine of real parts (see the package doc).
type machine struct {
	t      *testing.T
	tl     tools
	cfg    machineConfig
	dir    string // its own parts: run, sysclass, bin, tpm
	swNS   string // the switch's network namespace
	mNS    string // the machine's
	uplink string // the address of the test's end of the switch's uplink
	addr   string // the machine's address: the node's
	subnet string // their /24
	mac    net.HardwareAddr
	tpm    string // swtpm's socket

	install, decoy loopDev
}

// loopDev is a file-backed loop device.
type loopDev struct {
	path string // /dev/loopN
	dev  string // major:minor
}

// name is the disk's kernel name, loopN.
func (d loopDev) name() string { return filepath.Base(d.path) }

var seq atomic.Int32

// newMachine builds a machine: its network, switch, TPM, disks and SMBIOS
// serial. Everything is removed, stopped or detached when t ends, whether
// it passed or not.
func newMachine(t *testing.T, tl tools, cfg machineConfig) *machine {
	t.Helper()
	n := int(seq.Add(1))
	m := &machine{t: t, tl: tl, cfg: cfg, dir: t.TempDir()}
	for _, d := range []string{"run/udev/data", "run/fleet", "run/fleet-workflow", "sysclass/dmi/id", "bin"} {
		if err := os.MkdirAll(filepath.Join(m.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	net := (os.Getpid()*7 + n) % 200
	m.subnet = fmt.Sprintf("10.213.%d.0/24", net)
	m.uplink = fmt.Sprintf("10.213.%d.1", net)
	m.addr = fmt.Sprintf("10.213.%d.21", net)
	m.network(n)
	m.tpm = m.newTPM("tpm")
	m.disks()
	m.smbios()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(m.dir, "bin", enterName)); err != nil {
		t.Fatal(err)
	}
	return m
}

// network makes the switch and machine namespaces, the machine's eth0
// plugged into the switch's port swp, and the switch (machinetest.Switch),
// which announces swp as "Port N" unless the machine's config says no.
func (m *machine) network(n int) {
	m.swNS, m.mNS = testenv.NetnsPair(m.t, "wm-switch", "wm-machine")
	testenv.Veth(m.t, m.swNS, "swp", m.mNS, "eth0")
	up := fmt.Sprintf("wm%d", (os.Getpid()%10000)*100+n%100)
	machinetest.Switch(m.t, m.swNS, up, m.uplink, map[string]int{"swp": m.cfg.port}, !m.cfg.noLLDP)
	testenv.IP(m.t, "-n", m.mNS, "addr", "add", m.addr+"/24", "dev", "eth0")
	eth0 := testenv.Within(m.t, m.mNS, func() (*net.Interface, error) { return net.InterfaceByName("eth0") })
	m.mac = eth0.HardwareAddr
}

// newTPM manufactures a TPM with EK certificates (swtpm_setup, with a
// local CA of the test's own) in the machine's directory name, serves it on
// a unix socket there, and returns the socket: the machine's TPM
// (machine.tpm), or one that replaces it, as after a board swap.
func (m *machine) newTPM(name string) string {
	t := m.t
	dir := filepath.Join(m.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	swtpm, state := testenv.ManufactureTPM(t, dir)
	sock := filepath.Join(dir, "swtpm.sock")
	testenv.ServeTPM(t, swtpm, state, sock)
	return sock
}

// disks attaches the install disk, which holds an old install (a GPT over
// random bytes), and the decoy, random bytes; each reports its serial in
// the machine's udev database.
func (m *machine) disks() {
	t := m.t
	attach := func(name string) loopDev {
		p := filepath.Join(m.dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(f, rand.Reader, m.cfg.diskSize); err != nil {
			t.Fatal(err)
		}
		f.Close()
		out, err := exec.Command(m.tl.losetup, "-f", "--show", p).CombinedOutput()
		if err != nil {
			t.Fatalf("losetup -f --show %s: %v: %s", p, err, out)
		}
		dev := strings.TrimSpace(string(out))
		t.Cleanup(func() {
			if out, err := exec.Command(m.tl.losetup, "-d", dev).CombinedOutput(); err != nil {
				t.Errorf("losetup -d %s: %v\n%s", dev, err, out)
			}
		})
		num, err := os.ReadFile("/sys/block/" + filepath.Base(dev) + "/dev")
		if err != nil {
			t.Fatal(err)
		}
		return loopDev{path: dev, dev: strings.TrimSpace(string(num))}
	}
	m.install = attach("install.img")
	m.decoy = attach("decoy.img")
	sf := exec.Command(m.tl.sfdisk, "-q", "--no-reread", "--no-tell-kernel", m.install.path)
	sf.Stdin = strings.NewReader("label: gpt\nstart=2048, size=65536, type=linux\n")
	if out, err := sf.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk %s: %v: %s", m.install.path, err, out)
	}
	m.setSerial(m.install, m.cfg.diskSerial)
	m.setSerial(m.decoy, "DECOY-"+m.cfg.diskSerial)
}

// setSerial writes the udev database record that gives d its serial in the
// machine.
func (m *machine) setSerial(d loopDev, serial string) {
	m.t.Helper()
	rec := filepath.Join(m.dir, "run/udev/data", "b"+d.dev)
	if err := os.WriteFile(rec, []byte("E:ID_SERIAL_SHORT="+serial+"\nE:ID_SERIAL="+serial+"\n"), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// smbios writes the machine's SMBIOS serial, as its firmware reports it.
func (m *machine) smbios() {
	m.t.Helper()
	if err := os.WriteFile(filepath.Join(m.dir, "sysclass/dmi/id/product_serial"), []byte(m.cfg.serial+"\n"), 0o444); err != nil {
		m.t.Fatal(err)
	}
}

// enterDocker makes the mount namespace the machine's containerd, dockerd
// and agent share (d's) the machine's, as machine-enter does for
// hookos-attest, so that the volumes of the Template's actions resolve
// there to the machine's own parts: its /run (the udev database, the boot
// record, the run's shared directory /run/fleet-workflow) and its Docker
// socket at /run/docker.sock (/var/run/docker.sock, /var/run being /run).
func (m *machine) enterDocker(d *dockertest.Docker) {
	m.t.Helper()
	if err := os.Symlink(d.Socket(), filepath.Join(m.dir, "run/docker.sock")); err != nil {
		m.t.Fatal(err)
	}
	out, err := exec.Command(m.tl.nsenter, "--target", strconv.Itoa(d.PID()), "--mount",
		filepath.Join(m.dir, "bin", enterName), m.dir, "/bin/true").CombinedOutput()
	if err != nil {
		m.t.Fatalf("enter the machine's dockerd's mount namespace: %v: %s", err, out)
	}
}

// result is what a program run in the machine did.
type result struct {
	code           int
	stdout, stderr string
}

// run runs one of HookOS's own programs in the machine (see
// machine-enter), with env, and logs what it printed.
func (m *machine) run(ctx context.Context, env map[string]string, prog string, args ...string) result {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.tl.ip, append([]string{"netns", "exec", m.mNS, filepath.Join(m.dir, "bin", enterName), m.dir, prog}, args...)...)
	cmd.Env = []string{"PATH=" + filepath.Join(m.dir, "bin") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		m.t.Fatalf("run %s in the machine: %v", filepath.Base(prog), err)
	}
	m.t.Logf("machine: %s exited %d\nstdout:\n%sstderr:\n%s", filepath.Base(prog), r.code, indent(r.stdout), indent(r.stderr))
	return r
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// dialer dials from the machine's network namespace: the sockets it makes
// are the machine's, from the node's address.
func (m *machine) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := testenv.InNetns(m.mNS, func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
