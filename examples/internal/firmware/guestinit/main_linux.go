//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fleetkit/fleet/disksafe"
)

// What the image holds, and where the kernel shows the firmware's work.
const (
	modulesList = "/lib/modules/fleet.load"
	envFile     = "/etc/fleet/env"
	agent       = "/bin/hookos-attest"
	runner      = "/bin/runner"
	imagesFile  = "/etc/fleet/images"
	eventLog    = "/sys/kernel/security/tpm0/binary_bios_measurements"
	lockdown    = "/sys/kernel/security/lockdown"
	efivars     = "/sys/firmware/efi/efivars"
	// secureBootVar is the EFI global variable SecureBoot: 4 bytes of
	// attributes, then 1 (on) or 0 (off).
	secureBootVar = efivars + "/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
)

// ifaceWait is how long the NIC's driver may take to make its interface.
const ifaceWait = 2 * time.Minute

func main() {
	boot := hookOS
	if err := mountAll(); err != nil {
		say("%v", err)
	} else if talosBoot() {
		boot = talos
	}
	if err := boot(); err != nil {
		say("%v", err)
	}
	say("powering off")
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		say("power off: %v", err)
	}
	// The kernel panics when init exits; wait for the power to go.
	select {}
}

// say writes one of init's own lines to the console.
func say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "fleet-init: "+format+"\n", args...)
}

// hookOS is everything HookOS's boot does before the power-off, or the
// reboot the Workflow's last action asks for.
func hookOS() error {
	say("started")
	if err := loadModules(modulesList); err != nil {
		return err
	}
	report()

	env, err := readEnv(envFile)
	if err != nil {
		return err
	}
	if err := network(env["FLEET_INTERFACE"], env["FLEET_ADDRESS"]); err != nil {
		return err
	}

	cmd := exec.Command(agent)
	cmd.Env = []string{"PATH=/bin"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if err := run("hookos-attest", cmd); err != nil {
		return err
	}
	rec, err := disksafe.ReadBootRecord(env["FLEET_BOOT_DIR"])
	if err != nil {
		return fmt.Errorf("this boot's record: %w", err)
	}
	code := "none"
	if rec.Code != "" {
		code = "set"
	}
	say("boot record: attested=%t install_code=%s", rec.Attested, code)
	if disk := env["FLEET_INSTALL_DISK"]; disk != "" {
		if err := disks(disk, env["FLEET_INSTALL_DISK_SERIAL"]); err != nil {
			return err
		}
	}
	if server := env["FLEET_TINK_SERVER"]; server != "" {
		return runActions(server, env["FLEET_INTERFACE"], env["FLEET_RUNNER_WAIT"])
	}
	return nil
}

// runActions runs the stand-in for HookOS's Tinkerbell agent, which takes
// the machine's Workflow from tink-server and runs its actions; its output
// goes to the console. Its last action reboots the machine.
func runActions(server, iface, wait string) error {
	if wait == "" {
		wait = "60s"
	}
	cmd := exec.Command(runner, "-server", server, "-interface", iface, "-images", imagesFile, "-wait", wait)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return run("runner", cmd)
}

// run runs cmd, its output on the console, and says how the program name
// exited and after how long.
func run(name string, cmd *exec.Cmd) error {
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	t0 := time.Now()
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return fmt.Errorf("run %s: %w", name, err)
	}
	say("%s exited %d after %v", name, code, time.Since(t0).Round(time.Millisecond))
	return nil
}

// waitPath waits up to ifaceWait for the file p, which a driver makes,
// and names it what when it does not come.
func waitPath(p, what string) error {
	deadline := time.Now().Add(ifaceWait)
	for {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %v", what, ifaceWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// disks says which disks the kernel's sysfs shows, with the serial each
// reports and where, and which one reports the install disk's serial, as
// disksafe judges it (Read, Judge) before a wipe. It wipes nothing.
func disks(installDisk, serial string) error {
	if err := waitPath(installDisk, "install disk "+installDisk); err != nil {
		return err
	}
	l, err := disksafe.Read(installDisk, nil)
	if err != nil {
		return err
	}
	for _, d := range l.Disks {
		var from []string
		for _, s := range d.Sources {
			from = append(from, s.Where)
		}
		if len(from) == 0 {
			say("disk %s: %s, %d bytes, no serial", d.Name, d.Transport, d.Size)
			continue
		}
		say("disk %s: %s, %d bytes, serial %q from %s", d.Name, d.Transport, d.Size, d.Serial, strings.Join(from, ", "))
	}
	d, err := disksafe.Judge(l, serial)
	if err != nil {
		say("disksafe judges: %v", err)
		return nil
	}
	say("disksafe judges: %s (%s) is the disk that reports the serial %s", installDisk, d.Name, serial)
	return nil
}

// mountAll mounts what the agent reads: /dev (the TPM), /proc, /sys (the
// interfaces, SMBIOS), securityfs (the event log) and /run (the boot
// record).
func mountAll() error {
	for _, m := range []struct{ src, dir, fstype string }{
		{"devtmpfs", "/dev", "devtmpfs"},
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
		{"securityfs", "/sys/kernel/security", "securityfs"},
		{"tmpfs", "/run", "tmpfs"},
	} {
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dir, m.fstype, unix.MS_NOSUID, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.dir, err)
		}
	}
	return nil
}

