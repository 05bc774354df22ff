//go:build !linux

package main

import (
	"fmt"
	"runtime"
)

// mountEFIVars is implemented on Linux only.
func mountEFIVars() error {
	return fmt.Errorf("mounting efivarfs is not implemented on %s", runtime.GOOS)
}
