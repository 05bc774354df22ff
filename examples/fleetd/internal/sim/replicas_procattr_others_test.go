//go:build !linux

package sim

import "syscall"

// procAttr is nil where the kernel cannot kill a child with its parent.
func procAttr() *syscall.SysProcAttr { return nil }
