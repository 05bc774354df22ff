// Command wipe-disk is the wipe-disk action of a fleet provision run: a
// Tinkerbell action that runs in HookOS and wipes the node's install disk,
// but only when disksafe proves it is the declared disk, this boot passed
// attestation and holds the run's install code, and the installer image is
// pulled.
//
//	wipe-disk [-dry-run]
//
// It reads its inputs from the environment, as Tinkerbell hands a
// Workflow's values to an action:
//
//	INSTALL_DISK         install_disk: /dev/sda, or a link such as
//	                     /dev/disk/by-id/nvme-Samsung_SSD_980_1TB_S64DNX0R123456
//	INSTALL_DISK_SERIAL  install_disk_serial
//	INSTALL_CODE_SHA256  the Workflow's install_code_sha256: the SHA-256 of
//	                     the run's install code, 64 lowercase hex characters
//	                     (optional); when set, the code this boot received
//	                     must hash to it (disksafe.Target.CodeSHA256)
//	INSTALLER_IMAGE      the Talos installer image, pulled before the wipe so
//	                     the install action finds it cached; unset for a run
//	                     that only wipes (a retirement)
//	PULL_COMMAND         the command that pulls it, the image appended as its
//	                     last argument (default "docker pull"; e.g.
//	                     "ctr -n services.linuxkit images pull")
//	FLEET_BOOT_DIR       where the HookOS agent records this boot's
//	                     attestation (default /run/fleet)
//	FLEET_STATE_DIR      the directory the run's actions share, where the wipe
//	                     is recorded for the install action (default
//	                     /workflow, where the Template binds it)
//	FLEET_LOOP_DEVICES   "true": file-backed loop devices count as disks
//	                     (disksafe.Config.Loop), for a test machine whose
//	                     disks are loop devices; unset or "false" (as in
//	                     fleet's Templates): loop devices are never listed,
//	                     so never wiped
//
// A missing INSTALL_DISK or INSTALL_DISK_SERIAL is refused with the
// runbook's line, like every other refusal; nothing is ever wiped by
// default.
//
// The install code itself never comes from the Workflow, which more than
// this machine can read: it reaches the machine only in the attestation
// answer, and hookos-attest writes it to this boot's record in
// FLEET_BOOT_DIR. A digest that the record's code does not hash to is
// refused with "wipe: the Workflow's install code is not the one this boot
// received", before anything is pulled or wiped.
//
// It judges the disks (disksafe.Check), then pulls INSTALLER_IMAGE, and
// only then wipes (disksafe.Wipe, which judges again, with the disk open):
// nothing is pulled for a refused disk, and a disk is wiped only when the
// install action will find its installer.
//
// -dry-run lists the disks, judges them, and prints the verdict without
// pulling or writing anything.
//
// # In a Tinkerbell template
//
// The action needs root and the host's block devices (a privileged
// container), the host's /sys and udev database, the agent's boot record,
// and, for "docker pull", the host's Docker socket:
//
//	actions:
//	  - name: wipe-disk
//	    image: ghcr.io/fleetkit/fleet/wipe-disk:v0.1.0
//	    timeout: 900
//	    environment:
//	      INSTALL_DISK: {{ .install_disk | quote }}
//	      INSTALL_DISK_SERIAL: {{ .install_disk_serial | quote }}
//	      INSTALL_CODE_SHA256: {{ .install_code_sha256 | quote }}
//	      INSTALLER_IMAGE: {{ .installer_image | quote }}
//	    volumes:
//	      - /dev:/dev
//	      - /sys:/sys:ro
//	      - /run/udev:/run/udev:ro
//	      - /run/fleet:/run/fleet:ro
//	      - /var/run/docker.sock:/var/run/docker.sock
//
// Tinkerbell's agent mounts no directory of its own that the run's actions
// share, so the Template binds one (FLEET_STATE_DIR, /workflow) for every
// action of the run: see examples/templates, whose fleet-provision and
// fleet-retire Templates run this action.
//
// The image holds this binary and the pull command's program (the docker
// CLI by default).
//
// # Output and exit codes
//
// On success it prints "wipe: <disk> reports the serial <serial>" and exits
// 0. A refusal or failure prints the runbook's line (and, below it, what
// lies under it where that helps) on standard error and exits 1. -dry-run
// exits 0 when it would wipe and 1 when it would refuse. Usage errors exit 2.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/examples/internal/action"
)

func main() {
	action.Main(func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		return run(ctx, args, getenv, nil, stdout, stderr)
	})
}

