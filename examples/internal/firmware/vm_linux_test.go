package firmware

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/repotest"
	"github.com/fleetkit/fleet/internal/syncbuf"
	"github.com/fleetkit/fleet/internal/testenv"
)

// firmware is an OVMF build and the variable store a machine starts with.
type firmware struct {
	code, vars string
	secureBoot bool // the build enforces Secure Boot and vars enrol keys
}

var (
	// secureBootOn is OVMF's Secure Boot build (SMM) with Microsoft's keys
	// enrolled: shim, signed by Microsoft's UEFI CA, boots; grub and the
	// kernel, signed by Debian's CA, are verified by shim.
	secureBootOn = firmware{code: ovmfSecureCode, vars: ovmfSecureVars, secureBoot: true}
	// secureBootOff is OVMF without Secure Boot, its store without keys.
	secureBootOff = firmware{code: ovmfCode, vars: ovmfVars}
)

// vmConfig is one machine's boot.
type vmConfig struct {
	fw     firmware
	disk   string // the case's copy of the boot image
	tpm    tpm
	netns  string // the switch's namespace, which holds the tap
	tap    string // the switch port the NIC is plugged into
	mac    string
	serial string // its SMBIOS serial (type 1)
	disks  []vmDisk
	// fwCfg are QEMU fw_cfg items (name -> string), which the guest's
	// kernel shows in /sys/firmware/qemu_fw_cfg/by_name.
	fwCfg map[string]string
	// marks are console lines whose first appearance the boot times.
	marks []string
}

// vmDisk is a disk of the machine besides its boot disk: a raw image, on
// an NVMe controller or a virtio-blk device, that reports serial.
type vmDisk struct {
	file, serial string
	nvme         bool
}

// Waits on a boot are sized by its progress on the serial console: a boot
// may take as long as its console keeps printing, and fails the test only
// when the console stands still for bootStall, or the boot runs past
// bootLimit in all. TCG boots took 23 to 31 s on a quiet machine and up to
// 105 s beside a compile.
const (
	bootStall = 4 * time.Minute
	bootLimit = 12 * time.Minute
)

// bootResult is what a boot showed.
type bootResult struct {
	console string        // the serial console, "\r\n" read as "\n"
	took    time.Duration // from QEMU's start to its exit (the power-off)
	toInit  time.Duration // from QEMU's start to /init's first line
	// marks holds, for each of vmConfig's marks the console showed, when
	// it first did, from QEMU's start.
	marks map[string]time.Duration
	vars  string // the machine's variable store (NVRAM), as it left it
}

// A kernel's panic (panic=0 stops it there) and HookOS's /init started
// twice: the machine went back to HookOS after its install.
const (
	panicLine  = "Kernel panic - not syncing"
	hookOSLine = "fleet-init: started"
)