// loadModules loads each module the list names, in order, and mounts
// efivarfs. A module the kernel already holds is no error.
func loadModules(list string) error {
	b, err := os.ReadFile(list)
	if err != nil {
		return err
	}
	var names []string
	for _, p := range strings.Fields(string(b)) {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open module %s: %w", p, err)
		}
		err = unix.FinitModule(fd, "", 0)
		unix.Close(fd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load module %s: %w", p, err)
		}
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".ko"))
	}
	say("loaded %s", strings.Join(names, " "))
	if err := os.MkdirAll(efivars, 0o755); err == nil {
		if err := unix.Mount("efivarfs", efivars, "efivarfs", 0, ""); err != nil {
			say("mount efivarfs: %v", err)
		}
	}
	return nil
}

// report says what the firmware left the kernel.
func report() {
	switch b, err := os.ReadFile(secureBootVar); {
	case err != nil:
		say("efivarfs: no SecureBoot variable: %v", err)
	case len(b) != 5:
		say("efivarfs: SecureBoot holds %d bytes", len(b))
	default:
		say("efivarfs: SecureBoot=%d", b[4])
	}
	if b, err := os.ReadFile(lockdown); err == nil {
		mode := strings.TrimSpace(string(b))
		if i, j := strings.Index(mode, "["), strings.Index(mode, "]"); i >= 0 && j > i {
			mode = mode[i+1 : j]
		}
		say("lockdown: %s", mode)
	}
	if b, err := os.ReadFile(eventLog); err != nil {
		say("no event log: %v", err)
	} else {
		say("event log: %d bytes, banks %s", len(b), logBanks(b))
	}
}

// logBanks names the PCR banks a crypto-agile TCG event log carries, from
// its first event (TCG PC Client Platform Firmware Profile,
// TCG_EfiSpecIDEvent): the header of a SHA-1 event (PCR index, type, a
// 20-byte digest, the event's size), then "Spec ID Event03\0", the
// platform class, the version (4 bytes), the number of algorithms and
// each one's ID and digest size (2 bytes each).
func logBanks(b []byte) string {
	const specOffset = 4 + 4 + 20 + 4
	spec := b[min(len(b), specOffset):]
	if !bytes.HasPrefix(spec, []byte("Spec ID Event03\x00")) || len(spec) < 28 {
		return "unknown (no Spec ID Event03)"
	}
	n := int(binary.LittleEndian.Uint32(spec[24:]))
	names := map[uint16]string{0x0004: "sha1", 0x000b: "sha256", 0x000c: "sha384", 0x000d: "sha512", 0x0012: "sm3_256"}
	var out []string
	for i := range n {
		off := 28 + 4*i
		if off+4 > len(spec) {
			return "unknown (a short Spec ID Event03)"
		}
		alg := binary.LittleEndian.Uint16(spec[off:])
		name, ok := names[alg]
		if !ok {
			name = fmt.Sprintf("0x%04x", alg)
		}
		out = append(out, name)
	}
	return strings.Join(out, ",")
}

// readEnv reads KEY=VALUE lines; blank lines and # comments are skipped.
func readEnv(name string) (map[string]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not KEY=VALUE", name, l)
		}
		env[k] = v
	}
	return env, sc.Err()
}

// network brings up lo, and ifname with addr (CIDR) once its driver made
// it.
func network(ifname, addr string) error {
	ip, ipnet, err := net.ParseCIDR(addr)
	if err != nil || ip.To4() == nil {
		return fmt.Errorf("FLEET_ADDRESS %q is not an IPv4 CIDR", addr)
	}
	if err := waitPath("/sys/class/net/"+ifname, "interface "+ifname); err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	set := func(name string, req uint, v []byte) error {
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		if err := ifr.SetInet4Addr(v); err != nil {
			return err
		}
		return unix.IoctlIfreq(fd, req, ifr)
	}
	up := func(name string) error {
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
			return err
		}
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
	}
	if err := up("lo"); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	if err := set(ifname, unix.SIOCSIFADDR, ip.To4()); err != nil {
		return fmt.Errorf("address %s on %s: %w", ip, ifname, err)
	}
	if err := set(ifname, unix.SIOCSIFNETMASK, net.IP(ipnet.Mask).To4()); err != nil {
		return fmt.Errorf("netmask of %s: %w", ifname, err)
	}
	if err := up(ifname); err != nil {
		return fmt.Errorf("bring up %s: %w", ifname, err)
	}
	mac, _ := os.ReadFile("/sys/class/net/" + ifname + "/address")
	say("%s is up, %s, MAC %s", ifname, addr, strings.TrimSpace(string(mac)))
	return nil
}
