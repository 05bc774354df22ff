package sim

import "syscall"

// procAttr makes the kernel kill a fleetd process the test started when
// the test binary dies without stopping it (a panic, a -timeout, a
// SIGKILL).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
