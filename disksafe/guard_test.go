package disksafe

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func writeWipeRecord(t *testing.T, dir string, r WipeRecord) {
	t.Helper()
	if err := writeJSON(dir, WipeRecordFile, r); err != nil {
		t.Fatal(err)
	}
}

func wiped(disk string) WipeRecord {
	return WipeRecord{BootID: testBootID, Disk: disk, Name: "sda", Serial: "S1", Wiped: true, Time: time.Now()}
}

func TestCheckWiped(t *testing.T) {
	dir := t.TempDir()
	writeWipeRecord(t, dir, wiped("/dev/sda"))
	if err := CheckWiped("/dev/sda", testBootID, &Config{StateDir: dir}); err != nil {
		t.Fatalf("CheckWiped = %v", err)
	}
}

func TestCheckWipedRefusals(t *testing.T) {
	tests := []struct {
		name   string
		record *WipeRecord
		raw    string
		bootID string
		disk   string
		want   error
		text   string
	}{
		{name: "no record: a new boot's empty /workflow", bootID: testBootID, disk: "/dev/sda", want: ErrResumedRun,
			text: "install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision"},
		{name: "record of another boot", bootID: "00000000-0000-4000-8000-000000000000", disk: "/dev/sda", record: new(wiped("/dev/sda")),
			want: ErrResumedRun, text: "install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision"},
		{name: "this boot's ID unknown", bootID: "", disk: "/dev/sda", record: new(wiped("/dev/sda")), want: ErrResumedRun,
			text: "install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision"},
		{name: "record of another disk", bootID: testBootID, disk: "/dev/sdb", record: new(wiped("/dev/sda")), want: ErrNotWiped,
			text: "install: wipe-disk did not wipe /dev/sdb in this boot; nothing installed; set desired_action to provision"},
		{name: "wipe did not finish", bootID: testBootID, disk: "/dev/sda",
			record: func() *WipeRecord { r := wiped("/dev/sda"); r.Wiped = false; return &r }(), want: ErrNotWiped,
			text: "install: wipe-disk did not wipe /dev/sda in this boot; nothing installed; set desired_action to provision"},
		{name: "unreadable record", bootID: testBootID, disk: "/dev/sda", raw: "{not json", want: ErrNotWiped,
			text: "install: wipe-disk did not wipe /dev/sda in this boot; nothing installed; set desired_action to provision"},
		{name: "no disk declared", bootID: testBootID, record: new(wiped("")), want: ErrNoInstallDisk, text: "install: no install disk is declared"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.record != nil {
				writeWipeRecord(t, dir, *tt.record)
			}
			if tt.raw != "" {
				os.WriteFile(filepath.Join(dir, WipeRecordFile), []byte(tt.raw), 0o600)
			}
			err := CheckWiped(tt.disk, tt.bootID, &Config{StateDir: dir})
			if !errors.Is(err, tt.want) {
				t.Errorf("CheckWiped = %v, want %v", err, tt.want)
			}
			if err == nil || err.Error() != tt.text {
				t.Errorf("CheckWiped error:\n got %v\nwant %s", err, tt.text)
			}
		})
	}
}
