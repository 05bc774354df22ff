package attest

import (
	"fmt"
	"os"
)

// OpenTPM opens the TPM character device at path ("" means DefaultDevice,
// the kernel's resource manager /dev/tpmrm0) and returns a Device over it.
// It needs read and write access to the device (root in HookOS). Run
// sends the platform's event log (DefaultEventLog) with this Device's
// quote. Errors wrap ErrTPM.
func OpenTPM(path string) (*Device, error) {
	if path == "" {
		path = DefaultDevice
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", ErrTPM, path, err)
	}
	d := OpenChannel(f)
	d.platform = true
	return d, nil
}
