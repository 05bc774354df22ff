//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// stopGroup runs cmd in a process group of its own, and makes stopping it
// send SIGTERM to the whole group, so that nothing it started holds its
// output open.
func stopGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
}
