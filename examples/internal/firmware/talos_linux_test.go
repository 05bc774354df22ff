package firmware

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/examples/internal/machinetest"
	"github.com/fleetkit/fleet/internal/imagetest"
	"github.com/fleetkit/fleet/internal/repotest"
)

// talosModules are the modules the installed system's /init loads:
// efivarfs (BootCurrent), the NIC, the NVMe install disk (META), and
// qemu_fw_cfg, through which the machine gives it its address.
var talosModules = []string{"efivarfs", "virtio_pci", "virtio_net", "nvme", "qemu_fw_cfg"}

// talosESPSize is the size of the EFI system partition of the stand-in
// installer's layout (internal/imagetest/standin: 32768 sectors), which the
// installed system boots from.
const talosESPSize = 32768 * 512

// installerImage is the stand-in for the class's Talos installer image,
// as the docker stand-in's store holds it: its reference, and the EFI
// system partition its installer writes to the install disk.
type installerImage struct {
	ref  string
	esp  []byte
	args string // the installed kernel's arguments
}

// modules returns the named modules of kernel with their dependencies, in
// the order to load them.
func modules(t *testing.T, kernel string, names []string) []string {
	t.Helper()
	dep, err := os.Open(filepath.Join(modulesDir, kernel, "modules.dep"))
	if err != nil {
		t.Fatal(err)
	}
	defer dep.Close()
	mods, err := moduleOrder(dep, names)
	if err != nil {
		t.Fatal(err)
	}
	return mods
}

// initramfs begins an initramfs in b: guestinit as /init, the console,
// the directories /init mounts on and dirs, and the modules mods of kernel
// with the list /init loads them in (lib/modules/fleet.load).
func initramfs(t *testing.T, b *bytes.Buffer, bins machinetest.Binaries, kernel string, mods []string, dirs ...string) *cpio {
	t.Helper()
	c := &cpio{w: b}
	for _, d := range append([]string{"dev", "proc", "sys", "run", "tmp"}, dirs...) {
		c.dir(d)
	}
	c.char("dev/console", 0o600, 5, 1)
	c.file("init", 0o755, readFile(t, bins.Path("guestinit")))
	var list []string
	for _, m := range mods {
		p := filepath.Join("lib/modules", kernel, m)
		c.file(p, 0o644, readFile(t, filepath.Join(modulesDir, kernel, m)))
		list = append(list, "/"+p)
	}
	c.file("lib/modules/fleet.load", 0o644, []byte(strings.Join(list, "\n")+"\n"))
	return c
}

// addProgram adds a program of this machine to an initramfs at its own
// path, with the shared libraries ldd says it loads, each at the path ldd
// names (imagetest.WithLibraries; the files' contents, links resolved).
func addProgram(t *testing.T, c *cpio, prog string) {
	t.Helper()
	files, err := imagetest.WithLibraries(t.Context(), prog)
	if err != nil || len(files) < 2 {
		t.Fatalf("ldd %s names no library (%v)", prog, err)
	}
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatal(err)
		}
		c.file(strings.TrimPrefix(f, "/"), 0o755, readFile(t, real))
	}
}

// installedArgs returns the installed kernel's arguments: the console the
// test reads, and the Image Factory schematic's extraKernelArgs
// (examples/talos/schematic.yaml) with its fleetd URL replaced by
// FLEET_PUBLIC_URL, as the schematic's doc says, each in grub's single
// quotes (so that grub leaves ${code} for Talos).
func installedArgs(t *testing.T, publicURL string) string {
	t.Helper()
	root, err := repotest.Root()
	if err != nil {
		t.Fatal(err)
	}
	b := readFile(t, filepath.Join(root, "examples/talos/schematic.yaml"))
	var s struct {
		Customization struct {
			ExtraKernelArgs []string `yaml:"extraKernelArgs"`
		} `yaml:"customization"`
	}
	if err := yaml.Unmarshal(b, &s); err != nil {
		t.Fatalf("examples/talos/schematic.yaml: %v", err)
	}
	args := []string{kernelArgs}
	found := false
	for _, a := range s.Customization.ExtraKernelArgs {
		if v, ok := strings.CutPrefix(a, "talos.config="); ok {
			found = true
			u := strings.Replace(v, "https://fleetd.example:8443", publicURL, 1)
			if u != publicURL+configserve.PathPrefix+"${code}" {
				t.Fatalf("the schematic's talos.config=%s is not FLEET_PUBLIC_URL%s${code}", v, configserve.PathPrefix)
			}
			a = "talos.config=" + u
		}
		args = append(args, "'"+a+"'")
	}
	if !found {
		t.Fatal("examples/talos/schematic.yaml has no talos.config= argument")
	}
	return strings.Join(args, " ")
}

// buildInstaller builds the stand-in installer image's EFI system
// partition: a FAT file system of the layout's partition size with
// Debian's signed shim (EFI/BOOT/BOOTX64.EFI, the removable-media path
// next-boot's boot entry names) and grub, grub.cfg (EFI/debian, where
// signed grub reads it, and EFI/BOOT) loading the kernel with args, the
// kernel, and the installed system's initramfs (talos.img, xz): guestinit,
// which boots as the stand-in Talos when the kernel's arguments name
// talos.config=, its modules, and fleetd's CA as the image's trust store.
func buildInstaller(t *testing.T, tl tools, dir string, bins machinetest.Binaries, kernel, ref string, ca []byte, args string) installerImage {
	t.Helper()
	var b bytes.Buffer
	c := initramfs(t, &b, bins, kernel, modules(t, kernel, talosModules))
	c.file("etc/talos/ca.pem", 0o644, ca)
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	// The kernel's xz decoder checks CRC32 only.
	xz := exec.Command(tl.xz, "--check=crc32", "-9", "-c")
	xz.Stdin = &b
	initrd, err := xz.Output()
	if err != nil {
		t.Fatalf("xz: %v", err)
	}
	talosImg, cfg := filepath.Join(dir, "talos.img"), filepath.Join(dir, "talos-grub.cfg")
	if err := os.WriteFile(talosImg, initrd, 0o644); err != nil {
		t.Fatal(err)
	}
	grub := fmt.Sprintf("set timeout=0\nset default=0\nmenuentry talos {\n\tlinuxefi /vmlinuz %s\n\tinitrdefi /talos.img\n}\n", args)
	if err := os.WriteFile(cfg, []byte(grub), 0o644); err != nil {
		t.Fatal(err)
	}
	esp := filepath.Join(dir, "talos-esp.img")
	tl.run(t, tl.mkfsVfat, "-C", "-n", "EFI", esp, fmt.Sprint(talosESPSize>>10))
	tl.run(t, tl.mmd, "-i", esp, "::/EFI", "::/EFI/BOOT", "::/EFI/debian")
	for _, f := range [][2]string{
		{shimSigned, "::/EFI/BOOT/BOOTX64.EFI"},
		{grubSigned, "::/EFI/BOOT/grubx64.efi"},
		{cfg, "::/EFI/debian/grub.cfg"},
		{cfg, "::/EFI/BOOT/grub.cfg"},
		{"/boot/vmlinuz-" + kernel, "::/vmlinuz"},
		{talosImg, "::/talos.img"},
	} {
		tl.run(t, tl.mcopy, "-i", esp, f[0], f[1])
	}
	return installerImage{ref: ref, esp: readFile(t, esp), args: args}
}
