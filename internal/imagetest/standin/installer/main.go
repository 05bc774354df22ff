// Command installer is a stand-in for the Talos installer of Talos's
// installer image (ghcr.io/siderolabs/installer), which cannot be pulled
// here: imagetest.Installer puts it at /bin/installer of an image of its
// own. It takes the arguments fleet's install action gives the real one,
//
//	installer install --disk DISK --platform metal
//
// with the META values in INSTALLER_META_BASE64 (the real installer's
// variable, decoded as it decodes it), and writes the recognisable layout
// of package standin to DISK, marked with the image's reference
// (STANDIN_IMAGE, which the image's config sets). Like Talos's installer
// it refuses a disk that is not empty, in Talos's words on standard error,
//
//	failed to perform disk operations: disk DISK is not empty, skipping install, detected "gpt"
//
// and logs its steps with Go's log timestamps on standard output. With
// STANDIN_WRITE_TIME set (a Go duration, such as 10m), it takes that long
// between the partition table and the marks, as Talos's installer takes
// seconds to minutes formatting and copying there; stopped meanwhile (it
// dies of SIGTERM, as Talos's does), it leaves a partial install. With
// ESP_IMAGE set (the firmware test's image sets /usr/share/talos/esp.img:
// a FAT file system of Debian's signed shim and grub, grub's configuration,
// the kernel and the stand-in Talos's initramfs), it then writes that file
// over the layout's EFI system partition (standin.WriteESP), so that the
// disk boots, as Talos's installer writes its boot loader there. It exits
// 0 once the layout is written and synced, 1 on any error.
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/fleetkit/fleet/internal/imagetest/standin"
	"github.com/siderolabs/talos/pkg/machinery/meta"
)

// The variables of the image's config: the image's own reference, how
// long writing takes, and the EFI system partition's image.
const (
	imageEnv     = "STANDIN_IMAGE"
	writeTimeEnv = "STANDIN_WRITE_TIME"
	espEnv       = "ESP_IMAGE"
)

func main() {
	lg := log.New(os.Stdout, "", log.LstdFlags)
	if err := run(os.Args[1:], os.Getenv, lg); err != nil {
		// As Talos's installer ends: the error alone, on standard error.
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string, lg *log.Logger) error {
	lg.Printf("running Talos installer %s", standin.Version)
	c, err := parseCommand(args, getenv)
	if err != nil {
		return err
	}
	var writing func()
	if v := getenv(writeTimeEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("%s=%q is not a duration", writeTimeEnv, v)
		}
		writing = func() {
			lg.Printf("writing the partitions, for %v", d)
			time.Sleep(d)
		}
	}
	var esp []byte
	if p := getenv(espEnv); p != "" {
		if esp, err = os.ReadFile(p); err != nil {
			return fmt.Errorf("the image's EFI system partition: %w", err)
		}
	}
	f, size, err := c.openDisk()
	if err != nil {
		return err
	}
	defer f.Close()
	if err := c.installError(standin.Install(f, size, getenv(imageEnv), c.Values, lg, writing)); err != nil {
		return err
	}
	if esp != nil {
		if err := standin.WriteESP(f, size, esp); err != nil {
			return fmt.Errorf("failed to install the boot loader to %s: %w", c.Disk, err)
		}
		lg.Printf("wrote the EFI system partition: %d bytes", len(esp))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("failed to sync %s: %w", c.Disk, err)
	}
	lg.Printf("installation of %s complete", standin.Version)
	return nil
}

// command is what fleet's install action gives Talos's installer, read as
// the installer reads it: the arguments (install --disk DISK --platform
// metal) and the META values of INSTALLER_META_BASE64.
type command struct {
	Disk   string
	Values meta.Values
}

// parseCommand reads args (without the program's name) and the META values
// from getenv("INSTALLER_META_BASE64"); anything else but install on the
// metal platform with a disk is a usage error.
func parseCommand(args []string, getenv func(string) string) (command, error) {
	usage := fmt.Errorf("usage: installer install --disk DISK --platform metal, got %q", args)
	if len(args) == 0 || args[0] != "install" {
		return command{}, usage
	}
	var c command
	platform := ""
	for i := 1; i+1 < len(args); i += 2 {
		switch args[i] {
		case "--disk":
			c.Disk = args[i+1]
		case "--platform":
			platform = args[i+1]
		}
	}
	if c.Disk == "" || platform != "metal" {
		return command{}, usage
	}
	values, err := meta.DecodeValues(getenv("INSTALLER_META_BASE64"))
	if err != nil {
		return command{}, fmt.Errorf("decoding META values: %w", err)
	}
	c.Values = values
	return c, nil
}

// openDisk opens the command's disk for writing and returns its size; the
// caller closes it.
func (c command) openDisk() (*os.File, int64, error) {
	f, err := os.OpenFile(c.Disk, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("failed to open %s: %w", c.Disk, err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("failed to size %s: %w", c.Disk, err)
	}
	return f, size, nil
}

// installError is standin.Install's error as Talos's installer words it
// (see the package doc); any other error names the disk. nil stays nil.
func (c command) installError(err error) error {
	if ne := (*standin.NotEmptyError)(nil); errors.As(err, &ne) {
		return fmt.Errorf("failed to perform disk operations: disk %s is not empty, skipping install, detected %q", c.Disk, ne.Detected)
	}
	if err != nil {
		return fmt.Errorf("failed to perform disk operations on %s: %w", c.Disk, err)
	}
	return nil
}
