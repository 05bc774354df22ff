package disksafe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// scriptedInstaller prints lines, from two goroutines as stdout and stderr
// would, and returns err.
type scriptedInstaller struct {
	stdout, stderr []string
	err            error
	disks          []string
}

func (s *scriptedInstaller) Install(ctx context.Context, disk string, output func(string)) error {
	s.disks = append(s.disks, disk)
	var wg sync.WaitGroup
	for _, lines := range [][]string{s.stdout, s.stderr} {
		wg.Go(func() {
			for _, l := range lines {
				output(l)
			}
		})
	}
	wg.Wait()
	return s.err
}

func writeWipeRecord(t *testing.T, dir string, r WipeRecord) {
	t.Helper()
	if err := writeJSON(dir, WipeRecordFile, r); err != nil {
		t.Fatal(err)
	}
}

func wiped(disk string) WipeRecord {
	return WipeRecord{BootID: testBootID, Disk: disk, Name: "sda", Serial: "S1", Wiped: true, Time: time.Now()}
}

func TestInstallSucceeds(t *testing.T) {
	dir := t.TempDir()
	writeWipeRecord(t, dir, wiped("/dev/sda"))
	inst := &scriptedInstaller{stdout: []string{"installing Talos", "done"}}
	got, err := Install(t.Context(), Target{Disk: "/dev/sda", Serial: "S1"}, testBootID, inst, &Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != "install: installed Talos to /dev/sda" {
		t.Errorf("Installed = %q", got)
	}
	if !cmp.Equal(inst.disks, []string{"/dev/sda"}) {
		t.Errorf("installer ran on %q", inst.disks)
	}
}

func TestInstallRefusals(t *testing.T) {
	tests := []struct {
		name   string
		record *WipeRecord
		raw    string
		bootID string
		disk   string
		want   error
		text   string
	}{{
		name: "no record: a new boot's empty /workflow", bootID: testBootID, disk: "/dev/sda",
		want: ErrResumedRun,
		text: "install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision",
	}, {
		name: "record of another boot", bootID: "00000000-0000-4000-8000-000000000000", disk: "/dev/sda",
		record: ptr(wiped("/dev/sda")),
		want:   ErrResumedRun,
		text:   "install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision",
	}, {
		name: "this boot's ID unknown", bootID: "", disk: "/dev/sda",
		record: ptr(wiped("/dev/sda")),
		want:   ErrResumedRun,
		text:   "install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision",
	}, {
		name: "record of another disk", bootID: testBootID, disk: "/dev/sdb",
		record: ptr(wiped("/dev/sda")),
		want:   ErrNotWiped,
		text:   "install: wipe-disk did not wipe /dev/sdb in this boot; nothing installed; set desired_action to provision",
	}, {
		name: "wipe did not finish", bootID: testBootID, disk: "/dev/sda",
		record: func() *WipeRecord { r := wiped("/dev/sda"); r.Wiped = false; return &r }(),
		want:   ErrNotWiped,
		text:   "install: wipe-disk did not wipe /dev/sda in this boot; nothing installed; set desired_action to provision",
	}, {
		name: "unreadable record", bootID: testBootID, disk: "/dev/sda", raw: "{not json",
		want: ErrNotWiped,
		text: "install: wipe-disk did not wipe /dev/sda in this boot; nothing installed; set desired_action to provision",
	}, {
		name: "no disk declared", bootID: testBootID, record: ptr(wiped("")),
		want: ErrNoInstallDisk,
		text: "install: no install disk is declared; nothing installed: wipe: no install disk is declared",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.record != nil {
				writeWipeRecord(t, dir, *tt.record)
			}
			if tt.raw != "" {
				os.WriteFile(filepath.Join(dir, WipeRecordFile), []byte(tt.raw), 0o600)
			}
			inst := &scriptedInstaller{}
			_, err := Install(t.Context(), Target{Disk: tt.disk}, tt.bootID, inst, &Config{StateDir: dir})
			if !errors.Is(err, tt.want) {
				t.Errorf("Install = %v, want %v", err, tt.want)
			}
			if err == nil || err.Error() != tt.text {
				t.Errorf("Install error:\n got %v\nwant %s", err, tt.text)
			}
			if len(inst.disks) != 0 {
				t.Errorf("the installer ran on %q", inst.disks)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestInstallerFails(t *testing.T) {
	dir := t.TempDir()
	writeWipeRecord(t, dir, wiped("/dev/sda"))
	var out []string
	for i := range 30 {
		out = append(out, fmt.Sprintf("2026/12/01 09:30:%02d step %d", i, i))
	}
	out = append(out,
		"",
		"   ",
		"2026/12/01 09:31:00 fetching https://fleet.example/config?code="+testCode+"\r",
		"2026/12/01 09:31:01.123456 failed to perform disk operations: disk /dev/sda is not empty, skipping install",
	)
	inst := &scriptedInstaller{stdout: out, err: errors.New("exit status 1 (talos.config=https://fleet.example/config?code=" + testCode + ")")}
	_, err := Install(t.Context(), Target{Disk: "/dev/sda", Code: testCode}, testBootID, inst, &Config{StateDir: dir, InstallerLines: 4})
	var ie *InstallerError
	if !errors.As(err, &ie) || !errors.Is(err, ErrInstallerFailed) || !errors.Is(err, inst.err) {
		t.Fatalf("Install = %v, want an *InstallerError", err)
	}
	want := strings.Join([]string{
		"install: step 28",
		"install: step 29",
		"install: fetching https://fleet.example/config?code=<install code>",
		"install: failed to perform disk operations: disk /dev/sda is not empty, skipping install",
		"install: the installer failed; the lines above are its last output",
	}, "\n")
	if err.Error() != want {
		t.Errorf("Install error:\n%s\nwant:\n%s", err, want)
	}
}

func TestInstallerFailsSilently(t *testing.T) {
	dir := t.TempDir()
	writeWipeRecord(t, dir, wiped("/dev/sda"))
	inst := &scriptedInstaller{err: errors.New("docker: image not found, code " + testCode)}
	_, err := Install(t.Context(), Target{Disk: "/dev/sda", Code: testCode}, testBootID, inst, &Config{StateDir: dir})
	want := "install: docker: image not found, code <install code>\ninstall: the installer failed; the lines above are its last output"
	if err == nil || err.Error() != want {
		t.Errorf("Install error:\n%v\nwant:\n%s", err, want)
	}
}

func TestInstallConcurrentOutput(t *testing.T) {
	dir := t.TempDir()
	writeWipeRecord(t, dir, wiped("/dev/sda"))
	var a, b []string
	for i := range 500 {
		a = append(a, fmt.Sprintf("out %d", i))
		b = append(b, fmt.Sprintf("err %d", i))
	}
	inst := &scriptedInstaller{stdout: a, stderr: b, err: errors.New("exit status 1")}
	_, err := Install(t.Context(), Target{Disk: "/dev/sda"}, testBootID, inst, &Config{StateDir: dir})
	var ie *InstallerError
	if !errors.As(err, &ie) || len(ie.Lines) != DefaultInstallerLines {
		t.Fatalf("Install = %v; want %d lines", err, DefaultInstallerLines)
	}
}

// lateInstaller keeps printing after it returned, as a leaked reader of a
// killed installer's pipe might.
type lateInstaller struct{ late chan func(string) }

func (l *lateInstaller) Install(ctx context.Context, disk string, output func(string)) error {
	output("before")
	l.late <- output
	return errors.New("exit status 1")
}

func TestInstallIgnoresLateOutput(t *testing.T) {
	dir := t.TempDir()
	writeWipeRecord(t, dir, wiped("/dev/sda"))
	inst := &lateInstaller{late: make(chan func(string), 1)}
	_, err := Install(t.Context(), Target{Disk: "/dev/sda"}, testBootID, inst, &Config{StateDir: dir})
	output := <-inst.late
	var wg sync.WaitGroup
	wg.Go(func() { output("after") })
	wg.Wait()
	var ie *InstallerError
	if !errors.As(err, &ie) || !cmp.Equal(ie.Lines, []string{"before"}) {
		t.Fatalf("Install = %v", err)
	}
}
