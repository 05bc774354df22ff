package disksafe

import (
	"errors"
	"strings"
)

// The refusals of Judge, Check and Wipe. Each is what errors.Is finds in a
// returned error; the error's text is the runbook's line with the specifics
// filled in, after the name of the operation that refused (see Refusal).
// Each Text below is that line without the operation: the wipe-disk action
// prints it after "wipe: ". They are listed in the order Check judges them.
var (
	// ErrNoSerial: the Workflow carries no install_disk_serial.
	// Text: "no install disk serial is declared".
	ErrNoSerial = errors.New("no install disk serial is declared")

	// ErrNoInstallDisk: the Workflow carries no install_disk.
	// Text: "no install disk is declared".
	ErrNoInstallDisk = errors.New("no install disk is declared")

	// ErrBadInstallDisk: install_disk is not an absolute path under /dev.
	// Text: "the install disk <disk> is not a path under /dev".
	ErrBadInstallDisk = errors.New("the install disk is not a path under /dev")

	// ErrNotAttested: the HookOS agent recorded no attestation for this
	// boot, recorded it for another boot, or recorded that it did not pass.
	// Text: "this boot did not pass attestation".
	ErrNotAttested = errors.New("this boot did not pass attestation")

	// ErrNoInstallCode: this boot passed attestation but received no
	// install code. Text: "no install code".
	ErrNoInstallCode = errors.New("no install code")

	// ErrInstallCodeMismatch: the Workflow's install_code_sha256 is not the
	// SHA-256 of the code this boot received (or Target.Code is not that
	// code). No code is ever part of the text.
	// Text: "the Workflow's install code is not the one this boot received".
	ErrInstallCodeMismatch = errors.New("the Workflow's install code is not the one this boot received")

	// ErrUdevUnreadable: a disk's udev record cannot be read (its device
	// number is unknown, or the record exists and cannot be read;
	// Disk.UdevErr), so what udev says of its serial is unknown, and it
	// may be the declared disk. Text:
	// "<other>'s udev record cannot be read (<reason>); nothing wiped",
	// where <other> is that disk's kernel name.
	ErrUdevUnreadable = errors.New("a disk's udev record cannot be read; nothing wiped")

	// ErrSerialConflict: a disk's places disagree on its serial (see
	// SerialSource), and one of them says the declared serial, so that
	// disk may be the declared one or not. Text:
	// "<other> reports the serial <serial> in <place> but <serial2> in <place2>; nothing wiped",
	// where <other> is that disk's kernel name.
	ErrSerialConflict = errors.New("a disk reports two serials; nothing wiped")

	// ErrSerialNotFound: no listed disk reports the declared serial.
	// Text: "no disk reports the serial <serial>".
	ErrSerialNotFound = errors.New("no disk reports the serial")

	// ErrSerialAmbiguous: two or more disks report the declared serial.
	// Text: "more than one disk reports the serial <serial>". When
	// they are the paths of one multipath logical unit (Refusal.LUN), the
	// text goes on ": sda and sdb are one multipath LUN (wwid <wwn>,
	// multipath device dm-0)", naming what shows it.
	ErrSerialAmbiguous = errors.New("more than one disk reports the serial")

	// ErrWrongDisk: install_disk resolves to another disk than the one that
	// reports the serial, or to none. Text:
	// "<disk> is <name>, but the disk that reports <serial> is <other>".
	ErrWrongDisk = errors.New("the install disk is not the disk that reports the serial")

	// ErrRemovable: the disk that reports the serial is removable.
	// Text: "<disk> is removable".
	ErrRemovable = errors.New("the install disk is removable")

	// ErrRemovableUnreadable: the disk's removable flag is unknown: its
	// removable attribute (or an MMC device's type) cannot be read, or
	// holds a value the kernel never writes (Disk.RemovableErr). Text:
	// "<disk>'s removable attribute cannot be read (<reason>); nothing wiped".
	ErrRemovableUnreadable = errors.New("the install disk's removable attribute cannot be read; nothing wiped")

	// ErrUSB: the disk that reports the serial is on USB.
	// Text: "<disk> is on USB".
	ErrUSB = errors.New("the install disk is on USB")

	// ErrDevicePathUnreadable: the disk's sysfs device path, which tells
	// whether it is on USB, cannot be read (Disk.SysPathErr). Text:
	// "<disk>'s device path cannot be read, so USB cannot be ruled out (<reason>); nothing wiped".
	ErrDevicePathUnreadable = errors.New("the install disk's device path cannot be read, so USB cannot be ruled out; nothing wiped")

	// ErrReadOnly: the kernel reports the disk read-only.
	// Text: "<disk> is read-only".
	ErrReadOnly = errors.New("the install disk is read-only")

	// ErrReadOnlyUnreadable: the disk's ro attribute cannot be read, or
	// holds neither 0 nor 1 (Disk.ReadOnlyErr). Text:
	// "<disk>'s ro attribute cannot be read (<reason>); nothing wiped".
	ErrReadOnlyUnreadable = errors.New("the install disk's ro attribute cannot be read; nothing wiped")
)

