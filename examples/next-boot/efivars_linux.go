package main

import "golang.org/x/sys/unix"

// mountEFIVars mounts efivarfs at /sys/firmware/efi/efivars, as an init
// system does at boot, for a host that did not.
func mountEFIVars() error {
	return unix.Mount("efivarfs", "/sys/firmware/efi/efivars", "efivarfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}
