package disksafe

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRefusalTexts pins the text of every sentinel a Refusal can carry, so
// none falls back to the sentinel's own, unspecific text.
func TestRefusalTexts(t *testing.T) {
	cause := errors.New("the reason\nover two lines")
	r := func(sentinel error) *Refusal {
		op := "wipe"
		if sentinel == ErrResumedRun || sentinel == ErrNotWiped {
			op = "install"
		}
		return &Refusal{Op: op, Err: sentinel, Disk: "/dev/sdb", Name: "sdb", Serial: "S1", Other: "sda", Cause: cause,
			Said: []SerialSource{{"/sys/block/sda/device/vpd_pg80", "S1"}, {"udev's ID_SERIAL_SHORT", "S2"}}}
	}
	tests := map[error]string{
		ErrNoSerial:             "wipe: no install disk serial is declared",
		ErrNoInstallDisk:        "wipe: no install disk is declared",
		ErrBadInstallDisk:       "wipe: the install disk /dev/sdb is not a path under /dev",
		ErrNotAttested:          "wipe: this boot did not pass attestation",
		ErrNoInstallCode:        "wipe: no install code",
		ErrInstallCodeMismatch:  "wipe: the Workflow's install code is not the one this boot received",
		ErrUdevUnreadable:       "wipe: sda's udev record cannot be read (the reason; over two lines); nothing wiped",
		ErrSerialConflict:       "wipe: sda reports the serial S1 in /sys/block/sda/device/vpd_pg80 but S2 in udev's ID_SERIAL_SHORT; nothing wiped",
		ErrSerialNotFound:       "wipe: no disk reports the serial S1",
		ErrSerialAmbiguous:      "wipe: more than one disk reports the serial S1",
		ErrWrongDisk:            "wipe: /dev/sdb is sdb, but the disk that reports S1 is sda",
		ErrRemovable:            "wipe: /dev/sdb is removable",
		ErrRemovableUnreadable:  "wipe: /dev/sdb's removable attribute cannot be read (the reason; over two lines); nothing wiped",
		ErrUSB:                  "wipe: /dev/sdb is on USB",
		ErrDevicePathUnreadable: "wipe: /dev/sdb's device path cannot be read, so USB cannot be ruled out (the reason; over two lines); nothing wiped",
		ErrReadOnly:             "wipe: /dev/sdb is read-only",
		ErrReadOnlyUnreadable:   "wipe: /dev/sdb's ro attribute cannot be read (the reason; over two lines); nothing wiped",
		ErrOpen:                 "wipe: /dev/sdb cannot be opened (the reason; over two lines); nothing wiped",
		ErrRecord:               "wipe: the wipe cannot be recorded (the reason; over two lines); nothing wiped",
		ErrInUse:                "wipe: /dev/sdb is in use (the reason; over two lines); nothing wiped",
		ErrChanged:              "wipe: /dev/sdb changed while it was being opened (the reason; over two lines); nothing wiped",
		ErrWipeFailed:           "wipe: /dev/sdb: the reason; over two lines; the disk may be partly wiped",
		ErrResumedRun:           "install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision",
		ErrNotWiped:             "install: wipe-disk did not wipe /dev/sdb in this boot; nothing installed; set desired_action to provision",
	}
	for sentinel, want := range tests {
		err := r(sentinel)
		if err.Error() != want {
			t.Errorf("%v:\n got %q\nwant %q", sentinel, err.Error(), want)
		}
		if !errors.Is(err, sentinel) || !errors.Is(err, cause) {
			t.Errorf("errors.Is does not find %v and the cause in %v", sentinel, err)
		}
	}
	lun := &Refusal{Op: "wipe", Err: ErrSerialAmbiguous, Serial: "S1", LUN: &MultipathLUN{Paths: []string{"sda", "sdb", "sdc"}, WWN: "naa.600a0b80001234"}}
	if got, want := lun.Error(), "wipe: more than one disk reports the serial S1: sda, sdb and sdc are one multipath LUN (wwid naa.600a0b80001234)"; got != want {
		t.Errorf("ErrSerialAmbiguous of a multipath LUN:\n got %q\nwant %q", got, want)
	}
	if got := (&Refusal{Op: "wipe", Err: ErrOpen, Disk: "/dev/sdb"}).Error(); got != "wipe: /dev/sdb cannot be opened (no reason given); nothing wiped" {
		t.Errorf("without a cause: %q", got)
	}
	if got := (&Refusal{Err: ErrSerialNotFound, Serial: "S1"}).Error(); got != "no disk reports the serial S1" {
		t.Errorf("without an Op: %q", got)
	}
	long := &Refusal{Err: ErrOpen, Disk: "/dev/sdb", Cause: errors.New(strings.Repeat("é", 1000))}
	if got := long.Error(); len(got) > 400 || !utf8.ValidString(got) {
		t.Errorf("a long reason is not cut cleanly: %d bytes, %q", len(got), got)
	}
}