// The errors of Wipe past the judgement.
var (
	// ErrInUse: the disk could not be opened exclusively: it, or one of
	// its partitions, is mounted, or held by RAID, LVM, swap or another
	// program. Text: "<disk> is in use (<reason>); nothing wiped".
	ErrInUse = errors.New("the install disk is in use; nothing wiped")

	// ErrOpen: the disk could not be opened for another reason than its
	// use. Text: "<disk> cannot be opened (<reason>); nothing wiped".
	ErrOpen = errors.New("the install disk cannot be opened; nothing wiped")

	// ErrRecord: the wipe could not be recorded in the state directory, so
	// it did not start. Text:
	// "the wipe cannot be recorded (<reason>); nothing wiped".
	ErrRecord = errors.New("the wipe cannot be recorded; nothing wiped")

	// ErrChanged: between the judgement and the open, the device behind the
	// disk's kernel name changed (another device number, not a block
	// device, or another size). Text:
	// "<disk> changed while it was being opened (<reason>); nothing wiped".
	ErrChanged = errors.New("the install disk changed while it was being opened; nothing wiped")

	// ErrWipeFailed: the wipe started and failed: an erase write, the
	// flush, or the record of the wipe failed, or the context ended.
	// The disk may be partly wiped. Text:
	// "<disk>: <reason>; the disk may be partly wiped".
	ErrWipeFailed = errors.New("the wipe failed; the disk may be partly wiped")

	// ErrUnsupported: wiping is implemented on Linux only.
	ErrUnsupported = errors.New("not implemented on this operating system")
)

// The refusals of CheckWiped, the install action's guard. Each Text below
// follows "install: ".
var (
	// ErrResumedRun: the run's wipe-disk action did not record a wipe in
	// this boot: the run resumed at install in a new HookOS boot (whose
	// empty RAM holds no record), or no wipe-disk ran before it. Text:
	// "this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision".
	ErrResumedRun = errors.New("this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision")

	// ErrNotWiped: wipe-disk recorded that it started, in this boot, but
	// not that it finished, or it recorded another disk. Text:
	// "wipe-disk did not wipe <disk> in this boot; nothing installed; set desired_action to provision".
	ErrNotWiped = errors.New("wipe-disk did not wipe the install disk in this boot; nothing installed; set desired_action to provision")
)

// missingName is what a Refusal names as the kernel name of an install_disk
// path that resolves to no block device: "wipe: /dev/sdb is missing, but the
// disk that reports S1 is sda".
const missingName = "missing"

// Refusal is the error of a refused or failed wipe or install. Its text is
// Op and the runbook's line for Err with the fields below filled in;
// errors.Is finds Err (one of the Err* values of this package) and Cause.
//
// A Refusal never holds an install code. It is not changed once returned,
// and may be shared between goroutines.
type Refusal struct {
	Err error // the sentinel, e.g. ErrWrongDisk

	// Op names the operation that refused, and begins the text: "wipe"
	// for Wipe, "install" for CheckWiped. Judge, Check and CheckCode leave
	// it "", so that the caller names its own operation.
	Op string

	Disk   string // install_disk as the Workflow declares it, e.g. /dev/disk/by-id/ata-X or /dev/sda
	Name   string // the kernel name Disk resolves to (e.g. sdb), or "missing"
	Serial string // the declared install_disk_serial
	Other  string // the kernel name of the disk that reports Serial (ErrWrongDisk), whose places disagree (ErrSerialConflict), or whose udev record cannot be read (ErrUdevUnreadable)

	// Said holds two places of disk Other that disagree on its serial,
	// the first saying Serial (ErrSerialConflict).
	Said []SerialSource
	// LUN is the multipath logical unit whose paths are the disks that
	// report Serial (ErrSerialAmbiguous); nil when they are not one.
	LUN *MultipathLUN

	// Cause is what lies under Err: the kernel's error, or
	// why this boot counts as not attested. Its text is part of the
	// message only where the runbook's line has a (<reason>).
	Cause error
}

