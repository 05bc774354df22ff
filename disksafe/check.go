package disksafe

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
)

// Target is what a run declares: the Workflow's install_disk and
// install_disk_serial, the install code it carries, and its installer image.
// The zero Target wipes nothing: Check refuses it.
type Target struct {
	// Disk is install_disk as written: /dev/sda, or a link such as
	// /dev/disk/by-id/nvme-Samsung_SSD_980_S64DNX0R123456.
	Disk string
	// Serial is install_disk_serial. Surrounding blanks are ignored.
	Serial string
	// Code is the install code the Workflow carries; "" when it carries
	// none, and then this boot's recorded code stands alone. A secret:
	// never printed, logged or part of an error.
	Code string
	// InstallerImage is the Talos installer image Wipe pulls before it
	// wipes; "" for a run that installs nothing after the wipe (a
	// retirement), which pulls nothing.
	InstallerImage string
}

// String describes t without its install code.
func (t Target) String() string {
	code := "none"
	if t.Code != "" {
		code = "set"
	}
	return fmt.Sprintf("install_disk=%s install_disk_serial=%s install_code=%s installer_image=%s", t.Disk, t.Serial, code, t.InstallerImage)
}

// GoString is String, so %#v does not print the install code either.
func (t Target) GoString() string { return "disksafe.Target{" + t.String() + "}" }

// Boot is this boot's attestation, as Check judges it: this boot's ID and the
// HookOS agent's record (ReadBootRecord). A Boot is a value.
type Boot struct {
	// ID is this boot's ID (BootID). "" never matches a record.
	ID string
	// Record is the agent's record; nil when there is none.
	Record *BootRecord
}

// Check judges whether the Layout's declared install disk may be wiped for t
// in boot b, and returns the disk to wipe, or a *Refusal. It judges, in this
// order, and the first that holds is the refusal (errors.Is finds the
// sentinel):
//
//  1. ErrNoSerial: t.Serial is blank.
//  2. ErrNoInstallDisk: t.Disk is empty.
//  3. ErrBadInstallDisk: t.Disk is not an absolute path under /dev.
//  4. ErrNotAttested: b.Record is nil, is for another boot than b.ID (or
//     either ID is empty), or says the boot did not pass attestation.
//  5. ErrNoInstallCode: the record holds no install code.
//  6. ErrInstallCodeMismatch: t.Code is set and is not the record's code
//     (compared in constant time).
//  7. ErrSerialNotFound: no disk reports t.Serial.
//  8. ErrSerialAmbiguous: more than one disk reports it.
//  9. ErrWrongDisk: t.Disk resolves (l.InstallDiskName) to another kernel
//     name than the disk that reports the serial, or to none ("missing").
//  10. ErrRemovable: that disk is removable.
//  11. ErrUSB: that disk is on USB.
//  12. ErrReadOnly: that disk is read-only.
//
// The Layout must be Read for t.Disk; one read for another path is refused
// with a plain error. Check reads nothing and writes nothing.
func Check(l Layout, t Target, b Boot) (Disk, error) {
	serial := strings.TrimSpace(t.Serial)
	switch {
	case serial == "":
		return Disk{}, &Refusal{Err: ErrNoSerial, Disk: t.Disk}
	case t.Disk == "":
		return Disk{}, &Refusal{Err: ErrNoInstallDisk, Serial: serial}
	case !underDev(t.Disk):
		return Disk{}, &Refusal{Err: ErrBadInstallDisk, Disk: t.Disk, Serial: serial}
	}
	if err := judgeBoot(b); err != nil {
		return Disk{}, &Refusal{Err: ErrNotAttested, Disk: t.Disk, Serial: serial, Cause: err}
	}
	if b.Record.Code == "" {
		return Disk{}, &Refusal{Err: ErrNoInstallCode, Disk: t.Disk, Serial: serial}
	}
	if t.Code != "" && subtle.ConstantTimeCompare([]byte(t.Code), []byte(b.Record.Code)) != 1 {
		return Disk{}, &Refusal{Err: ErrInstallCodeMismatch, Disk: t.Disk, Serial: serial}
	}
	if l.InstallDisk != t.Disk {
		return Disk{}, fmt.Errorf("disksafe: the layout was read for %q, not for %q", l.InstallDisk, t.Disk)
	}

	var found []int
	for i := range l.Disks {
		if l.Disks[i].reports(serial) {
			found = append(found, i)
		}
	}
	switch len(found) {
	case 0:
		return Disk{}, &Refusal{Err: ErrSerialNotFound, Disk: t.Disk, Serial: serial}
	case 1:
	default:
		return Disk{}, &Refusal{Err: ErrSerialAmbiguous, Disk: t.Disk, Serial: serial}
	}
	d := l.Disks[found[0]]
	name := l.InstallDiskName
	if name == "" {
		name = missingName
	}
	if l.InstallDiskName != d.Name {
		return Disk{}, &Refusal{Err: ErrWrongDisk, Disk: t.Disk, Name: name, Serial: serial, Other: d.Name}
	}
	switch {
	case d.Removable:
		return Disk{}, &Refusal{Err: ErrRemovable, Disk: t.Disk, Name: name, Serial: serial}
	case d.USB:
		return Disk{}, &Refusal{Err: ErrUSB, Disk: t.Disk, Name: name, Serial: serial}
	case d.ReadOnly:
		return Disk{}, &Refusal{Err: ErrReadOnly, Disk: t.Disk, Name: name, Serial: serial}
	}
	return d, nil
}

// The causes under ErrNotAttested.
var (
	errNoRecord    = errors.New("the HookOS agent recorded no attestation in this boot")
	errNoBootID    = errors.New("this boot's ID is unknown")
	errOtherBoot   = errors.New("the attestation record is of another boot")
	errNotAttested = errors.New("the attestation record says this boot did not pass")
)

func judgeBoot(b Boot) error {
	switch {
	case b.Record == nil:
		return errNoRecord
	case b.ID == "":
		return errNoBootID
	case b.Record.BootID == "" || b.Record.BootID != b.ID:
		return errOtherBoot
	case !b.Record.Attested:
		return errNotAttested
	}
	return nil
}
