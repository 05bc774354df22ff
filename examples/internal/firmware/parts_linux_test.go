package firmware

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/examples/internal/machinetest"
	"github.com/fleetkit/fleet/internal/testenv"
)

// OVMF's builds and variable stores (Debian's ovmf).
const (
	ovmfCode       = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars       = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	ovmfSecureCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	ovmfSecureVars = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd" // Microsoft's keys enrolled
)

// tools are the programs the machines are made with.
type tools struct {
	swtpm, qemu, nsenter               string
	mkfsVfat, mmd, mcopy, sfdisk, lldp string
	efibootmgr, xz                     string
}

// needTools ends t unless it runs as root with every program and file the
// machines need.
func needTools(t *testing.T) tools {
	t.Helper()
	testenv.Short(t)
	testenv.Root(t, "network namespaces and tap devices")
	tl := tools{
		lldp:     testenv.Command(t, "lldpcli", "lldpd"),
		qemu:     testenv.Command(t, "qemu-system-x86_64", "qemu-system-x86"),
		swtpm:    testenv.Command(t, "swtpm", "swtpm"),
		nsenter:  testenv.Command(t, "nsenter", "util-linux"),
		mkfsVfat: testenv.Command(t, "mkfs.vfat", "dosfstools"),
		mmd:      testenv.Command(t, "mmd", "mtools"),
		mcopy:    testenv.Command(t, "mcopy", "mtools"),
		sfdisk:   testenv.Command(t, "sfdisk", "fdisk"),
		// next-boot's image holds efibootmgr, which the guest runs with
		// its libraries (ldd names them).
		efibootmgr: testenv.Command(t, "efibootmgr", "efibootmgr"),
		// The installed system's initramfs is xz-compressed to fit the
		// layout's EFI system partition.
		xz: testenv.Command(t, "xz", "xz-utils"),
	}
	testenv.Command(t, "swtpm_setup", "swtpm-tools")
	testenv.Command(t, "ip", "iproute2")
	testenv.Command(t, "lldpd", "lldpd")
	testenv.Command(t, "ldd", "libc-bin")
	for _, f := range []struct{ path, pkg string }{
		{ovmfCode, "ovmf"}, {ovmfVars, "ovmf"}, {ovmfSecureCode, "ovmf"}, {ovmfSecureVars, "ovmf"},
		{shimSigned, "shim-signed"}, {mokSigned, "shim-signed"},
		{grubSigned, "grub-efi-amd64-signed"},
		{"/dev/net/tun", "(the tun driver: modprobe tun)"},
	} {
		if _, err := os.Stat(f.path); err != nil {
			testenv.Unavailable(t, "needs %s: apt-get install -y %s", f.path, f.pkg)
		}
	}
	return tl
}

// run runs a program that makes part of an image, or fails t.
func (tl tools) run(t *testing.T, prog string, args ...string) {
	t.Helper()
	cmd := exec.Command(prog, args...)
	// mtools refuses a FAT whose geometry it doubts; mkfs.vfat's is sound.
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", filepath.Base(prog), strings.Join(args, " "), err, out)
	}
}

// A network is the switch: a network namespace whose bridge joins the
// machines' ports (tap devices, one per port, which QEMU opens) to an
// uplink whose other end is in the test's namespace, and lldpd, which
// announces each port to the machine plugged into it.
type network struct {
	ns     string // the switch's network namespace
	uplink string // the address of the test's end of the uplink
	subnet string // the nodes' /24
	prefix string // "10.214.N."
}

// port is the tap device of switch port n.
func port(n int) string { return fmt.Sprintf("tap%d", n) }

// newNetwork makes the switch with ports (lldpd names port n "Port n").
// Everything is removed or stopped when t ends.
func newNetwork(t *testing.T, ports []int) *network {
	t.Helper()
	n := os.Getpid() % 200
	nw := &network{
		ns:     fmt.Sprintf("fw-switch-%d", os.Getpid()),
		prefix: fmt.Sprintf("10.214.%d.", n),
	}
	nw.subnet, nw.uplink = nw.prefix+"0/24", nw.prefix+"1"
	testenv.Netns(t, nw.ns)
	lldp := map[string]int{}
	for _, p := range ports {
		testenv.IP(t, "-n", nw.ns, "tuntap", "add", "dev", port(p), "mode", "tap")
		lldp[port(p)] = p
	}
	machinetest.Switch(t, nw.ns, fmt.Sprintf("fw%d", os.Getpid()), nw.uplink, lldp, true)
	return nw
}

// A tpm is a machine's TPM: swtpm's state, manufactured by swtpm_setup
// with EK certificates.
type tpm struct {
	dir, state string
	eks        attest.Binding // its EK hashes, as a receiving scan reads them
}

// tpmBanks are the PCR banks the TPMs are made with: the SHA-1 and
// SHA-256 banks the TCG PC Client profile requires of a PC's TPM. The
// firmware measures the boot into each, and its event log carries a digest
// of each event for each.
const tpmBanks = "sha1,sha256"

// manufactureTPM makes a TPM in dir and reads its EK hashes through a
// swtpm server started for that alone, as the runbook's receiving scan
// would.
func manufactureTPM(t *testing.T, tl tools, dir string) tpm {
	t.Helper()
	_, state := testenv.ManufactureTPMBanks(t, dir, tpmBanks)
	sock := filepath.Join(dir, "scan.sock")
	stop := testenv.ServeTPM(t, tl.swtpm, state, sock)
	defer stop()
	return tpm{dir: dir, state: state, eks: machinetest.EKs(t, sock)}
}
