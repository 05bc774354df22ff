package disksafe

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Target is what a run declares: the Workflow's install_disk and
// install_disk_serial, and the SHA-256 of the install code it is for. The
// zero Target wipes nothing: Check refuses it.
type Target struct {
	// Disk is install_disk as written: /dev/sda, or a link such as
	// /dev/disk/by-id/nvme-Samsung_SSD_980_S64DNX0R123456.
	Disk string
	// Serial is install_disk_serial. Surrounding blanks are ignored.
	Serial string
	// CodeSHA256 is the Workflow's install_code_sha256: the SHA-256 of the
	// run's install code as 64 lowercase hex characters (CodeSHA256). When
	// set, Check refuses with ErrInstallCodeMismatch unless this boot's
	// recorded code hashes to it (compared in constant time); "" when the
	// Workflow carries none, and then this boot's recorded code stands
	// alone. The Workflow never carries the code itself.
	CodeSHA256 string
	// Code is the install code, read from this boot's record
	// (BootRecord.Code), never from the Workflow; "" when the caller
	// does not hold it. When set, Check refuses
	// with ErrInstallCodeMismatch unless it is the record's code. A
	// secret: never printed, logged or part of an error.
	Code string
}

// CodeSHA256 returns the SHA-256 of an install code as 64 lowercase hex
// characters: the form of a Workflow's install_code_sha256, which names the
// code without revealing it.
func CodeSHA256(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

// String describes t without its install code.
func (t Target) String() string {
	code := "none"
	if t.Code != "" {
		code = "set"
	}
	return fmt.Sprintf("install_disk=%s install_disk_serial=%s install_code=%s", t.Disk, t.Serial, code)
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

// Check judges whether the disk t declares may be wiped in boot b: it
// reads the machine's disks once (Read of t.Disk, through cfg), and returns
// what it read and the disk to wipe, or a *Refusal. It judges, in this
// order, and the first that holds is the refusal (errors.Is finds the
// sentinel):
//
//  1. ErrNoSerial: t.Serial is blank.
//  2. ErrNoInstallDisk: t.Disk is empty.
//  3. ErrBadInstallDisk: t.Disk is not an absolute path under /dev.
//  4. ErrNotAttested: b.Record is nil, is for another boot than b.ID (or
//     either ID is empty), or says the boot did not pass attestation.
//  5. ErrNoInstallCode: the record holds no install code.
//  6. ErrInstallCodeMismatch: t.CodeSHA256 is set and is not the SHA-256
//     of the record's code, or t.Code is set and is not the record's code
//     (each compared in constant time).
//  7. to 17.: the disks, as Judge judges them for t.Serial.
//
// Steps 4 to 6 are CheckCode. A refusal's text is the runbook's line
// without an operation (Refusal.Op is ""): the caller names its own, as
// the wipe-disk action prints "wipe: " before it. The Layout is returned
// whenever the disks could be read, refused or not; an error that is no
// *Refusal is a failure to read them (List). Check writes nothing.
func Check(t Target, b Boot, cfg *Config) (Layout, Disk, error) {
	l, err := Read(t.Disk, cfg)
	if err != nil {
		return Layout{}, Disk{}, err
	}
	d, err := check(l, t, b)
	return l, d, err
}

// check is Check of a Layout read for t.Disk.
func check(l Layout, t Target, b Boot) (Disk, error) {
	serial := strings.TrimSpace(t.Serial)
	if r := judgeDeclared(t.Disk, serial); r != nil {
		return Disk{}, r
	}
	if r := judgeCode(t, b); r != nil {
		r.Disk, r.Serial = t.Disk, serial
		return Disk{}, r
	}
	return judgeDisks(l, serial)
}

// Judge judges, with nothing but what l holds, whether the disk l was Read
// for (l.InstallDisk) is the one disk that reports serial and may be
// wiped, and returns it, or a *Refusal without an operation (Refusal.Op is
// ""). It judges, in this order, and the first that holds is the refusal
// (errors.Is finds the sentinel):
//
//  1. ErrNoSerial: serial is blank (surrounding blanks are ignored).
//  2. ErrNoInstallDisk: l.InstallDisk is empty.
//  3. ErrBadInstallDisk: l.InstallDisk is not an absolute path under /dev.
//  7. ErrUdevUnreadable: a disk's udev record cannot be read, so it may
//     be the disk that reports the serial.
//  8. ErrSerialConflict: a disk whose places disagree on its serial has
//     one that says the serial, so it may be the disk that reports it.
//     Another disk's disagreement is no refusal.
//  9. ErrSerialNotFound: no disk reports the serial.
//  10. ErrSerialAmbiguous: more than one disk reports it (Refusal.LUN
//     says when they are the paths of one multipath logical unit).
//  11. ErrWrongDisk: l.InstallDisk resolves (l.InstallDiskName) to another
//     kernel name than the disk that reports the serial, or to none
//     ("missing").
//  12. ErrRemovable: that disk is removable.
//  13. ErrRemovableUnreadable: its removable flag is unknown.
//  14. ErrUSB: that disk is on USB.
//  15. ErrDevicePathUnreadable: its device path is unknown, and udev does
//     not say USB.
//  16. ErrReadOnly: that disk is read-only.
//  17. ErrReadOnlyUnreadable: its ro flag is unknown.
//
// (Steps 4 to 6, this boot's attestation, are Check's.) A disk reports a
// serial only when every place that reports one for it agrees (see
// Disk.Serials and SerialSource). Judge reads and writes nothing, so any
// Layout, such as one built by hand, can be judged.
func Judge(l Layout, serial string) (Disk, error) {
	serial = strings.TrimSpace(serial)
	if r := judgeDeclared(l.InstallDisk, serial); r != nil {
		return Disk{}, r
	}
	return judgeDisks(l, serial)
}

// judgeDeclared judges what a run declares: steps 1 to 3 of Check.
func judgeDeclared(disk, serial string) *Refusal {
	switch {
	case serial == "":
		return &Refusal{Err: ErrNoSerial, Disk: disk}
	case disk == "":
		return &Refusal{Err: ErrNoInstallDisk, Serial: serial}
	case !underDev(disk):
		return &Refusal{Err: ErrBadInstallDisk, Disk: disk, Serial: serial}
	}
	return nil
}

// judgeDisks judges l's disks for serial: steps 7 to 17 of Check.
func judgeDisks(l Layout, serial string) (Disk, error) {
	for i := range l.Disks {
		if d := &l.Disks[i]; d.UdevErr != nil {
			return Disk{}, &Refusal{Err: ErrUdevUnreadable, Disk: l.InstallDisk, Serial: serial, Other: d.Name, Cause: d.UdevErr}
		}
	}
	var found []*Disk
	for i := range l.Disks {
		d := &l.Disks[i]
		if d.mayReport(serial) {
			a, b, _ := d.disagreement(serial)
			return Disk{}, &Refusal{Err: ErrSerialConflict, Disk: l.InstallDisk, Serial: serial, Other: d.Name, Said: []SerialSource{a, b}}
		}
		if d.reports(serial) {
			found = append(found, d)
		}
	}
	switch len(found) {
	case 0:
		return Disk{}, &Refusal{Err: ErrSerialNotFound, Disk: l.InstallDisk, Serial: serial}
	case 1:
	default:
		return Disk{}, &Refusal{Err: ErrSerialAmbiguous, Disk: l.InstallDisk, Serial: serial, LUN: oneLUN(found)}
	}
	d := *found[0]
	name := l.InstallDiskName
	if name == "" {
		name = missingName
	}
	if l.InstallDiskName != d.Name {
		return Disk{}, &Refusal{Err: ErrWrongDisk, Disk: l.InstallDisk, Name: name, Serial: serial, Other: d.Name}
	}
	switch {
	case d.Removable:
		return Disk{}, &Refusal{Err: ErrRemovable, Disk: l.InstallDisk, Name: name, Serial: serial}
	case d.RemovableErr != nil:
		return Disk{}, &Refusal{Err: ErrRemovableUnreadable, Disk: l.InstallDisk, Name: name, Serial: serial, Cause: d.RemovableErr}
	case d.USB:
		return Disk{}, &Refusal{Err: ErrUSB, Disk: l.InstallDisk, Name: name, Serial: serial}
	case d.SysPathErr != nil:
		return Disk{}, &Refusal{Err: ErrDevicePathUnreadable, Disk: l.InstallDisk, Name: name, Serial: serial, Cause: d.SysPathErr}
	case d.ReadOnly:
		return Disk{}, &Refusal{Err: ErrReadOnly, Disk: l.InstallDisk, Name: name, Serial: serial}
	case d.ReadOnlyErr != nil:
		return Disk{}, &Refusal{Err: ErrReadOnlyUnreadable, Disk: l.InstallDisk, Name: name, Serial: serial, Cause: d.ReadOnlyErr}
	}
	return d, nil
}

// CheckCode judges this boot's attestation for t as Check does before it
// looks at any disk (its steps 4 to 6), and returns nil or a *Refusal:
// errors.Is finds ErrNotAttested (with the cause), ErrNoInstallCode or
// ErrInstallCodeMismatch. The install action calls it before it runs the
// installer, so that it installs only in a boot that received the run's
// code. It reads nothing; no code is part of its error.
func CheckCode(t Target, b Boot) error {
	if r := judgeCode(t, b); r != nil {
		r.Disk, r.Serial = t.Disk, strings.TrimSpace(t.Serial)
		return r
	}
	return nil
}

// judgeCode judges b's attestation and install code against t.
func judgeCode(t Target, b Boot) *Refusal {
	if err := judgeBoot(b); err != nil {
		return &Refusal{Err: ErrNotAttested, Cause: err}
	}
	if b.Record.Code == "" {
		return &Refusal{Err: ErrNoInstallCode}
	}
	if t.CodeSHA256 != "" && subtle.ConstantTimeCompare([]byte(t.CodeSHA256), []byte(CodeSHA256(b.Record.Code))) != 1 {
		return &Refusal{Err: ErrInstallCodeMismatch}
	}
	if t.Code != "" && subtle.ConstantTimeCompare([]byte(t.Code), []byte(b.Record.Code)) != 1 {
		return &Refusal{Err: ErrInstallCodeMismatch}
	}
	return nil
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