// boot powers the machine on, with its own swtpm, and waits until it
// powers itself off. It fails t when the console stands still for
// bootStall, or the boot runs past bootLimit.
func boot(t *testing.T, tl tools, cfg vmConfig) bootResult {
	t.Helper()
	dir := filepath.Dir(cfg.disk)
	vars := filepath.Join(dir, "OVMF_VARS.fd")
	copyFile(t, cfg.fw.vars, vars)

	// swtpm, as the machine's TPM: the firmware starts it up
	// (TPM2_Startup), and swtpm ends when QEMU closes its socket.
	sock := filepath.Join(dir, "swtpm.sock")
	testenv.Swtpm(t, tl.swtpm, cfg.tpm.state, sock, "--ctrl", "type=unixio,path="+sock, "--terminate")

	args := []string{"--net=/run/netns/" + cfg.netns, tl.qemu,
		"-nodefaults", "-no-user-config", "-accel", "tcg", "-m", "768", "-smp", "1",
		"-display", "none", "-monitor", "none", "-serial", "stdio",
		"-global", "ICH9-LPC.disable_s3=1",
	}
	if cfg.fw.secureBoot {
		args = append(args, "-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on")
	} else {
		args = append(args, "-machine", "q35")
	}
	args = append(args,
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+cfg.fw.code,
		"-drive", "if=pflash,format=raw,unit=1,file="+vars,
		"-drive", "if=none,id=boot,format=raw,file="+cfg.disk,
		"-device", "virtio-blk-pci,drive=boot,bootindex=0",
		"-netdev", "tap,id=nic,ifname="+cfg.tap+",script=no,downscript=no",
		// No option ROM: the firmware has no PXE to try.
		"-device", "virtio-net-pci,netdev=nic,mac="+cfg.mac+",romfile=",
		"-chardev", "socket,id=chrtpm,path="+sock,
		"-tpmdev", "emulator,id=tpm0,chardev=chrtpm",
		"-device", "tpm-tis,tpmdev=tpm0",
		"-smbios", "type=1,serial="+cfg.serial,
	)
	for name, v := range cfg.fwCfg {
		args = append(args, "-fw_cfg", "name="+name+",string="+v)
	}
	for i, d := range cfg.disks {
		dev := "virtio-blk-pci"
		if d.nvme {
			dev = "nvme"
		}
		id := fmt.Sprintf("disk%d", i)
		args = append(args, "-drive", "if=none,id="+id+",format=raw,file="+d.file, "-device", dev+",drive="+id+",serial="+d.serial)
	}
	// QEMU runs in the switch's network namespace, where its tap is.
	qemu := exec.Command(tl.nsenter, args...)
	var con syncbuf.Buffer // the serial console
	var stderr syncbuf.Buffer
	qemu.Stdout, qemu.Stderr = &con, &stderr
	t0 := time.Now()
	if err := qemu.Start(); err != nil {
		t.Fatalf("start qemu: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- qemu.Wait() }()
	limit := bootLimit
	if d, ok := t.Deadline(); ok && time.Until(d)-30*time.Second < limit {
		// Fail with the console rather than panic at the test's timeout.
		limit = time.Until(d) - 30*time.Second
	}
	var toInit time.Duration
	printed, size := time.Now(), 0 // when the console last grew, and its size then
	marks := map[string]time.Duration{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			r := bootResult{console: strings.ReplaceAll(con.String(), "\r\n", "\n"), took: time.Since(t0), toInit: toInit, marks: marks, vars: vars}
			if err != nil {
				t.Fatalf("qemu: %v\nstderr:\n%s\nconsole:\n%s", err, stderr.String(), repotest.Tail(r.console, 6000))
			}
			return r
		case <-tick.C:
		}
		out := con.String()
		if len(out) != size {
			printed, size = time.Now(), len(out)
		}
		if toInit == 0 && strings.Contains(out, hookOSLine) {
			toInit = time.Since(t0)
		}
		for _, m := range cfg.marks {
			if _, ok := marks[m]; !ok && strings.Contains(out, m) {
				marks[m] = time.Since(t0)
			}
		}
		if strings.Contains(out, panicLine) || strings.Count(out, hookOSLine) > 1 {
			_ = qemu.Process.Kill()
			<-done
			t.Fatalf("the machine's kernel panicked, or it booted HookOS again; qemu killed\nconsole:\n%s", repotest.Tail(strings.ReplaceAll(out, "\r\n", "\n"), 9000))
		}
		if time.Since(printed) > bootStall || time.Since(t0) > limit {
			_ = qemu.Process.Kill()
			<-done
			t.Fatalf("the boot's console stood still for %v (or it ran past %v); qemu killed\nstderr:\n%s\nconsole:\n%s",
				time.Since(printed).Round(time.Second), limit.Round(time.Second), stderr.String(), repotest.Tail(strings.ReplaceAll(out, "\r\n", "\n"), 6000))
		}
	}
}

// consoleLines returns the console's lines that are not the kernel's
// (which begin "[" and its time), without trailing spaces.
func consoleLines(console string) []string {
	var out []string
	for l := range strings.Lines(console) {
		l = strings.TrimRight(l, " \r\n")
		if strings.HasPrefix(l, "[") {
			continue
		}
		out = append(out, l)
	}
	return out
}
