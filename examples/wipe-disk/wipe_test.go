package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/disksafe/disksafetest"
)

const testImage = "ghcr.io/siderolabs/installer:v1.13.9"

// recordingPuller records its pulls and can fail or change the machine.
type recordingPuller struct {
	pulls  []string
	err    error
	during func()
}

func (p *recordingPuller) Pull(ctx context.Context, image string) error {
	p.pulls = append(p.pulls, image)
	if p.during != nil {
		p.during()
	}
	return p.err
}

// TestWipeWipesNothing runs wipe of /dev/sda as S4EWNX0R612345A on
// fakeMachine, in an attested boot, with a device directory that holds a
// regular file as sda, so nothing can be wiped for real, where it must wipe
// nothing: an image that cannot be pulled is the runbook's line, and a
// machine that changes while the image is pulled is judged again, and
// refused (which refusal is TestCheck's, in disksafe). Each time sda's device
// file keeps its content, and nothing writes the state directory. That a
// refusal pulls nothing is TestRunbookLines'.
func TestWipeWipesNothing(t *testing.T) {
	manifest := errors.New("Error response from daemon: manifest for ghcr.io/siderolabs/installer:v1.13.9 not found: manifest unknown\n")
	boot := disksafe.Boot{ID: disksafetest.BootID, Record: &disksafe.BootRecord{BootID: disksafetest.BootID, Attested: true, Code: secret}}
	precious := bytes.Repeat([]byte("precious "), 4096)
	for _, tt := range []struct {
		name   string
		p      *recordingPuller        // nil: no puller is configured
		during func(root fstest.MapFS) // changes the machine while the image is pulled
		want   []error                 // what errors.Is finds
		text   string
		pulls  []string
	}{
		{name: "the pull fails", p: &recordingPuller{err: manifest}, want: []error{errPull, manifest},
			text:  "wipe: the installer image ghcr.io/siderolabs/installer:v1.13.9 cannot be pulled (Error response from daemon: manifest for ghcr.io/siderolabs/installer:v1.13.9 not found: manifest unknown); nothing wiped",
			pulls: []string{testImage}},
		{name: "no puller", want: []error{errPull},
			text: "wipe: the installer image ghcr.io/siderolabs/installer:v1.13.9 cannot be pulled (no puller is configured); nothing wiped"},
		{name: "another disk now reports the serial", p: &recordingPuller{}, during: func(root fstest.MapFS) {
			root["run/udev/data/b8:16"] = &fstest.MapFile{Data: []byte("E:ID_BUS=usb\nE:ID_SERIAL_SHORT=S4EWNX0R612345A\n")}
		}, want: []error{disksafe.ErrSerialAmbiguous}, text: "wipe: more than one disk reports the serial S4EWNX0R612345A", pulls: []string{testImage}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeMachine()
			cfg := &disksafe.Config{Root: root, DevDir: t.TempDir(), StateDir: filepath.Join(t.TempDir(), "workflow")}
			file := filepath.Join(cfg.DevDir, "sda")
			if err := os.WriteFile(file, precious, 0o600); err != nil {
				t.Fatal(err)
			}
			var p puller
			if tt.p != nil {
				if tt.during != nil {
					tt.p.during = func() { tt.during(root) }
				}
				p = tt.p
			}
			_, err := wipe(t.Context(), disksafe.Target{Disk: "/dev/sda", Serial: "S4EWNX0R612345A"}, testImage, boot, p, cfg)
			if err == nil || err.Error() != tt.text {
				t.Fatalf("wipe = %v\nwant %s", err, tt.text)
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("errors.Is(%v, %v) = false", err, w)
				}
			}
			if tt.p != nil && !slices.Equal(tt.p.pulls, tt.pulls) {
				t.Errorf("pulls = %q, want %q", tt.p.pulls, tt.pulls)
			}
			if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, precious) {
				t.Errorf("the device file changed (%v)", err)
			}
			if _, err := os.Stat(cfg.StateDir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the state directory was written: %v", err)
			}
		})
	}
}

