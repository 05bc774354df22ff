package firmware

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/examples/internal/machinetest"
	"github.com/fleetkit/fleet/examples/templates"
	"github.com/fleetkit/fleet/internal/testenv"
)

// Debian's signed boot chain, and the kernel's modules.
const (
	shimSigned = "/usr/lib/shim/shimx64.efi.signed"
	mokSigned  = "/usr/lib/shim/mmx64.efi.signed"
	grubSigned = "/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"
	modulesDir = "/lib/modules"
)

// guestModules are the modules /init loads, with their dependencies
// (modules.dep): efivarfs (the SecureBoot variable), the virtio PCI
// transport and NIC, and the disks' drivers (virtio and NVMe). The TPM's
// driver (tpm_tis), securityfs and AF_PACKET are built into Debian's
// kernel.
var guestModules = []string{"efivarfs", "virtio_pci", "virtio_net", "virtio_blk", "nvme"}

// espSize is the size of the EFI system partition, and espOffset where it
// starts on the boot disk (sector 2048).
const (
	espSize   = 128 << 20
	espOffset = 1 << 20
)

// bootImage is the image every case boots from a copy of: a GPT disk whose
// EFI system partition holds Debian's signed shim (EFI/BOOT/BOOTX64.EFI,
// the removable-media path the firmware boots), MokManager beside it,
// Debian's signed grub (EFI/BOOT/grubx64.efi, which shim verifies and
// starts), Debian's signed kernel (/vmlinuz) and the initramfs
// (/initrd.img: guestinit as /init, hookos-attest, the modules). A case
// adds grub's configuration and its own initramfs (caseDisk).
type bootImage struct {
	disk    string // the disk image
	kernel  string // the kernel's version, e.g. 6.1.0-57-amd64
	modules []string
	initrd  int // the initramfs's size in bytes
}

// kernelVersion returns the newest kernel of /boot with modules.
func kernelVersion(t *testing.T) string {
	t.Helper()
	vmlinuz, _ := filepath.Glob("/boot/vmlinuz-*")
	var versions []string
	for _, p := range vmlinuz {
		v := strings.TrimPrefix(filepath.Base(p), "vmlinuz-")
		if _, err := os.Stat(filepath.Join(modulesDir, v, "modules.dep")); err == nil {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		testenv.Unavailable(t, "needs Debian's signed kernel in /boot with its modules: apt-get install -y linux-image-amd64")
	}
	slices.Sort(versions)
	return versions[len(versions)-1]
}

// moduleOrder returns the paths (relative to the kernel's module
// directory) of the named modules and of every module they depend on,
// each after its dependencies, as modules.dep gives them.
func moduleOrder(dep io.Reader, names []string) ([]string, error) {
	deps := map[string][]string{} // path -> the paths it depends on
	byName := map[string]string{} // module name -> path
	sc := bufio.NewScanner(dep)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		p, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[p] = strings.Fields(rest)
		byName[moduleName(p)] = p
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	var visit func(p string)
	visit = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		for _, d := range deps[p] {
			visit(d)
		}
		out = append(out, p)
	}
	for _, n := range names {
		p, ok := byName[strings.ReplaceAll(n, "-", "_")]
		if !ok {
			return nil, fmt.Errorf("modules.dep names no module %s", n)
		}
		visit(p)
	}
	return out, nil
}

