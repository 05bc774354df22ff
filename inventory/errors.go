package inventory

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors of the NetBox client that callers match with errors.Is.
var (
	// ErrUnavailable: NetBox did not answer in time, refused the
	// connection, or answered 5xx. fleetd answers 503 and loses nothing.
	ErrUnavailable = errors.New("netbox did not answer")
	// ErrNotFound: no device (or object) matches.
	ErrNotFound = errors.New("not found in netbox")
	// ErrRefusedToken: NetBox refused the API token (401 or 403).
	ErrRefusedToken = errors.New("netbox refused the token")
	// ErrDuplicateSerial: more than one of fleet's devices holds the serial
	// a lookup asked for, so no one of them is the machine's. The error is a
	// *DuplicateSerialError, which names the serial and the devices.
	ErrDuplicateSerial = errors.New("netbox holds more than one device with the serial")
	// ErrJournalLost: a JournalQueue could not queue a write: its queue was
	// full, or it was closed.
	ErrJournalLost = errors.New("inventory: the journal queue is full or closed; the write is lost")
)

// DeviceRef names one NetBox device.
type DeviceRef struct {
	ID   int64  // NetBox's device ID
	Name string // host name; "" when the device has none
}

// String returns the device as "w-01 (id 7)".
func (r DeviceRef) String() string {
	return r.Name + " (id " + strconv.FormatInt(r.ID, 10) + ")"
}

// DuplicateSerialError is what a lookup by serial returns when more than
// one of fleet's devices (of role Role) holds the serial. errors.Is finds
// ErrDuplicateSerial in it.
type DuplicateSerialError struct {
	Serial  string
	Devices []DeviceRef // every device that holds Serial, by ID; at least two
}

// Error names the serial and every device, e.g. `netbox: devices w-01 (id
// 3) and w-02 (id 7) both have serial "MS01-0002"`.
func (e *DuplicateSerialError) Error() string {
	names := make([]string, len(e.Devices))
	for i, d := range e.Devices {
		names[i] = d.String()
	}
	which := "both"
	if len(names) > 2 {
		which = "all"
	}
	list := strings.Join(names, ", ")
	if n := len(names); n >= 2 {
		list = strings.Join(names[:n-1], ", ") + " and " + names[n-1]
	}
	return fmt.Sprintf("netbox: devices %s %s have serial %q", list, which, e.Serial)
}

// Unwrap returns ErrDuplicateSerial.
func (e *DuplicateSerialError) Unwrap() error { return ErrDuplicateSerial }
