//go:build !linux

package attest

import (
	"fmt"
	"runtime"
)

// OpenTPM is implemented on Linux only; elsewhere it returns an error that
// wraps ErrTPM. OpenChannel works on every platform.
func OpenTPM(path string) (*Device, error) {
	return nil, fmt.Errorf("%w: opening a TPM device is not implemented on %s", ErrTPM, runtime.GOOS)
}