// TestRunbookLines runs the action on the fake machine, asked to wipe
// /dev/sda as S4EWNX0R612345A unless set says otherwise: as a dry run, and
// also as a run where it refuses (the pull happens on a run alone). A dry
// run reads the machine's sysfs, udev database and /dev links, prints them
// and its verdict last; a refusal is the runbook's line word for word on
// stderr (and, below it, what lies under it where that helps), with exit 1.
// No run pulls, writes the state directory or names the digest.
// FLEET_LOOP_DEVICES=true makes a file-backed loop device a disk it judges;
// without it, a loop device is never listed, so never wiped. The refusals
// are those that rest on what the action reads (its environment, boot
// record and puller), and a few of the judgement's that stand for its
// others, whose verdicts and lines are disksafe's TestCheck and
// TestRefusalTexts.
func TestRunbookLines(t *testing.T) {
	const (
		byID        = "/dev/disk/by-id/ata-Samsung_SSD_870_EVO_1TB_S4EWNX0R612345A"
		sda         = "sda        8:0          1.0 TB  S4EWNX0R612345A          ata       \n"
		sdb         = "sdb        8:16        30.9 GB  4C530001230815117283     usb       removable,usb\n"
		notAttested = "wipe: this boot did not pass attestation\n"
	)
	// loop3 asks for loop3 with FLEET_LOOP_DEVICES set to v.
	loop3 := func(v string) map[string]string {
		return map[string]string{"INSTALL_DISK": "/dev/loop3", "INSTALL_DISK_SERIAL": "LOOP-0001", "FLEET_LOOP_DEVICES": v}
	}
	for _, tt := range []struct {
		name   string
		set    map[string]string // more of the environment
		boot   *disksafe.BootRecord
		record string // the boot record's file, when set
		exit   int
		stdout string   // what a dry run's stdout ends with; "" when it refuses: its last line
		lines  []string // lines a dry run's stdout holds
		stderr string   // {boot dir}: FLEET_BOOT_DIR
	}{
		{name: "/dev/sda", stdout: "wipe: /dev/sda reports the serial S4EWNX0R612345A\nwipe: dry run: nothing wiped\n",
			lines: []string{sda, sdb, "install disk /dev/sda resolves to sda\n"}},
		{name: byID, set: map[string]string{"INSTALL_DISK": byID}, stdout: "wipe: " + byID + " reports the serial S4EWNX0R612345A\nwipe: dry run: nothing wiped\n",
			lines: []string{sda, sdb, "install disk " + byID + " resolves to sda\n"}},
		{name: "FLEET_LOOP_DEVICES=true", set: loop3("true"), stdout: "wipe: /dev/loop3 reports the serial LOOP-0001\nwipe: dry run: nothing wiped\n"},
		{name: "FLEET_LOOP_DEVICES=yes please", set: loop3("yes please"), exit: 2,
			stderr: "wipe-disk: FLEET_LOOP_DEVICES=\"yes please\" is not true or false; nothing wiped\n"},

		{name: "no disk reports the serial", set: map[string]string{"INSTALL_DISK_SERIAL": "S9"}, exit: 1, stderr: "wipe: no disk reports the serial S9\n"},
		{name: "a disk that is missing", set: map[string]string{"INSTALL_DISK": "/dev/nvme0n1"}, exit: 1,
			lines:  []string{sda, sdb, "install disk /dev/nvme0n1 resolves to no block device\n"},
			stderr: "wipe: /dev/nvme0n1 is missing, but the disk that reports S4EWNX0R612345A is sda\n"},
		{name: "FLEET_LOOP_DEVICES=", set: loop3(""), exit: 1, stderr: "wipe: no disk reports the serial LOOP-0001\n"},
		{name: "FLEET_LOOP_DEVICES=false", set: loop3("false"), exit: 1, stderr: "wipe: no disk reports the serial LOOP-0001\n"},
		{name: "not attested", boot: &disksafe.BootRecord{BootID: disksafetest.BootID}, exit: 1,
			stderr: notAttested + "  (the attestation record says this boot did not pass)\n"},
		{name: "a record of another boot", boot: &disksafe.BootRecord{BootID: "11111111-2222-3333-4444-555555555555", Attested: true, Code: secret}, exit: 1,
			stderr: notAttested + "  (the attestation record is of another boot)\n"},
		{name: "no boot record", set: map[string]string{"FLEET_BOOT_DIR": "/nonexistent/fleet"}, exit: 1,
			stderr: notAttested + "  (the HookOS agent recorded no attestation in this boot)\n"},
		{name: "a malformed boot record", record: `{"boot_id": "x", "install_code": "` + secret + `", "attested": tr`, exit: 1,
			stderr: "wipe-disk: disksafe: {boot dir}/" + disksafe.BootRecordFile + " is not a valid record (unexpected EOF)\n" +
				notAttested + "  (the HookOS agent recorded no attestation in this boot)\n"},
		{name: "another code's digest", set: map[string]string{"INSTALL_CODE_SHA256": disksafe.CodeSHA256("ic-someone-elses")}, exit: 1,
			stderr: "wipe: the Workflow's install code is not the one this boot received\n"},
		{name: "the image cannot be pulled", set: map[string]string{"PULL_COMMAND": "/nonexistent/pull"}, exit: 1,
			stderr: "wipe: the installer image ghcr.io/siderolabs/installer:v1.13.9 cannot be pulled (/nonexistent/pull: fork/exec /nonexistent/pull: no such file or directory); nothing wiped\n"},
	} {
		for _, dry := range []bool{true, false} {
			if (dry && tt.set["PULL_COMMAND"] != "") || (!dry && tt.exit != 1) {
				continue
			}
			name, args, stdout := tt.name+" -dry-run", []string{"-dry-run"}, tt.stdout
			switch {
			case !dry:
				name, args, stdout = tt.name, nil, ""
			case tt.exit == 1:
				stdout = "wipe: dry run: nothing wiped\n"
			}
			t.Run(name, func(t *testing.T) {
				e := makeEnv(t, disksafetest.BootID, fakeMachine())
				e.vars["INSTALL_DISK"], e.vars["INSTALL_DISK_SERIAL"] = "/dev/sda", "S4EWNX0R612345A"
				if tt.boot != nil {
					if err := disksafe.WriteBootRecord(e.vars["FLEET_BOOT_DIR"], *tt.boot); err != nil {
						t.Fatal(err)
					}
					e.vars["INSTALL_CODE_SHA256"] = ""
				}
				if tt.record != "" {
					if err := os.WriteFile(filepath.Join(e.vars["FLEET_BOOT_DIR"], disksafe.BootRecordFile), []byte(tt.record), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				maps.Copy(e.vars, tt.set)
				code, out, stderr := e.run(t, args...)
				want := strings.ReplaceAll(tt.stderr, "{boot dir}", e.vars["FLEET_BOOT_DIR"])
				if code != tt.exit || stderr != want || !strings.HasSuffix(out, stdout) || (stdout == "" && out != "") {
					t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant exit %d, stdout ending %q, stderr %q", code, out, stderr, tt.exit, stdout, want)
				}
				for _, line := range tt.lines {
					if dry && !strings.Contains(out, line) {
						t.Errorf("stdout lacks %q:\n%s", line, out)
					}
				}
				if sum := e.vars["INSTALL_CODE_SHA256"]; sum != "" && strings.Contains(stderr, sum) {
					t.Errorf("stderr names the digest: %q", stderr)
				}
				if p := e.pulled(t); p != "" {
					t.Errorf("the run pulled %q", p)
				}
				if _, err := os.Stat(e.vars["FLEET_STATE_DIR"]); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the run wrote the state directory: %v", err)
				}
			})
		}
	}
}
