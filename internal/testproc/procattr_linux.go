package testproc

import "syscall"

// procAttr makes the kernel send a started process SIGTERM when the test
// binary dies without stopping it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
