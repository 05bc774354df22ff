//go:build !linux

package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	fmt.Fprintf(os.Stderr, "fleet-init: not implemented on %s: it is a Linux kernel's /init\n", runtime.GOOS)
	os.Exit(1)
}
