package tinktest

import "syscall"

// procAttr makes the kernel send tinkerbell SIGTERM when the test binary
// dies without stopping it (a panic, a -timeout, a SIGKILL).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