// run is the action; getenv reads its environment. root is the file system
// the disks, /dev links and boot ID are read from (disksafe.Config.Root);
// nil is the machine's own.
func run(ctx context.Context, args []string, getenv func(string) string, root fs.FS, stdout, stderr io.Writer) int {
	fl := action.Flags("wipe-disk", stderr)
	dryRun := fl.Bool("dry-run", false, "judge the disks and print the verdict; pull and write nothing")
	if exit, ok := action.Parse(fl, args); !ok {
		return exit
	}

	target := disksafe.Target{
		Disk:       getenv("INSTALL_DISK"),
		Serial:     getenv("INSTALL_DISK_SERIAL"),
		CodeSHA256: getenv("INSTALL_CODE_SHA256"),
	}
	loop := false
	if v := getenv("FLEET_LOOP_DEVICES"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			fmt.Fprintf(stderr, "wipe-disk: FLEET_LOOP_DEVICES=%q is not true or false; nothing wiped\n", v)
			return action.ExitUsage
		}
		loop = b
	}
	cfg := &disksafe.Config{Root: root, StateDir: getenv("FLEET_STATE_DIR"), Loop: loop, Logger: action.Logger(stderr, false)}

	boot, err := thisBoot(getenv("FLEET_BOOT_DIR"), cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return action.ExitFailed
	}

	if *dryRun {
		return dry(target, boot, cfg, stdout, stderr)
	}
	w, err := wipe(ctx, target, getenv("INSTALLER_IMAGE"), boot, newCommandPuller(getenv("PULL_COMMAND")), cfg)
	if err != nil {
		refused(stderr, err)
		return action.ExitFailed
	}
	fmt.Fprintln(stdout, w)
	return action.ExitOK
}

// wipe judges the disks for t in boot b, pulls image with p when image is
// set, and wipes. Every error it returns begins "wipe: ".
func wipe(ctx context.Context, t disksafe.Target, image string, b disksafe.Boot, p puller, cfg *disksafe.Config) (disksafe.Wiped, error) {
	if _, _, err := disksafe.Check(t, b, cfg); err != nil {
		return disksafe.Wiped{}, fmt.Errorf("wipe: %w", err)
	}
	if image != "" {
		if err := pull(ctx, p, image); err != nil {
			return disksafe.Wiped{}, err
		}
		if cfg.Logger != nil {
			cfg.Logger.Info("wipe-disk: pulled the installer image", "image", image)
		}
	}
	return disksafe.Wipe(ctx, t, b, cfg)
}

// thisBoot reads this boot's ID and the HookOS agent's record of its
// attestation. A missing or unreadable record leaves the Boot without one,
// which the judgement refuses; an unreadable record is said on stderr.
func thisBoot(dir string, cfg *disksafe.Config, stderr io.Writer) (disksafe.Boot, error) {
	id, err := disksafe.BootID(cfg)
	if err != nil {
		return disksafe.Boot{}, fmt.Errorf("wipe-disk: %w", err)
	}
	boot := disksafe.Boot{ID: id}
	rec, err := disksafe.ReadBootRecord(dir)
	switch {
	case err == nil:
		boot.Record = &rec
	case !errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(stderr, "wipe-disk: %v\n", err)
	}
	return boot, nil
}

// dry judges the disks without pulling or writing.
func dry(t disksafe.Target, b disksafe.Boot, cfg *disksafe.Config, stdout, stderr io.Writer) int {
	l, d, err := disksafe.Check(t, b, cfg)
	var r *disksafe.Refusal
	if err != nil && !errors.As(err, &r) {
		fmt.Fprintf(stderr, "wipe-disk: %v\n", err)
		return action.ExitFailed
	}
	printDisks(stdout, l)
	if err != nil {
		refused(stderr, fmt.Errorf("wipe: %w", err))
		fmt.Fprintln(stdout, "wipe: dry run: nothing wiped")
		return action.ExitFailed
	}
	fmt.Fprintln(stdout, disksafe.Wiped{Disk: t.Disk, Name: d.Name, Serial: strings.TrimSpace(t.Serial)})
	fmt.Fprintln(stdout, "wipe: dry run: nothing wiped")
	return action.ExitOK
}

// refused prints a refusal: the runbook's line, and what lies under it
// when the line does not already say.
func refused(w io.Writer, err error) {
	fmt.Fprintln(w, err)
	action.Cause(w, err, disksafe.ErrNotAttested)
}

// printDisks prints the disks as a table, for the operator who reads the
// machine's disks.
func printDisks(w io.Writer, l disksafe.Layout) {
	fmt.Fprintf(w, "%-10s %-8s %10s  %-24s %-9s %s\n", "DISK", "DEV", "SIZE", "SERIAL", "TRANSPORT", "FLAGS")
	for _, d := range l.Disks {
		flags := ""
		for _, f := range []struct {
			on   bool
			name string
		}{{d.Removable, "removable"}, {d.USB, "usb"}, {d.ReadOnly, "ro"}} {
			if f.on {
				if flags != "" {
					flags += ","
				}
				flags += f.name
			}
		}
		serial := d.Serial
		if serial == "" {
			serial = "-"
		}
		fmt.Fprintf(w, "%-10s %-8s %10s  %-24s %-9s %s\n", d.Name, d.Dev, size(d.Size), serial, d.Transport, flags)
		for _, s := range d.Serials[min(1, len(d.Serials)):] {
			fmt.Fprintf(w, "%-10s %-8s %10s  %-24s\n", "", "", "", s)
		}
	}
	name := l.InstallDiskName
	if name == "" {
		name = "no block device"
	}
	fmt.Fprintf(w, "install disk %s resolves to %s\n", l.InstallDisk, name)
}

func size(b int64) string {
	const unit = 1000
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit && exp < 4; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(b)/float64(div), "kMGTP"[exp])
}
