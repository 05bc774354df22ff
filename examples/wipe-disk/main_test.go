package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/disksafe/disksafetest"
)

const secret = "ic-Zx81qPw0vN3mTs6Y"

// env is an action environment with an attested boot recorded in a
// temporary directory, and a pull command that records that it ran.
type env struct {
	vars    map[string]string
	pullLog string // what the pull command ran
	root    fs.FS  // nil: the machine's own
}

// makeEnv is an env over root, with an attested boot of bootID recorded.
func makeEnv(t *testing.T, bootID string, root fs.FS) *env {
	t.Helper()
	dir := t.TempDir()
	bootDir := filepath.Join(dir, "fleet")
	if err := disksafe.WriteBootRecord(bootDir, disksafe.BootRecord{BootID: bootID, Attested: true, Code: secret}); err != nil {
		t.Fatal(err)
	}
	e := &env{
		vars: map[string]string{
			"INSTALL_CODE_SHA256": disksafe.CodeSHA256(secret),
			"INSTALLER_IMAGE":     "ghcr.io/siderolabs/installer:v1.13.9",
			"PULL_COMMAND":        filepath.Join(dir, "pull"),
			"FLEET_BOOT_DIR":      bootDir,
			"FLEET_STATE_DIR":     filepath.Join(dir, "workflow"),
		},
		pullLog: filepath.Join(dir, "pulls"),
		root:    root,
	}
	if err := os.WriteFile(e.vars["PULL_COMMAND"], []byte("#!/bin/sh\necho \"$@\" >> "+e.pullLog+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, func(k string) string { return e.vars[k] }, e.root, &out, &errb)
	if strings.Contains(out.String()+errb.String(), secret) {
		t.Errorf("the output shows the install code:\n%s%s", out.String(), errb.String())
	}
	return code, out.String(), errb.String()
}

func (e *env) pulled(t *testing.T) string {
	b, err := os.ReadFile(e.pullLog)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestThisMachine runs the action on this machine's own sysfs, udev
// database and boot ID (root nil): it refuses a serial no disk reports,
// and pulls nothing.
func TestThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the action reads Linux's boot_id and sysfs")
	}
	id, err := disksafe.BootID(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := makeEnv(t, id, nil)
	e.vars["INSTALL_DISK"], e.vars["INSTALL_DISK_SERIAL"] = "/dev/sda", "FLEET-NO-SUCH-SERIAL"
	for _, args := range [][]string{nil, {"-dry-run"}} {
		code, stdout, stderr := e.run(t, args...)
		if code != 1 || !strings.HasSuffix(stderr, "wipe: no disk reports the serial FLEET-NO-SUCH-SERIAL\n") || e.pulled(t) != "" {
			t.Errorf("%q: exit %d\nstdout %q\nstderr %q\npulled %q", args, code, stdout, stderr, e.pulled(t))
		}
	}
}

// fakeMachine is a root file system as sysfs, udev and devtmpfs show a
// machine with a SATA SSD (serial in VPD page 0x80 and udev, reached
// through a /dev/disk/by-id link), a USB stick, and a file-backed loop
// device, loop3, that reports the serial LOOP-0001 in udev.
func fakeMachine() fstest.MapFS {
	return disksafetest.NewTree().
		Add(disksafetest.SATADisk("sda", "8:0", "S4EWNX0R612345A")).
		Add(disksafetest.USBStick("sdb", "8:16", "4C530001230815117283")).
		Add(disksafetest.LoopDisk("loop3", "7:3", "LOOP-0001")).
		Link("dev/disk/by-id/ata-Samsung_SSD_870_EVO_1TB_S4EWNX0R612345A", "../../sda").FS
}

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{{"extra"}, {"-force"}} { // an extra argument, an unknown flag
		if code := run(t.Context(), args, func(string) string { return "" }, nil, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

func TestCommandPuller(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses sh")
	}
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755)
		return p
	}
	ok := newCommandPuller(script("ok", "test \"$1\" = pull && test \"$2\" = img:v1\n") + " pull")
	if err := ok.Pull(t.Context(), "img:v1"); err != nil {
		t.Errorf("Pull = %v", err)
	}
	fail := newCommandPuller(script("fail", "echo 'Pulling img:v1'\necho 'Error response from daemon: manifest unknown' >&2\nexit 1\n"))
	if err := fail.Pull(t.Context(), "img:v1"); err == nil || err.Error() != "Error response from daemon: manifest unknown" {
		t.Errorf("Pull = %v", err)
	}
	silent := newCommandPuller(script("silent", "exit 3\n"))
	if err := silent.Pull(t.Context(), "img:v1"); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Pull = %v", err)
	}
	missing := newCommandPuller(filepath.Join(dir, "no-such-program") + " pull")
	if err := missing.Pull(t.Context(), "img:v1"); err == nil {
		t.Error("Pull with a missing program succeeded")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := newCommandPuller(script("slow", "sleep 10\n")).Pull(ctx, "img:v1"); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("Pull after cancel = %v", err)
	}
	if got := newCommandPuller("").argv; strings.Join(got, " ") != defaultPullCommand {
		t.Errorf("default command = %q", got)
	}
}
