package disksafe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
)

func wiped(disk string) WipeRecord {
	return WipeRecord{BootID: disksafetest.BootID, Disk: disk, Name: "sda", Serial: "S1", Wiped: true, Time: time.Now()}
}

func TestCheckWiped(t *testing.T) {
	const (
		resumed  = "install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision"
		notWiped = "install: wipe-disk did not wipe %s in this boot; nothing installed; set desired_action to provision"
	)
	unfinished := wiped("/dev/sda")
	unfinished.Wiped = false
	tests := []struct {
		name   string
		record *WipeRecord
		raw    string
		bootID string
		disk   string
		want   error // nil: the install may go on
		text   string
	}{
		{name: "this boot wiped the disk", bootID: disksafetest.BootID, disk: "/dev/sda", record: new(wiped("/dev/sda"))},
		{name: "no record: a new boot's empty /workflow", bootID: disksafetest.BootID, disk: "/dev/sda", want: ErrResumedRun, text: resumed},
		{name: "record of another boot", bootID: "00000000-0000-4000-8000-000000000000", disk: "/dev/sda", record: new(wiped("/dev/sda")),
			want: ErrResumedRun, text: resumed},
		{name: "this boot's ID unknown", bootID: "", disk: "/dev/sda", record: new(wiped("/dev/sda")), want: ErrResumedRun, text: resumed},
		{name: "record of another disk", bootID: disksafetest.BootID, disk: "/dev/sdb", record: new(wiped("/dev/sda")), want: ErrNotWiped,
			text: fmt.Sprintf(notWiped, "/dev/sdb")},
		{name: "wipe did not finish", bootID: disksafetest.BootID, disk: "/dev/sda", record: &unfinished, want: ErrNotWiped, text: fmt.Sprintf(notWiped, "/dev/sda")},
		{name: "unreadable record", bootID: disksafetest.BootID, disk: "/dev/sda", raw: "{not json", want: ErrNotWiped, text: fmt.Sprintf(notWiped, "/dev/sda")},
		{name: "no disk declared", bootID: disksafetest.BootID, record: new(wiped("")), want: ErrNoInstallDisk, text: "install: no install disk is declared"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.record != nil {
				if err := writeJSON(dir, WipeRecordFile, *tt.record); err != nil {
					t.Fatal(err)
				}
			}
			if tt.raw != "" {
				os.WriteFile(filepath.Join(dir, WipeRecordFile), []byte(tt.raw), 0o600)
			}
			err := CheckWiped(tt.disk, tt.bootID, &Config{StateDir: dir})
			if !errors.Is(err, tt.want) || errText(err) != tt.text {
				t.Errorf("CheckWiped = %v\nwant %v: %s", err, tt.want, tt.text)
			}
		})
	}
}
