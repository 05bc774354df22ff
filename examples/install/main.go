// Command install is the install action of a fleet provision run: a
// Tinkerbell action that runs in HookOS after wipe-disk and installs Talos
// to the node's install disk with the Talos installer of the node's class,
// but only in the boot whose wipe-disk wiped that disk.
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
//	INSTALL_CODE         the run's install code: a secret, never printed;
//	                     required
//	CONFIG_URL           the run's config URL, which carries the install
//	                     code: a secret, never printed; what {config_url}
//	                     in INSTALL_COMMAND becomes (see below); optional,
//	                     and when set it must carry INSTALL_CODE
//	INSTALLER_IMAGE      the Talos installer image of the node's class, which
//	                     wipe-disk pulled in this boot; required
//	INSTALL_COMMAND      the command that runs the installer (default below)
//	FLEET_STATE_DIR      the directory the run's actions share, where
//	                     wipe-disk recorded its wipe (default /workflow)
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
// INSTALLER_IMAGE, {disk} INSTALL_DISK and {config_url} CONFIG_URL, so a
// value can never add a word. "--pull never" runs only the image wipe-disk
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
// Factory, in the schematic's customization.extraKernelArgs. A Secure Boot
// (UKI) install boots with exactly the image's kernel arguments, and so does
// a GRUB install by a Talos 1.13 installer that is given no machine config,
// as here. The code travels in the docker CLI's environment, never among
// its arguments.
//
// An installer that builds GRUB's kernel arguments from its own (Talos
// installers before grubUseUKICmdline became the default in 1.12) takes
// talos.config from --config: add "--config {config_url}" to
// INSTALL_COMMAND for one. That puts the config URL, and so the code, among
// the command's arguments.
//
// -v prints the installer's output as it runs, with the install code
// replaced by "<install code>".
//
// # Output and exit codes
//
// On success it prints "install: installed Talos to <disk>" and exits 0.
// Without a wipe of this disk recorded in this boot (disksafe.Install) it
// prints the runbook's line
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
// privileged) and the shared /workflow volume; see examples/templates:
//
//	actions:
//	  - name: install
//	    image: registry.example/fleet/install:v1
//	    timeout: 1800
//	    environment:
//	      INSTALL_DISK: {{ .install_disk | quote }}
//	      INSTALL_DISK_SERIAL: {{ .install_disk_serial | quote }}
//	      INSTALL_CODE: {{ .install_code | quote }}
//	      CONFIG_URL: {{ .config_url | quote }}
//	      INSTALLER_IMAGE: {{ .installer_image | quote }}
//	    volumes:
//	      - /var/run/docker.sock:/var/run/docker.sock
//
// The image holds this binary and the docker CLI.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fleetkit/fleet/disksafe"
)

const (
	exitInstalled = 0
	exitRefused   = 1
	exitUsage     = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, nil, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usageText = `usage: install [-v]

Installs Talos to the run's install disk with the installer of the node's
class, only in the boot whose wipe-disk wiped it. Inputs, from the
environment:

  INSTALL_DISK         install_disk (required)
  INSTALL_DISK_SERIAL  install_disk_serial
  INSTALL_CODE         the run's install code, a secret (required)
  CONFIG_URL           the run's config URL, a secret, for {config_url};
                       when set it must carry INSTALL_CODE
  INSTALLER_IMAGE      the class's Talos installer image (required)
  INSTALL_COMMAND      the installer command; {image}, {disk} and {config_url}
                       are replaced in each word (default:
                       ` + defaultCommand + `)
  FLEET_STATE_DIR      the run's shared directory (default /workflow)

The install code reaches the installed Talos as META key 0xb, the ${code}
of the talos.config= kernel argument the installer image must carry.

Exit codes: 0 installed, 1 refused or the installer failed, 2 settings.

`

// run is the action; getenv reads its environment. root is the file system
// the boot ID is read from (disksafe.Config.Root); nil is the machine's.
func run(ctx context.Context, args []string, getenv func(string) string, root fs.FS, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("install", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fl.PrintDefaults()
	}
	verbose := fl.Bool("v", false, "print the installer's output as it runs (the install code replaced)")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if fl.NArg() != 0 {
		fmt.Fprintf(stderr, "install: unexpected arguments %q\n", fl.Args())
		return exitUsage
	}

	t := disksafe.Target{
		Disk:           getenv("INSTALL_DISK"),
		Serial:         getenv("INSTALL_DISK_SERIAL"),
		Code:           getenv("INSTALL_CODE"),
		InstallerImage: getenv("INSTALLER_IMAGE"),
	}
	configURL := getenv("CONFIG_URL")
	switch {
	case t.Disk == "":
		fmt.Fprintln(stderr, "install: no install disk is declared (INSTALL_DISK); nothing installed")
		return exitUsage
	case t.InstallerImage == "":
		fmt.Fprintln(stderr, "install: no installer image is declared (INSTALLER_IMAGE); nothing installed")
		return exitUsage
	case t.Code == "":
		fmt.Fprintln(stderr, "install: the Workflow carries no install code (INSTALL_CODE); nothing installed")
		return exitUsage
	case configURL != "" && !strings.Contains(configURL, t.Code):
		fmt.Fprintln(stderr, "install: CONFIG_URL does not carry the Workflow's install code; nothing installed")
		return exitUsage
	}
	inst, err := newCommandInstaller(getenv("INSTALL_COMMAND"), t.InstallerImage, configURL, t.Code)
	if err != nil {
		fmt.Fprintf(stderr, "install: %v; nothing installed\n", err)
		return exitUsage
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	cfg := &disksafe.Config{
		Root:     root,
		StateDir: getenv("FLEET_STATE_DIR"),
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	}
	bootID, err := disksafe.BootID(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "install: %v; nothing installed\n", err)
		return exitRefused
	}
	done, err := disksafe.Install(ctx, t, bootID, inst, cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		// What wipe-disk recorded instead, where the line does not say.
		var r *disksafe.Refusal
		if errors.As(err, &r) && r.Cause != nil && errors.Is(err, disksafe.ErrNotWiped) {
			fmt.Fprintf(stderr, "  (%v)\n", r.Cause)
		}
		return exitRefused
	}
	fmt.Fprintln(stdout, done)
	return exitInstalled
}
