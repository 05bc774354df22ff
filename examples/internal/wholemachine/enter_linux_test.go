package wholemachine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// enterName is the name the test binary plays machine-enter under.
const enterName = "machine-enter"

// enterMain is machine-enter DIR PROGRAM [ARG...]: run in a mount
// namespace of the machine's, it binds the machine's own parts from DIR
// over the host's and then executes PROGRAM:
//
//	DIR/run       over /run: the udev database, the boot record, the run's
//	              shared directory, the Docker socket (HookOS's /run is a
//	              tmpfs of its own)
//	DIR/sysclass  over /sys/class: dmi/id (the SMBIOS serial), with every
//	              other class of the real sysfs bound back into it
//
// It runs in two mount namespaces: the one ip netns exec makes for each of
// HookOS's own programs (hookos-attest), where its mounts end with
// PROGRAM, and, once, the one the machine's containerd, dockerd and agent
// share (nsenter --target, PROGRAM /bin/true), where its mounts stay until
// they stop and resolve the volumes of the Template's actions. Neither is
// the test's: nothing here changes the host's view.
func enterMain(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: machine-enter DIR PROGRAM [ARG...]")
		return 2
	}
	if err := enter(args[0]); err != nil {
		fmt.Fprintf(os.Stderr, "machine-enter: %v\n", err)
		return 126
	}
	prog, err := exec.LookPath(args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "machine-enter: %v\n", err)
		return 127
	}
	err = syscall.Exec(prog, args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "machine-enter: exec %s: %v\n", prog, err)
	return 126
}

func enter(dir string) error {
	bind := func(src, dst string, flags uintptr) error {
		if err := unix.Mount(src, dst, "", unix.MS_BIND|flags, ""); err != nil {
			return fmt.Errorf("bind %s over %s: %w", src, dst, err)
		}
		return nil
	}
	classDir := filepath.Join(dir, "sysclass")
	classes, err := os.ReadDir("/sys/class")
	if err != nil {
		return err
	}
	for _, c := range classes {
		if c.Name() == "dmi" {
			continue
		}
		dst := filepath.Join(classDir, c.Name())
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := bind(filepath.Join("/sys/class", c.Name()), dst, 0); err != nil {
			return err
		}
	}
	if err := bind(classDir, "/sys/class", unix.MS_REC); err != nil {
		return err
	}
	return bind(filepath.Join(dir, "run"), "/run", 0)
}
