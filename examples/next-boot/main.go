// Command next-boot is the next-boot action of a fleet provision run: a
// Tinkerbell action that runs in HookOS after install and makes the
// firmware boot the installed disk at the next boot, rather than netboot
// HookOS again.
//
//	next-boot
//
// It sets the UEFI variable BootNext, through efibootmgr, to a boot entry
// that loads the installed Talos's boot loader from the EFI system
// partition of the install disk:
//
//  1. it reads the install disk's primary GPT (the one install just wrote;
//     disksafe.ReadGPT, which accepts only a table whose CRCs check and
//     whose partitions lie inside the disk) and finds its one EFI system
//     partition, by number and unique GUID;
//  2. it reads the boot entries (efibootmgr -v) and picks an active one
//     whose device path is HD(<number>,GPT,<GUID>,...) followed by the
//     loader (NEXT_BOOT_LOADER, compared without case, as FAT names are),
//     preferring one labelled NEXT_BOOT_LABEL. One is often there already:
//     the "Talos Linux UKI" entry a systemd-boot install by the Talos
//     installer makes, or one the firmware made for the disk;
//  3. when there is none, it creates one without adding it to BootOrder
//     (efibootmgr --create-only --disk <disk> --part <number> --loader
//     <loader> --label <label>);
//  4. it deletes the entries labelled NEXT_BOOT_LABEL that name another
//     partition (earlier installs' ESPs, which no longer exist);
//  5. it sets BootNext to the entry (efibootmgr --bootnext) and checks that
//     the firmware holds it.
//
// BootOrder is never changed: BootNext holds for one boot, so the reboot
// action's reboot boots the installed Talos, and a later boot follows the
// machine's own boot order. A machine whose boot order puts PXE before the
// disk netboots HookOS at that later boot, and attests again, which is the
// runbook's FleetNodeBootedHookOSAfterInstall: fix its boot order.
//
// A machine that booted HookOS by legacy BIOS (no /sys/firmware/efi) has no
// BootNext: next-boot says so and exits 0, changing nothing, and the
// firmware's boot order decides.
//
// When /sys/firmware/efi/efivars is empty (the host never mounted
// efivarfs), next-boot mounts efivarfs there first.
//
// # Environment
//
//	INSTALL_DISK      install_disk, as the install action installed to
//	                  (/dev/sda or a /dev/disk/by-id link); required
//	NEXT_BOOT_LOADER  the boot loader's path on the ESP (default
//	                  \EFI\BOOT\BOOTX64.EFI on amd64, \EFI\BOOT\BOOTAA64.EFI
//	                  on arm64: the removable-media path, where Talos's
//	                  installer puts systemd-boot as EFI/boot/BOOTX64.efi)
//	NEXT_BOOT_LABEL   the label of the entry it creates (default
//	                  "Talos (fleet)")
//	EFIBOOTMGR        the efibootmgr program (default efibootmgr)
//
// # Output and exit codes
//
// On success it prints
//
//	next-boot: <disk> boots next: Boot<NNNN> <label>
//
// and exits 0. When the disk has no GPT or no single EFI system partition,
// or efibootmgr fails (its last line is said), it prints why on standard
// error and exits 1. A missing INSTALL_DISK exits 2.
//
// # In a Tinkerbell template
//
// The action needs the host's /dev (to read the disk), /sys read-write
// (efivarfs, for the UEFI variables) and root (a privileged container):
//
//	actions:
//	  - name: next-boot
//	    image: ghcr.io/fleetkit/fleet/next-boot:v0.1.0
//	    timeout: 120
//	    environment:
//	      INSTALL_DISK: {{ .install_disk | quote }}
//	    volumes:
//	      - /dev:/dev
//	      - /sys:/sys
//
// The image holds this binary and efibootmgr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/examples/internal/action"
)

const (
	exitDone   = action.ExitOK
	exitFailed = action.ExitFailed
	exitUsage  = action.ExitUsage
)

// defaultLabel labels the boot entry next-boot creates, and marks the ones
// it may delete.
const defaultLabel = "Talos (fleet)"

func main() {
	action.Main(func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		return run(ctx, args, getenv, system{}, stdout, stderr)
	})
}

// system is next-boot's view of the machine. A zero field is the real
// thing.
type system struct {
	// root is the root file system /sys and the /dev links are read from.
	// nil: os.DirFS("/").
	root fs.FS
	// devDir is where the disk is opened by its kernel name. "": /dev.
	devDir string
	// efi runs efibootmgr. nil: the EFIBOOTMGR program.
	efi efiTool
	// mountEFIVars mounts efivarfs at /sys/firmware/efi/efivars.
	// nil: mountEFIVars.
	mountEFIVars func() error
}

const usageText = `usage: next-boot

Sets the UEFI BootNext to a boot entry that loads the installed boot loader
from the install disk's EFI system partition, creating the entry if the
firmware has none; BootOrder is never changed. On a legacy BIOS machine it
changes nothing. Inputs, from the environment:

  INSTALL_DISK      install_disk (required)
  NEXT_BOOT_LOADER  the loader on the ESP (default %s)
  NEXT_BOOT_LABEL   the label of an entry it creates (default %q)
  EFIBOOTMGR        the efibootmgr program (default efibootmgr)

Exit codes: 0 done (or legacy BIOS), 1 failed, 2 usage.
`

