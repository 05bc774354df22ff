//go:build !linux

package lldpwait

import (
	"errors"
	"fmt"
	"runtime"
)

// listen fails: raw AF_PACKET sockets and the kernel filter exist only on
// Linux.
func listen(ifname string) (conn, error) {
	return nil, fmt.Errorf("lldpwait: listening for LLDP frames on %s is not implemented on %s: %w",
		ifname, runtime.GOOS, errors.ErrUnsupported)
}
