//go:build !linux

package disksafe

// openDevice is implemented on Linux only.
func openDevice(p string, d Disk) (device, error) {
	return nil, ErrUnsupported
}
