// Command install is the install action of a fleet provision run: a
// Tinkerbell action that runs in HookOS after wipe-disk and installs Talos
// to the node's install disk with the Talos installer of the node's class,
// but only in the boot whose wipe-disk wiped that disk, and only when that
// boot's attestation received the run's install code.
//
//	install [-v]
//
// It reads its inputs from the environment, as Tinkerbell hands a
// Workflow's values to an action:
//
//	INSTALL_DISK         install_disk: /dev/sda, or a link such as
//	                     /dev/disk/by-id/nvme-Samsung_SSD_980_1TB_S64DNX0R123456
//	INSTALL_DISK_SERIAL  install_disk_serial (informational: wipe-disk proved
//	                     the disk)
//	INSTALL_CODE_SHA256  the Workflow's install_code_sha256: the SHA-256 of
//	                     the run's install code, 64 lowercase hex
//	                     characters; required
//	INSTALLER_IMAGE      the Talos installer image of the node's class, which
//	                     wipe-disk pulled in this boot; required
//	INSTALL_COMMAND      the command that runs the installer (default below)
//	CONFIG_URL_TEMPLATE  fleetd's config URL with {code} where the install
//	                     code goes, e.g.
//	                     https://fleetd.example:8443/config/{code}; not a
//	                     secret; only for an INSTALL_COMMAND that names
//	                     {config_url} (see below)
//	FLEET_BOOT_DIR       where hookos-attest recorded this boot's
//	                     attestation (default /run/fleet)
//	FLEET_STATE_DIR      the directory the run's actions share, where
//	                     wipe-disk recorded its wipe (default /workflow)
//
// # The install code
//
// The Workflow never carries the install code: more than this machine can
// read it. The code reaches the machine only in fleetd's attestation
// answer, which hookos-attest writes to this boot's record
// (disksafe.BootRecord in FLEET_BOOT_DIR). After the wipe record's checks
// below, install reads the code from there, and runs the installer only
// when the record is of this boot, says it passed attestation, holds a
// code, and that code hashes to INSTALL_CODE_SHA256 (disksafe.CheckCode,
// compared in constant time). Otherwise it prints one of
//
//	install: this boot did not pass attestation; nothing installed
//	install: this boot received no install code; nothing installed
//	install: the Workflow's install code is not the one this boot received; nothing installed
//
// and exits 1, running nothing.
//
// # What it runs
//
// Unless INSTALL_COMMAND says otherwise, the installer runs from the
// installer image in the host's Docker, as Talos itself runs it for an
// install (privileged, in the host's network and PID namespaces, with the
// host's /dev):
//
//	docker run --rm --pull never --privileged --network host --pid host
//	  --volume /dev:/dev --env INSTALLER_META_BASE64 --entrypoint /bin/installer
//	  {image} install --disk {disk} --platform metal
//
// INSTALL_COMMAND is split on blanks, and in each word {image} becomes
// INSTALLER_IMAGE, {disk} INSTALL_DISK and {config_url} CONFIG_URL_TEMPLATE
// with the record's code for {code}, so a value can never add a word. "--pull never" runs only the image wipe-disk
// pulled: a run resumed in a new boot, whose image cache lacks it, is
// refused before this point anyway.
//
// The install code reaches the installed Talos through its META partition:
// the command's environment holds INSTALLER_META_BASE64, the installer's
// own variable for META values, set to key 0xb (DownloadURLCode), which
// Talos substitutes for ${code} in its talos.config= kernel argument. So
// the installer image must boot with
//
//	talos.config=https://fleetd.example:8443/config/${code}
//
// (fleetd's config URL, with ${code} where provision's Cluster.ConfigURL
// has {code}) among its kernel arguments: for an image from the Talos Image
// Factory, in the schematic's customization.extraKernelArgs, as
// examples/talos/schematic.yaml has it. A Secure Boot
// (UKI) install boots with exactly the image's kernel arguments, and so does
// a GRUB install by a Talos 1.13 installer that is given no machine config,
// as here. The code travels in the docker CLI's environment, never among
// its arguments.
//
// An installer that builds GRUB's kernel arguments from its own (Talos
// installers before grubUseUKICmdline became the default in 1.12) takes
// talos.config from --config: add "--config {config_url}" to
// INSTALL_COMMAND for one, and set CONFIG_URL_TEMPLATE in the Template's
// action. That puts the config URL, and so the code, among the command's
// arguments, where the host's other processes can read it; the default
// command keeps it out of them.
//
// -v prints the installer's output as it runs, with the install code
// replaced by "<install code>".
//
// # Output and exit codes
//
// On success it prints "install: installed Talos to <disk>" and exits 0.
// Without a wipe of this disk recorded in this boot (disksafe.CheckWiped)
// it prints the runbook's line
//
//	install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision
//
// and exits 1, running nothing. When the installer fails it prints the
// installer's last lines, each prefixed "install: ", then "install: the
// installer failed; the lines above are its last output", and exits 1.
// Missing or inconsistent settings exit 2, installing nothing.
//
// # In a Tinkerbell template
//
// The action needs the host's Docker socket (the installer runs beside it,
// privileged), hookos-attest's boot record (/run/fleet, read-only) and the
// shared /workflow volume; see examples/templates:
//
//	actions:
//	  - name: install
//	    image: ghcr.io/fleetkit/fleet/install:v0.1.0
//	    timeout: 1800
//	    environment:
//	      INSTALL_DISK: {{ .install_disk | quote }}
//	      INSTALL_DISK_SERIAL: {{ .install_disk_serial | quote }}
//	      INSTALL_CODE_SHA256: {{ .install_code_sha256 | quote }}
//	      INSTALLER_IMAGE: {{ .installer_image | quote }}
//	      FLEET_BOOT_DIR: /run/fleet
//	    volumes:
//	      - /run/fleet:/run/fleet:ro
//	      - /var/run/docker.sock:/var/run/docker.sock
//
// The image holds this binary and the docker CLI.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/examples/internal/action"
)

