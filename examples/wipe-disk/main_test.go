package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/disksafe"
)

const secret = "ic-Zx81qPw0vN3mTs6Y"

// env is an action environment with an attested boot recorded in a
// temporary directory, and a pull command that records that it ran.
type env struct {
	vars    map[string]string
	pullLog string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the action reads Linux's boot_id and sysfs")
	}
	dir := t.TempDir()
	id, err := disksafe.BootID(nil)
	if err != nil {
		t.Fatal(err)
	}
	bootDir := filepath.Join(dir, "fleet")
	if err := disksafe.WriteBootRecord(bootDir, disksafe.BootRecord{BootID: id, Attested: true, Code: secret}); err != nil {
		t.Fatal(err)
	}
	pullLog := filepath.Join(dir, "pulls")
	script := filepath.Join(dir, "pull")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\" >> "+pullLog+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &env{
		vars: map[string]string{
			"INSTALL_CODE":    secret,
			"INSTALLER_IMAGE": "ghcr.io/siderolabs/installer:v1.13.9",
			"PULL_COMMAND":    script,
			"FLEET_BOOT_DIR":  bootDir,
			"FLEET_STATE_DIR": filepath.Join(dir, "workflow"),
		},
		pullLog: pullLog,
	}
}

func (e *env) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, func(k string) string { return e.vars[k] }, &out, &errb)
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

func TestRefusals(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		var args []string
		if dryRun {
			args = []string{"-dry-run"}
		}
		tests := []struct {
			name string
			set  map[string]string
			want string
		}{
			{"no serial", map[string]string{"INSTALL_DISK": "/dev/sda"}, "wipe: no install disk serial is declared\n"},
			{"no disk", map[string]string{"INSTALL_DISK_SERIAL": "S1"}, "wipe: no install disk is declared\n"},
			{"no disk reports the serial", map[string]string{"INSTALL_DISK": "/dev/sda", "INSTALL_DISK_SERIAL": "FLEET-NO-SUCH-SERIAL"},
				"wipe: no disk reports the serial FLEET-NO-SUCH-SERIAL\n"},
			{"another install code", map[string]string{"INSTALL_DISK": "/dev/sda", "INSTALL_DISK_SERIAL": "S1", "INSTALL_CODE": "ic-other"},
				"wipe: the Workflow's install code is not the one this boot received\n"},
			{"no boot record", map[string]string{"INSTALL_DISK": "/dev/sda", "INSTALL_DISK_SERIAL": "S1", "FLEET_BOOT_DIR": "/nonexistent/fleet"},
				"wipe: this boot did not pass attestation\n  (the HookOS agent recorded no attestation in this boot)\n"},
		}
		for _, tt := range tests {
			t.Run(strings.Join(append(args, tt.name), " "), func(t *testing.T) {
				e := newEnv(t)
				for k, v := range tt.set {
					e.vars[k] = v
				}
				code, stdout, stderr := e.run(t, args...)
				if code != 1 {
					t.Errorf("exit code %d, want 1", code)
				}
				if !strings.HasSuffix(stderr, tt.want) {
					t.Errorf("stderr = %q, want it to end with %q", stderr, tt.want)
				}
				if dryRun && !strings.HasSuffix(stdout, "wipe: dry run: nothing wiped\n") {
					t.Errorf("stdout = %q", stdout)
				}
				if p := e.pulled(t); p != "" {
					t.Errorf("a refused run pulled %q", p)
				}
			})
		}
	}
}

func TestMalformedBootRecord(t *testing.T) {
	e := newEnv(t)
	os.WriteFile(filepath.Join(e.vars["FLEET_BOOT_DIR"], disksafe.BootRecordFile), []byte(`{"boot_id": "x", "install_code": "`+secret+`", "attested": tr`), 0o600)
	e.vars["INSTALL_DISK"], e.vars["INSTALL_DISK_SERIAL"] = "/dev/sda", "S1"
	code, _, stderr := e.run(t, "-dry-run")
	if code != 1 || !strings.Contains(stderr, "is not a valid record") || !strings.Contains(stderr, "wipe: this boot did not pass attestation\n") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestDryRunWouldWipe judges one of this machine's own disks: the dry run
// reads sysfs and writes nothing.
func TestDryRunWouldWipe(t *testing.T) {
	e := newEnv(t)
	disks, err := disksafe.List(nil)
	if err != nil {
		t.Fatal(err)
	}
	var d *disksafe.Disk
	for i := range disks {
		if disks[i].Serial != "" && !disks[i].Removable && !disks[i].USB && !disks[i].ReadOnly {
			d = &disks[i]
			break
		}
	}
	if d == nil {
		t.Skip("this machine has no fixed disk that reports a serial")
	}
	e.vars["INSTALL_DISK"], e.vars["INSTALL_DISK_SERIAL"] = "/dev/"+d.Name, d.Serial
	code, stdout, stderr := e.run(t, "-dry-run")
	want := "wipe: /dev/" + d.Name + " reports the serial " + d.Serial + "\nwipe: dry run: nothing wiped\n"
	if code != 0 || !strings.HasSuffix(stdout, want) {
		t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant stdout ending %q", code, stdout, stderr, want)
	}
	if !strings.Contains(stdout, "install disk /dev/"+d.Name+" resolves to "+d.Name+"\n") {
		t.Errorf("stdout lacks the resolution: %q", stdout)
	}
	if p := e.pulled(t); p != "" {
		t.Errorf("a dry run pulled %q", p)
	}
	if _, err := os.Stat(e.vars["FLEET_STATE_DIR"]); !os.IsNotExist(err) {
		t.Errorf("a dry run wrote the state directory: %v", err)
	}
}

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"extra"}, func(string) string { return "" }, &out, &errb); code != 2 {
		t.Errorf("an extra argument: exit %d, want 2", code)
	}
	if code := run(t.Context(), []string{"-force"}, func(string) string { return "" }, &out, &errb); code != 2 {
		t.Errorf("an unknown flag: exit %d, want 2", code)
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
