// Command installer stands in for the Talos installer of Talos's installer
// image in TestIntegrationFirmware (package firmware), where the installed
// disk must boot: the image's /bin/installer, which fleet's install action
// runs through docker run (here the docker stand-in of the runner,
// tools/tinkerbell/runner) as it runs Talos's:
//
//	installer install --disk DISK --platform metal
//
// with the META values in INSTALLER_META_BASE64, decoded as Talos's
// installer decodes them. Like internal/imagetest/standin/installer it
// writes package standin's layout to DISK (a GPT of EFI, META, STATE and
// EPHEMERAL; META holding the values), refusing a disk that is not empty,
// and logs with Go's log timestamps on standard output. Then it writes the
// image's EFI system partition, ESP_IMAGE (default /usr/share/talos/esp.img:
// a FAT file system the test made with Debian's signed shim and grub,
// grub's configuration with the image's kernel arguments, the kernel, and
// the stand-in Talos's initramfs), over the layout's EFI partition, so
// that the disk boots, as Talos's installer writes its boot loader there.
// STANDIN_IMAGE (the image's config) is the image's reference. It exits 0
// once the disk is written and synced, 1 on any error.
package main

import (
	"fmt"
	"log"
	"os"

	"github.com/fleetkit/fleet/examples/internal/firmware/talosdisk"
	"github.com/fleetkit/fleet/internal/imagetest/standin"
)

const defaultESP = "/usr/share/talos/esp.img"

func main() {
	lg := log.New(os.Stdout, "", log.LstdFlags)
	if err := run(os.Args[1:], os.Getenv, lg); err != nil {
		lg.Printf("error: %v", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string, lg *log.Logger) error {
	lg.Printf("running Talos installer %s", standin.Version)
	c, err := standin.ParseCommand(args, getenv)
	if err != nil {
		return err
	}
	espFile := getenv("ESP_IMAGE")
	if espFile == "" {
		espFile = defaultESP
	}
	esp, err := os.ReadFile(espFile)
	if err != nil {
		return fmt.Errorf("the image's EFI system partition: %w", err)
	}
	f, size, err := c.OpenDisk()
	if err != nil {
		return err
	}
	defer f.Close()
	if err := c.InstallError(standin.Install(f, size, getenv("STANDIN_IMAGE"), c.Values, lg)); err != nil {
		return err
	}
	if err := talosdisk.WriteESP(f, f, size, esp); err != nil {
		return fmt.Errorf("failed to install the boot loader to %s: %w", c.Disk, err)
	}
	lg.Printf("wrote the EFI system partition: %d bytes", len(esp))
	if err := f.Sync(); err != nil {
		return fmt.Errorf("failed to sync %s: %w", c.Disk, err)
	}
	lg.Printf("installation of %s complete", standin.Version)
	return nil
}