const (
	exitInstalled = action.ExitOK
	exitRefused   = action.ExitFailed
	exitUsage     = action.ExitUsage
)

func main() {
	action.Main(func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
		return run(ctx, args, getenv, nil, stdout, stderr)
	})
}

const usageText = `usage: install [-v]

Installs Talos to the run's install disk with the installer of the node's
class, only in the boot whose wipe-disk wiped it and whose attestation
received the run's install code. Inputs, from the environment:

  INSTALL_DISK         install_disk (required)
  INSTALL_DISK_SERIAL  install_disk_serial
  INSTALL_CODE_SHA256  the SHA-256 of the run's install code (required)
  INSTALLER_IMAGE      the class's Talos installer image (required)
  INSTALL_COMMAND      the installer command; {image}, {disk} and {config_url}
                       are replaced in each word (default:
                       ` + defaultCommand + `)
  CONFIG_URL_TEMPLATE  fleetd's config URL with {code}, for {config_url}
  FLEET_BOOT_DIR       this boot's attestation record (default /run/fleet)
  FLEET_STATE_DIR      the run's shared directory (default /workflow)

The install code comes from this boot's attestation record, never from the
Workflow, and must hash to INSTALL_CODE_SHA256. It reaches the installed
Talos as META key 0xb, the ${code} of the talos.config= kernel argument the
installer image must carry.

Exit codes: 0 installed, 1 refused or the installer failed, 2 settings.

`

// run is the action; getenv reads its environment. root is the file system
// the boot ID is read from (disksafe.Config.Root); nil is the machine's.
func run(ctx context.Context, args []string, getenv func(string) string, root fs.FS, stdout, stderr io.Writer) int {
	fl := action.Flags("install", stderr)
	fl.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fl.PrintDefaults()
	}
	verbose := fl.Bool("v", false, "print the installer's output as it runs (the install code replaced)")
	if exit, ok := action.Parse(fl, args); !ok {
		return exit
	}

	t := disksafe.Target{
		Disk:       getenv("INSTALL_DISK"),
		Serial:     getenv("INSTALL_DISK_SERIAL"),
		CodeSHA256: getenv("INSTALL_CODE_SHA256"),
	}
	image := getenv("INSTALLER_IMAGE")
	switch {
	case t.Disk == "":
		fmt.Fprintln(stderr, "install: no install disk is declared (INSTALL_DISK); nothing installed")
		return exitUsage
	case image == "":
		fmt.Fprintln(stderr, "install: no installer image is declared (INSTALLER_IMAGE); nothing installed")
		return exitUsage
	case t.CodeSHA256 == "":
		fmt.Fprintln(stderr, "install: the Workflow carries no install_code_sha256 (INSTALL_CODE_SHA256); nothing installed")
		return exitUsage
	case !sha256Hex(t.CodeSHA256):
		fmt.Fprintln(stderr, "install: INSTALL_CODE_SHA256 is not 64 lowercase hex characters; nothing installed")
		return exitUsage
	}
	inst, err := newCommandInstaller(getenv("INSTALL_COMMAND"), image, getenv("CONFIG_URL_TEMPLATE"))
	if err != nil {
		fmt.Fprintf(stderr, "install: %v; nothing installed\n", err)
		return exitUsage
	}

	log := action.Logger(stderr, *verbose)
	cfg := &disksafe.Config{Root: root, StateDir: getenv("FLEET_STATE_DIR"), Logger: log}
	bootID, err := disksafe.BootID(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "install: %v; nothing installed\n", err)
		return exitRefused
	}
	boot := disksafe.Boot{ID: bootID}
	switch rec, err := disksafe.ReadBootRecord(getenv("FLEET_BOOT_DIR")); {
	case err == nil:
		boot.Record = &rec
	case !errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(stderr, "install: %v\n", err)
	}

	// wipe-disk's record first, so that a run resumed in a new boot gets
	// the runbook's line for that.
	if err := disksafe.CheckWiped(t.Disk, bootID, cfg); err != nil {
		fmt.Fprintln(stderr, err)
		action.Cause(stderr, err, disksafe.ErrNotWiped)
		return exitRefused
	}
	if err := disksafe.CheckCode(t, boot); err != nil {
		fmt.Fprintln(stderr, codeRefusal(err))
		action.Cause(stderr, err, disksafe.ErrNotAttested)
		return exitRefused
	}
	inst.setCode(boot.Record.Code)
	if err := runInstaller(ctx, inst, t.Disk, boot.Record.Code, defaultInstallerLines, log); err != nil {
		fmt.Fprintln(stderr, err)
		return exitRefused
	}
	fmt.Fprintln(stdout, installed(t.Disk))
	return exitInstalled
}

// installed is the runbook's line of a finished install.
func installed(disk string) string { return "install: installed Talos to " + disk }

// codeRefusal returns the line of an install that disksafe.CheckCode
// refused.
func codeRefusal(err error) string {
	switch {
	case errors.Is(err, disksafe.ErrNoInstallCode):
		return "install: this boot received no install code; nothing installed"
	case errors.Is(err, disksafe.ErrInstallCodeMismatch):
		return "install: the Workflow's install code is not the one this boot received; nothing installed"
	}
	return "install: this boot did not pass attestation; nothing installed"
}

// sha256Hex reports whether s has the form of install_code_sha256: 64
// lowercase hex characters.
func sha256Hex(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}