// defaultLoader is the removable-media boot path of this architecture.
func defaultLoader() string {
	if runtime.GOARCH == "arm64" {
		return `\EFI\BOOT\BOOTAA64.EFI`
	}
	return `\EFI\BOOT\BOOTX64.EFI`
}

// run is the action; getenv reads its environment.
func run(ctx context.Context, args []string, getenv func(string) string, sys system, stdout, stderr io.Writer) int {
	fl := action.Flags("next-boot", stderr)
	fl.Usage = func() { fmt.Fprintf(stderr, usageText, defaultLoader(), defaultLabel) }
	if exit, ok := action.Parse(fl, args); !ok {
		return exit
	}
	disk := getenv("INSTALL_DISK")
	if disk == "" {
		fmt.Fprintln(stderr, "next-boot: no install disk is declared (INSTALL_DISK)")
		return exitUsage
	}
	loader := getenv("NEXT_BOOT_LOADER")
	if loader == "" {
		loader = defaultLoader()
	}
	label := getenv("NEXT_BOOT_LABEL")
	if label == "" {
		label = defaultLabel
	}
	if sys.root == nil {
		sys.root = os.DirFS("/")
	}
	if sys.devDir == "" {
		sys.devDir = "/dev"
	}
	if sys.efi == nil {
		p := getenv("EFIBOOTMGR")
		if p == "" {
			p = "efibootmgr"
		}
		sys.efi = efibootmgr{path: p}
	}
	if sys.mountEFIVars == nil {
		sys.mountEFIVars = mountEFIVars
	}

	if _, err := fs.Stat(sys.root, "sys/firmware/efi"); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintln(stdout, "next-boot: this machine booted by legacy BIOS, which has no BootNext; its boot order decides what boots next, and nothing was changed")
		return exitDone
	}
	if vars, err := fs.ReadDir(sys.root, "sys/firmware/efi/efivars"); err == nil && len(vars) == 0 {
		if err := sys.mountEFIVars(); err != nil {
			fmt.Fprintf(stderr, "next-boot: mount efivarfs: %v\n", err)
			return exitFailed
		}
	}

	name := disksafe.Resolve(disk, &disksafe.Config{Root: sys.root})
	if name == "" {
		fmt.Fprintf(stderr, "next-boot: %s is no block device\n", disk)
		return exitFailed
	}
	dev := filepath.Join(sys.devDir, name)
	f, err := os.Open(dev)
	if err != nil {
		fmt.Fprintf(stderr, "next-boot: %v\n", err)
		return exitFailed
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		fmt.Fprintf(stderr, "next-boot: %s (%s): %v\n", disk, name, err)
		return exitFailed
	}
	part, err := findESP(f, size)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "next-boot: %s (%s): %v\n", disk, name, err)
		return exitFailed
	}

	e, err := setNext(ctx, sys.efi, part, dev, loader, label, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "next-boot: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "next-boot: %s boots next: Boot%s %s\n", disk, e.Num, e.Label)
	return exitDone
}

// setNext finds or creates the entry that boots loader from p on dev,
// deletes stale entries of label, and sets BootNext to it.
func setNext(ctx context.Context, t efiTool, p esp, dev, loader, label string, stderr io.Writer) (bootEntry, error) {
	s, err := state(ctx, t)
	if err != nil {
		return bootEntry{}, err
	}
	// Entries of ours that name an ESP this disk no longer has.
	for _, e := range s.Entries {
		if e.Label == label && !e.boots(p, loader) {
			if _, err := t.Run(ctx, "--bootnum", e.Num, "--delete-bootnum"); err != nil {
				fmt.Fprintf(stderr, "next-boot: delete the stale entry Boot%s: %v\n", e.Num, err)
			}
		}
	}
	e, ok := pick(s, p, loader, label)
	if !ok {
		if _, err := t.Run(ctx, "--create-only", "--disk", dev, "--part", fmt.Sprint(p.Index), "--loader", loader, "--label", label); err != nil {
			return bootEntry{}, err
		}
		if s, err = state(ctx, t); err != nil {
			return bootEntry{}, err
		}
		if e, ok = pick(s, p, loader, label); !ok {
			return bootEntry{}, fmt.Errorf("efibootmgr made no entry that boots %s from %s %s", loader, dev, p)
		}
	}
	if _, err := t.Run(ctx, "--bootnext", e.Num); err != nil {
		return bootEntry{}, err
	}
	if s, err = state(ctx, t); err != nil {
		return bootEntry{}, err
	}
	if s.Next != e.Num {
		next := s.Next
		if next == "" {
			next = "unset"
		}
		return bootEntry{}, fmt.Errorf("BootNext is %s after efibootmgr --bootnext %s", next, e.Num)
	}
	return e, nil
}

// pick returns the active entry that boots loader from p, preferring one
// labelled label.
func pick(s bootState, p esp, loader, label string) (bootEntry, bool) {
	var found []bootEntry
	for _, e := range s.Entries {
		if e.Active && e.boots(p, loader) {
			found = append(found, e)
		}
	}
	for _, e := range found {
		if strings.EqualFold(e.Label, label) {
			return e, true
		}
	}
	if len(found) > 0 {
		return found[0], true
	}
	return bootEntry{}, false
}
