//go:build linux

package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// bindMount binds host on target, creating both as directories when
// missing.
func bindMount(host, target string) error {
	for _, d := range []string{host, target} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return unix.Mount(host, target, "", unix.MS_BIND|unix.MS_REC, "")
}

// bindInto binds host on target inside an image's root file system,
// creating target as host is (a directory or a file), read-only when ro.
func bindInto(host, target string, ro bool) error {
	fi, err := os.Stat(host)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		err = os.MkdirAll(target, 0o755)
	} else {
		var f *os.File
		f, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			err = f.Close()
		}
	}
	if err != nil {
		return err
	}
	if err := unix.Mount(host, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if ro {
		return unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
	}
	return nil
}

// unmount detaches target.
func unmount(target string) error { return unix.Unmount(target, unix.MNT_DETACH) }

// chrootAttr runs a program with root as its root directory.
func chrootAttr(root string) *syscall.SysProcAttr { return &syscall.SysProcAttr{Chroot: root} }

// reboot syncs the disks and restarts the machine.
func reboot() error {
	unix.Sync()
	return unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
}