// moduleName is the name of the module at path p, "-" read as "_", as the
// kernel names modules.
func moduleName(p string) string {
	base := filepath.Base(p)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// buildImage builds the boot image in dir from Debian's packages and the
// built programs: guestinit (/init), hookos-attest, the runner with its
// docker stand-in, fleet's actions as their images hold them, efibootmgr,
// and the store of the installer image (installerImage).
func buildImage(t *testing.T, tl tools, dir string, bins machinetest.Binaries, inst installerImage) bootImage {
	t.Helper()
	img := bootImage{disk: filepath.Join(dir, "boot.img"), kernel: kernelVersion(t)}
	img.modules = modules(t, img.kernel, guestModules)

	// The initramfs.
	var b bytes.Buffer
	c := initramfs(t, &b, bins, img.kernel, img.modules, "etc/fleet", "bin", "var/run")
	c.file("bin/hookos-attest", 0o755, readFile(t, bins.Path("hookos-attest")))

	// HookOS's Tinkerbell agent and container engine: the runner, and
	// docker, its stand-in for the docker CLI and engine.
	c.file("bin/runner", 0o755, readFile(t, bins.Path("runner")))
	c.symlink("usr/bin/docker", "/bin/runner")
	// The actions' images: each program where ko puts it, with what
	// .ko.yaml's base image gives it (efibootmgr for next-boot; the docker
	// CLI for wipe-disk and install is the stand-in above).
	var images strings.Builder
	for _, a := range []struct{ name, image string }{
		{"wipe-disk", templates.DefaultImages.WipeDisk},
		{"install", templates.DefaultImages.Install},
		{"next-boot", templates.DefaultImages.NextBoot},
	} {
		c.file("ko-app/"+a.name, 0o755, readFile(t, bins.Path(a.name)))
		fmt.Fprintf(&images, "%s /ko-app/%s\n", a.image, a.name)
	}
	fmt.Fprintf(&images, "%s waitdaemon\n", templates.DefaultImages.Reboot)
	c.file("etc/fleet/images", 0o644, []byte(images.String()))
	addProgram(t, c, tl.efibootmgr)
	// The installer image in the docker stand-in's store.
	store := "var/lib/fleet-images/" + inst.ref
	c.dir(store + "/rootfs/dev")
	c.file(store+"/rootfs/bin/installer", 0o755, readFile(t, bins.Path("installer")))
	c.file(store+"/rootfs/usr/share/talos/esp.img", 0o644, inst.esp)
	c.file(store+"/env", 0o644, []byte("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nSTANDIN_IMAGE="+inst.ref+"\nESP_IMAGE=/usr/share/talos/esp.img\n"))
	c.file(store+"/entrypoint", 0o644, []byte("/bin/installer\n"))
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	img.initrd = b.Len()
	initrd := filepath.Join(dir, "initrd.img")
	if err := os.WriteFile(initrd, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	// The disk: a GPT whose one partition, the ESP, starts at 1 MiB.
	f, err := os.Create(img.disk)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(espOffset + espSize + 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sf := exec.Command(tl.sfdisk, "-q", img.disk)
	sf.Stdin = strings.NewReader(fmt.Sprintf("label: gpt\nstart=%d, size=%d, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=ESP\n", espOffset/512, espSize/512))
	if out, err := sf.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk %s: %v: %s", img.disk, err, out)
	}
	// The EFI system partition, written in place without mounting it.
	tl.run(t, tl.mkfsVfat, "-F", "32", "-n", "FLEET-ESP", fmt.Sprintf("--offset=%d", espOffset/512), img.disk, fmt.Sprint(espSize>>10))
	esp := fmt.Sprintf("%s@@%d", img.disk, espOffset)
	tl.run(t, tl.mmd, "-i", esp, "::/EFI", "::/EFI/BOOT", "::/EFI/debian")
	for _, f := range [][2]string{
		{shimSigned, "::/EFI/BOOT/BOOTX64.EFI"},
		{mokSigned, "::/EFI/BOOT/mmx64.efi"},
		{grubSigned, "::/EFI/BOOT/grubx64.efi"},
		{"/boot/vmlinuz-" + img.kernel, "::/vmlinuz"},
		{initrd, "::/initrd.img"},
	} {
		tl.run(t, tl.mcopy, "-i", esp, f[0], f[1])
	}
	return img
}

// The ways grub loads the kernel: through its EFI entry point (linuxefi,
// which runs the kernel's EFI stub, and the stub hands the kernel the
// firmware's TCG event log), or through Debian grub's linux command, which
// with Secure Boot off uses the legacy boot protocol: the stub never runs,
// and the kernel gets no event log.
const (
	loadEFI    = "linuxefi"
	loadLegacy = "linux"
)

// kernelArgs is the kernel's command line: the console on the serial port
// the test reads; a panic stops the kernel where it is (panic=0), and the
// test, which reads "Kernel panic" on the console, ends the VM: a VM
// that reboots into its installed system cannot end on a reboot. The
// kernel does not test the IO-APIC's timer (no_timer_check): under TCG on
// a loaded host the emulated timer's first ticks come late, and the test
// panics a sound boot with "IO-APIC + timer doesn't work!".
const kernelArgs = "console=ttyS0,115200 panic=0 no_timer_check"

// grubConfig is grub.cfg for a kernel loaded with load.
func grubConfig(load string) string {
	initrd := "initrd"
	if load == loadEFI {
		initrd = "initrdefi"
	}
	return fmt.Sprintf("set timeout=0\nset default=0\nmenuentry fleet {\n\t%s /vmlinuz %s\n\t%s /initrd.img /case.img\n}\n", load, kernelArgs, initrd)
}

// caseDisk copies the boot image to dir and adds a case's grub.cfg (with
// load) and its initramfs (case.img), which holds files: name (relative,
// in etc/fleet) -> contents.
func (img bootImage) caseDisk(t *testing.T, tl tools, dir, load string, files map[string]string) string {
	t.Helper()
	disk := filepath.Join(dir, "disk.img")
	copyFile(t, img.disk, disk)
	var b bytes.Buffer
	c := &cpio{w: &b}
	for _, n := range slices.Sorted(maps.Keys(files)) {
		c.file("etc/fleet/"+n, 0o644, []byte(files[n]))
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	caseImg, cfg := filepath.Join(dir, "case.img"), filepath.Join(dir, "grub.cfg")
	if err := os.WriteFile(caseImg, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(grubConfig(load)), 0o644); err != nil {
		t.Fatal(err)
	}
	part := fmt.Sprintf("%s@@%d", disk, espOffset)
	tl.run(t, tl.mcopy, "-o", "-i", part, cfg, "::/EFI/debian/grub.cfg")
	tl.run(t, tl.mcopy, "-o", "-i", part, cfg, "::/EFI/BOOT/grub.cfg")
	tl.run(t, tl.mcopy, "-o", "-i", part, caseImg, "::/case.img")
	return disk
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestModuleOrder reads a modules.dep of Debian's shape: each module after
// the modules it depends on, each once, "-" and "_" alike in names.
func TestModuleOrder(t *testing.T) {
	dep := `kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/drivers/nvme/host/nvme-core.ko: kernel/lib/crc64.ko
kernel/drivers/nvme/host/nvme.ko: kernel/drivers/nvme/host/nvme-core.ko kernel/lib/crc64.ko
kernel/lib/crc64.ko:
kernel/fs/efivarfs/efivarfs.ko:
`
	got, err := moduleOrder(strings.NewReader(dep), []string{"efivarfs", "virtio_net", "nvme", "nvme-core"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kernel/fs/efivarfs/efivarfs.ko",
		"kernel/net/core/failover.ko",
		"kernel/drivers/net/net_failover.ko",
		"kernel/drivers/virtio/virtio_ring.ko",
		"kernel/drivers/virtio/virtio.ko",
		"kernel/drivers/net/virtio_net.ko",
		"kernel/lib/crc64.ko",
		"kernel/drivers/nvme/host/nvme-core.ko",
		"kernel/drivers/nvme/host/nvme.ko",
	}
	if !slices.Equal(got, want) {
		t.Errorf("moduleOrder:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := moduleOrder(strings.NewReader(dep), []string{"e1000e"}); err == nil {
		t.Error("moduleOrder found e1000e, which modules.dep does not name")
	}
}
