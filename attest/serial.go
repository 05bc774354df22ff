package attest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// DMIDir is the sysfs directory ReadSerial reads when given a nil fs.FS.
const DMIDir = "/sys/class/dmi/id"

// ErrNoSerial is what ReadSerial returns when SMBIOS reports no usable
// serial.
var ErrNoSerial = errors.New("attest: SMBIOS reports no serial")

// placeholders are serials firmware reports when the maker set none: they
// name no machine.
var placeholders = []string{
	"to be filled by o.e.m.", "default string", "system serial number",
	"not specified", "not applicable", "none", "0", "0123456789", "serial",
}

// ReadSerial returns the machine's SMBIOS serial: the system serial
// (product_serial, SMBIOS type 1) from fsys, a view of /sys/class/dmi/id
// (nil: DMIDir itself; reading it needs root). Surrounding white space is
// dropped. The node's entry names this serial, so ReadSerial does not fall
// back to board_serial or chassis_serial: another field would name the
// machine differently from its entry. It returns ErrNoSerial for an empty
// serial, a known placeholder ("To Be Filled By O.E.M.", "Default string",
// ...), or one that is not printable ASCII.
func ReadSerial(fsys fs.FS) (string, error) {
	if fsys == nil {
		fsys = os.DirFS(DMIDir)
	}
	b, err := fs.ReadFile(fsys, "product_serial")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoSerial, err)
	}
	s := strings.TrimSpace(string(b))
	for _, p := range placeholders {
		if strings.EqualFold(s, p) {
			return "", fmt.Errorf("%w: product_serial is the placeholder %q", ErrNoSerial, s)
		}
	}
	if err := checkSerial(s); err != nil {
		return "", fmt.Errorf("%w: product_serial: %w", ErrNoSerial, err)
	}
	return s, nil
}
