//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// newMountNamespace starts a process in a mount namespace of its own, a
// copy of the runner's.
func newMountNamespace() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
}

// enterContainer sets up the shim's mount namespace: every mount private,
// so that nothing mounted in it reaches the machine's namespace, each
// volume bound under root, and root the root directory. It refuses to run
// in its parent's mount namespace.
func enterContainer(root string, vols []volume) error {
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	parent, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", os.Getppid()))
	if err != nil {
		return err
	}
	if own == parent {
		return errors.New("the shim runs only in a mount namespace of its own")
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	for _, v := range vols {
		if err := bindVolume(filepath.Join(root, v.container), v); err != nil {
			return fmt.Errorf("volume %s: %w", v, err)
		}
	}
	if root != "/" {
		if err := unix.Chroot(root); err != nil {
			return fmt.Errorf("chroot %s: %w", root, err)
		}
	}
	return unix.Chdir("/")
}

// bindVolume binds v's host path, and the mounts under it, on target,
// read-only when v is. A missing host path is made a directory, as Docker
// makes it; a missing target is made as the host path is, a directory or
// an empty file.
func bindVolume(target string, v volume) error {
	fi, err := os.Stat(v.host)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(v.host, 0o755); err != nil {
			return err
		}
		fi, err = os.Stat(v.host)
	}
	if err != nil {
		return err
	}
	if err := mountPoint(target, fi.IsDir()); err != nil {
		return err
	}
	if err := unix.Mount(v.host, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", v.host, target, err)
	}
	if v.ro {
		return readOnly(target)
	}
	return nil
}

// mountPoint makes target, when missing, a directory or an empty file.
func mountPoint(target string, dir bool) error {
	if _, err := os.Lstat(target); err == nil {
		return nil
	}
	if dir {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// readOnly makes the mount at target and every mount under it read-only,
// as Docker makes a ":ro" volume on Linux 5.12 and later; on an older
// kernel, only the mount at target, as Docker then does.
func readOnly(target string) error {
	err := unix.MountSetattr(unix.AT_FDCWD, target, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if errors.Is(err, unix.ENOSYS) {
		err = unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
	}
	if err != nil {
		return fmt.Errorf("make %s read-only: %w", target, err)
	}
	return nil
}

// execProgram runs prog in the calling process's place; it returns only
// when it could not.
func execProgram(prog string, argv, env []string) error { return unix.Exec(prog, argv, env) }

// reboot syncs the disks and restarts the machine.
func reboot() error {
	unix.Sync()
	return unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
}