// Error returns the runbook's line: Op, a colon and a blank, and the line
// for Err with the fields filled in; the line alone when Op is "".
func (r *Refusal) Error() string {
	if r.Op == "" {
		return r.line()
	}
	return r.Op + ": " + r.line()
}

// line is the runbook's line for r.Err, without the operation.
func (r *Refusal) line() string {
	switch r.Err {
	case ErrBadInstallDisk:
		return "the install disk " + r.Disk + " is not a path under /dev"
	case ErrSerialNotFound:
		return "no disk reports the serial " + r.Serial
	case ErrUdevUnreadable:
		return r.Other + "'s udev record cannot be read (" + reason(r.Cause) + "); nothing wiped"
	case ErrSerialConflict:
		if len(r.Said) == 2 {
			return r.Other + " reports the serial " + r.Said[0].Serial + " in " + r.Said[0].Where +
				" but " + r.Said[1].Serial + " in " + r.Said[1].Where + "; nothing wiped"
		}
	case ErrSerialAmbiguous:
		if r.LUN != nil {
			return "more than one disk reports the serial " + r.Serial + ": " + r.LUN.String()
		}
		return "more than one disk reports the serial " + r.Serial
	case ErrWrongDisk:
		return r.Disk + " is " + r.Name + ", but the disk that reports " + r.Serial + " is " + r.Other
	case ErrRemovable:
		return r.Disk + " is removable"
	case ErrRemovableUnreadable:
		return r.Disk + "'s removable attribute cannot be read (" + reason(r.Cause) + "); nothing wiped"
	case ErrUSB:
		return r.Disk + " is on USB"
	case ErrDevicePathUnreadable:
		return r.Disk + "'s device path cannot be read, so USB cannot be ruled out (" + reason(r.Cause) + "); nothing wiped"
	case ErrReadOnly:
		return r.Disk + " is read-only"
	case ErrReadOnlyUnreadable:
		return r.Disk + "'s ro attribute cannot be read (" + reason(r.Cause) + "); nothing wiped"
	case ErrInUse:
		return r.Disk + " is in use (" + reason(r.Cause) + "); nothing wiped"
	case ErrOpen:
		return r.Disk + " cannot be opened (" + reason(r.Cause) + "); nothing wiped"
	case ErrRecord:
		return "the wipe cannot be recorded (" + reason(r.Cause) + "); nothing wiped"
	case ErrChanged:
		return r.Disk + " changed while it was being opened (" + reason(r.Cause) + "); nothing wiped"
	case ErrWipeFailed:
		return r.Disk + ": " + reason(r.Cause) + "; the disk may be partly wiped"
	case ErrNotWiped:
		return "wipe-disk did not wipe " + r.Disk + " in this boot; nothing installed; set desired_action to provision"
	case nil:
		return "refused"
	}
	return r.Err.Error()
}

// Unwrap returns Err and, when set, Cause.
func (r *Refusal) Unwrap() []error {
	if r.Cause == nil {
		return []error{r.Err}
	}
	return []error{r.Err, r.Cause}
}

// reason renders err for a "(<reason>)" slot: one line, at most 300 bytes.
func reason(err error) string {
	if err == nil {
		return "no reason given"
	}
	return oneLine(err.Error(), 300)
}

// oneLine joins the non-empty lines of s with "; " and cuts the result to
// max bytes.
func oneLine(s string, max int) string {
	var parts []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	s = strings.Join(parts, "; ")
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "..."
	}
	if s == "" {
		return "no reason given"
	}
	return s
}
