package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/siderolabs/talos/pkg/machinery/meta"
)

const (
	bootID      = "9a0b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	code        = "ic-Rt5uQ2mZ8xVw3bNp7kLs"
	urlTemplate = "https://fleetd.example:8443/config/{code}"
	configURL   = "https://fleetd.example:8443/config/" + code
	image       = "factory.talos.dev/metal-installer-secureboot/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.13.9"
)

// env is an install action's environment: this boot's attestation record
// with the run's code, a state directory where wipe-disk recorded its wipe
// of /dev/sda in this boot, and a fake installer script that records its
// arguments and environment.
type env struct {
	vars     map[string]string
	root     fstest.MapFS // the fake root file system the boot ID is read from
	dir      string
	argsFile string // the installer's arguments, one a line
	metaFile string // the installer's INSTALLER_META_BASE64
}

func newEnv(t *testing.T, script string) *env {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake installer is a shell script")
	}
	dir := t.TempDir()
	e := &env{
		root:     fstest.MapFS{"proc/sys/kernel/random/boot_id": &fstest.MapFile{Data: []byte(bootID + "\n")}},
		dir:      dir,
		argsFile: filepath.Join(dir, "args"),
		metaFile: filepath.Join(dir, "meta"),
	}
	installer := filepath.Join(dir, "installer")
	body := "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\" >> " + e.argsFile + "; done\n" +
		"printf '%s' \"$INSTALLER_META_BASE64\" > " + e.metaFile + "\n" + script
	if err := os.WriteFile(installer, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	e.vars = map[string]string{
		"INSTALL_DISK":        "/dev/sda",
		"INSTALL_DISK_SERIAL": "S4EWNX0R612345A",
		"INSTALL_CODE_SHA256": disksafe.CodeSHA256(code),
		"CONFIG_URL_TEMPLATE": urlTemplate,
		"INSTALLER_IMAGE":     image,
		"INSTALL_COMMAND":     installer + " {image} install --disk {disk} --platform metal --config {config_url}",
		"FLEET_BOOT_DIR":      filepath.Join(dir, "fleet"),
		"FLEET_STATE_DIR":     filepath.Join(dir, "workflow"),
	}
	e.booted(t, disksafe.BootRecord{BootID: bootID, Attested: true, Code: code, Time: time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)})
	e.wiped(t, disksafe.WipeRecord{BootID: bootID, Disk: "/dev/sda", Name: "sda", Serial: "S4EWNX0R612345A", Wiped: true})
	return e
}

// booted writes hookos-attest's record of this boot's attestation.
func (e *env) booted(t *testing.T, r disksafe.BootRecord) {
	t.Helper()
	if err := disksafe.WriteBootRecord(e.vars["FLEET_BOOT_DIR"], r); err != nil {
		t.Fatal(err)
	}
}

// wiped writes wipe-disk's record, in the form disksafe documents.
func (e *env) wiped(t *testing.T, r disksafe.WipeRecord) {
	t.Helper()
	d := e.vars["FLEET_STATE_DIR"]
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, disksafe.WipeRecordFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (e *env) run(t *testing.T, args ...string) (exit int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	exit = run(t.Context(), args, func(k string) string { return e.vars[k] }, e.root, &out, &errb)
	if strings.Contains(out.String()+errb.String(), code) {
		t.Errorf("the output shows the install code:\n%s%s", out.String(), errb.String())
	}
	return exit, out.String(), errb.String()
}

// ran returns the installer's arguments, nil when it did not run.
func (e *env) ran(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(e.argsFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// Lines as the Talos installer prints them (Go's log package, to stderr).
const installerLog = `echo "2026/12/01 09:41:02 running Talos installer v1.13.9" >&2
echo "2026/12/01 09:41:02 machine configuration missing, skipping validation" >&2
echo "2026/12/01 09:41:03 created EFI (C12A7328-F81F-11D2-BA4B-00A0C93EC93B) size 1073741824 bytes" >&2
echo "2026/12/01 09:41:03 created META (0FC63DAF-8483-4772-8E79-3D69D8477DE4) size 1048576 bytes" >&2
`

// TestInstalled runs an installer that ends well, quiet (nothing on stderr)
// and with -v (its lines logged, the code hidden): each time it runs with the
// image, the disk and the config URL, and the code in INSTALLER_META_BASE64.
func TestInstalled(t *testing.T) {
	// The script reads CONFIG_URL from its environment, as an installer
	// could print what it was given.
	t.Setenv("CONFIG_URL", configURL)
	script := installerLog + "echo \"2026/12/01 09:41:04 talos.config=$CONFIG_URL\" >&2\n" +
		"echo \"2026/12/01 09:41:09 installation of v1.13.9 complete\" >&2\n"
	for _, args := range [][]string{nil, {"-v"}} {
		e := newEnv(t, script)
		exit, stdout, stderr := e.run(t, args...)
		if exit != exitInstalled || stdout != "install: installed Talos to /dev/sda\n" || (args == nil && stderr != "") {
			t.Fatalf("%q: exit %d\nstdout %q\nstderr %q", args, exit, stdout, stderr)
		}
		for _, s := range []string{`line="running Talos installer v1.13.9"`, `line="talos.config=https://fleetd.example:8443/config/<install code>"`} {
			if args != nil && !strings.Contains(stderr, s) {
				t.Errorf("stderr lacks %q:\n%s", s, stderr)
			}
		}
		want := []string{image, "install", "--disk", "/dev/sda", "--platform", "metal", "--config", configURL}
		if got := e.ran(t); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("the installer ran with %q, want %q", got, want)
		}
		b, err := os.ReadFile(e.metaFile)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := meta.DecodeValues(string(b))
		if err != nil || len(vals) != 1 || vals[0].Key != meta.DownloadURLCode || vals[0].Value != code {
			t.Errorf("INSTALLER_META_BASE64 %q decodes to %v, %v; want key 0x%x = the install code", b, vals, err, meta.DownloadURLCode)
		}
		if raw, _ := base64.StdEncoding.DecodeString(string(b)); string(raw) != "0xb="+code {
			t.Errorf("INSTALLER_META_BASE64 holds %q", raw)
		}
	}
}

// TestRefusals changes newEnv's run (its installer's script, set, then
// edit, when not nil) into each refusal, and each failure of the installer:
// the exit code and the whole stderr ({boot dir}: FLEET_BOOT_DIR; {dir}:
// the test's directory), nothing on stdout, the installer run only when it
// has a script, and neither code in the output. A failed installer's last
// lines come with the code hidden, then the runbook's line, and never the
// command's arguments.
func TestRefusals(t *testing.T) {
	const (
		notWiped    = "install: wipe-disk did not wipe /dev/sda in this boot; nothing installed; set desired_action to provision\n"
		notAttested = "install: this boot did not pass attestation; nothing installed\n"
		noCode      = "install: this boot received no install code; nothing installed\n"
		mismatch    = "install: the Workflow's install code is not the one this boot received; nothing installed\n"
		resumed     = "install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision\n"
		failed      = "install: the installer failed; the lines above are its last output\n"
	)
	booted := func(r disksafe.BootRecord) func(*testing.T, *env) {
		return func(t *testing.T, e *env) { e.booted(t, r) }
	}
	wiped := func(r disksafe.WipeRecord) func(*testing.T, *env) {
		return func(t *testing.T, e *env) { e.wiped(t, r) }
	}
	for _, tt := range []struct {
		name   string
		script string
		set    map[string]string
		edit   func(t *testing.T, e *env)
		exit   int
		stderr string
	}{
		// The runbook's row: the agent restarted after the installer
		// started writing, and the same boot ran install again.
		{name: "the disk is not empty", exit: exitRefused,
			script: installerLog + "echo \"failed to perform disk operations: disk /dev/sda is not empty, skipping install\" >&2\nexit 1\n",
			stderr: "install: running Talos installer v1.13.9\ninstall: machine configuration missing, skipping validation\n" +
				"install: created EFI (C12A7328-F81F-11D2-BA4B-00A0C93EC93B) size 1073741824 bytes\n" +
				"install: created META (0FC63DAF-8483-4772-8E79-3D69D8477DE4) size 1048576 bytes\n" +
				"install: failed to perform disk operations: disk /dev/sda is not empty, skipping install\n" + failed},
		{name: "the installer says the code", script: "echo \"fetching $1 with " + code + "\"\nexit 3\n", exit: exitRefused,
			stderr: "install: fetching " + image + " with <install code>\n" + failed},
		{name: "a silent installer", script: "exit 7\n", exit: exitRefused, stderr: "install: {dir}/installer: exit status 7\n" + failed},
		{name: "a missing installer", exit: exitRefused, stderr: "install: {dir}/no-such-installer: no such file or directory\n" + failed,
			edit: func(t *testing.T, e *env) {
				e.vars["INSTALL_COMMAND"] = e.dir + "/no-such-installer {image} install --disk {disk}"
			}},

		// The runbook's row: the power failed during install, and the run
		// resumed at install in the next HookOS boot, whose /workflow is
		// empty.
		{name: "no wipe recorded", exit: exitRefused, stderr: resumed, edit: func(t *testing.T, e *env) {
			os.Remove(filepath.Join(e.vars["FLEET_STATE_DIR"], disksafe.WipeRecordFile))
		}},
		{name: "a wipe of another disk", exit: exitRefused, stderr: notWiped + "  (wipe-disk wiped /dev/sdb)\n",
			edit: wiped(disksafe.WipeRecord{BootID: bootID, Disk: "/dev/sdb", Name: "sdb", Wiped: true})},
		{name: "an unfinished wipe", exit: exitRefused, stderr: notWiped + "  (wipe-disk started and did not finish)\n",
			edit: wiped(disksafe.WipeRecord{BootID: bootID, Disk: "/dev/sda", Name: "sda"})},

		// The install code comes from this boot's record alone: without a
		// record of this boot that passed attestation and holds a code whose
		// SHA-256 the Workflow names, nothing is installed.
		{name: "no boot record", exit: exitRefused, stderr: notAttested + "  (the HookOS agent recorded no attestation in this boot)\n",
			edit: func(t *testing.T, e *env) {
				os.Remove(filepath.Join(e.vars["FLEET_BOOT_DIR"], disksafe.BootRecordFile))
			}},
		{name: "a boot record of another boot", exit: exitRefused, stderr: notAttested + "  (the attestation record is of another boot)\n",
			edit: booted(disksafe.BootRecord{BootID: "00000000-aaaa-bbbb-cccc-dddddddddddd", Attested: true, Code: code})},
		{name: "a boot that did not pass", exit: exitRefused, stderr: notAttested + "  (the attestation record says this boot did not pass)\n",
			edit: booted(disksafe.BootRecord{BootID: bootID, Code: code})},
		{name: "a malformed boot record", exit: exitRefused,
			stderr: "install: disksafe: {boot dir}/" + disksafe.BootRecordFile + " is not a valid record (unexpected EOF)\n" +
				notAttested + "  (the HookOS agent recorded no attestation in this boot)\n",
			edit: func(t *testing.T, e *env) {
				os.WriteFile(filepath.Join(e.vars["FLEET_BOOT_DIR"], disksafe.BootRecordFile), []byte(`{"boot_id": "`+bootID+`", "install_code": "`+code+`", "attested": tr`), 0o600)
			}},
		{name: "no code", exit: exitRefused, stderr: noCode, edit: booted(disksafe.BootRecord{BootID: bootID, Attested: true})},
		{name: "another code", exit: exitRefused, stderr: mismatch,
			edit: booted(disksafe.BootRecord{BootID: bootID, Attested: true, Code: "ic-someone-elses"})},
		{name: "another run's digest", exit: exitRefused, stderr: mismatch, set: map[string]string{"INSTALL_CODE_SHA256": disksafe.CodeSHA256("ic-someone-elses")}},
		// A run resumed in a new boot, whose attestation got no code (its
		// run was in flight), gets the runbook's line for that.
		{name: "a resumed run without a code", exit: exitRefused, stderr: resumed, edit: func(t *testing.T, e *env) {
			e.booted(t, disksafe.BootRecord{BootID: bootID, Attested: true})
			os.Remove(filepath.Join(e.vars["FLEET_STATE_DIR"], disksafe.WipeRecordFile))
		}},
		{name: "no boot ID", exit: exitRefused,
			stderr: "install: disksafe: read this boot's ID: open proc/sys/kernel/random/boot_id: file does not exist; nothing installed\n", edit: func(t *testing.T, e *env) {
				delete(e.root, "proc/sys/kernel/random/boot_id")
			}},

		// Settings.
		{name: "no disk", set: map[string]string{"INSTALL_DISK": ""}, exit: exitUsage, stderr: "install: no install disk is declared (INSTALL_DISK); nothing installed\n"},
		{name: "no image", set: map[string]string{"INSTALLER_IMAGE": ""}, exit: exitUsage, stderr: "install: no installer image is declared (INSTALLER_IMAGE); nothing installed\n"},
		{name: "no digest", set: map[string]string{"INSTALL_CODE_SHA256": ""}, exit: exitUsage,
			stderr: "install: the Workflow carries no install_code_sha256 (INSTALL_CODE_SHA256); nothing installed\n"},
		{name: "the code in place of its digest", set: map[string]string{"INSTALL_CODE_SHA256": code}, exit: exitUsage,
			stderr: "install: INSTALL_CODE_SHA256 is not 64 lowercase hex characters; nothing installed\n"},
		{name: "a digest in upper case", set: map[string]string{"INSTALL_CODE_SHA256": strings.ToUpper(disksafe.CodeSHA256(code))}, exit: exitUsage,
			stderr: "install: INSTALL_CODE_SHA256 is not 64 lowercase hex characters; nothing installed\n"},
		{name: "{config_url} without CONFIG_URL_TEMPLATE", set: map[string]string{"CONFIG_URL_TEMPLATE": ""}, exit: exitUsage,
			stderr: "install: the install command names {config_url}, and CONFIG_URL_TEMPLATE is not set; nothing installed\n"},
		{name: "a config URL template without {code}", set: map[string]string{"CONFIG_URL_TEMPLATE": "https://fleetd.example:8443/config/"}, exit: exitUsage,
			stderr: "install: CONFIG_URL_TEMPLATE has no \"{code}\"; nothing installed\n"},
		{name: "an unknown placeholder", set: map[string]string{"INSTALL_COMMAND": "docker run {image} install --disk {disk} --serial {serial}"}, exit: exitUsage,
			stderr: "install: the install command names {serial}; it may name {image}, {disk} and {config_url}; nothing installed\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.script)
			maps.Copy(e.vars, tt.set)
			if tt.edit != nil {
				tt.edit(t, e)
			}
			exit, stdout, stderr := e.run(t)
			want := strings.NewReplacer("{boot dir}", e.vars["FLEET_BOOT_DIR"], "{dir}", e.dir).Replace(tt.stderr)
			if exit != tt.exit || stdout != "" || stderr != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stderr %q", exit, stdout, stderr, tt.exit, want)
			}
			if got := e.ran(t); (got != nil) != (tt.script != "") {
				t.Errorf("the installer ran: %q", got)
			}
			if strings.Contains(stderr, "ic-someone-elses") {
				t.Errorf("stderr holds a code: %q", stderr)
			}
		})
	}
}

// TestStopped stops the installer once it has printed a line: run ends
// soon after, with that line.
func TestStopped(t *testing.T) {
	e := newEnv(t, "echo started\n: > \"$0.started\"\nsleep 30 &\nwait\n")
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan time.Time, 1)
	go func() {
		if testenv.Until(ctx, time.Minute, func() bool {
			_, err := os.Stat(filepath.Join(e.dir, "installer.started"))
			return err == nil
		}) == nil {
			stopped <- time.Now()
			cancel()
		}
	}()
	var out, errb bytes.Buffer
	exit := run(ctx, nil, func(k string) string { return e.vars[k] }, e.root, &out, &errb)
	if exit != exitRefused || !strings.Contains(errb.String(), "install: started\ninstall: the installer failed;") {
		t.Errorf("exit %d, stderr %q", exit, errb.String())
	}
	select {
	case at := <-stopped:
		if d := time.Since(at); d > 10*time.Second {
			t.Errorf("stopping took %v", d)
		}
	default:
		t.Error("the installer ran to its end, never stopped")
	}
}

func TestDefaultCommand(t *testing.T) {
	c, err := newCommandInstaller("", "ghcr.io/siderolabs/installer:v1.13.9", "")
	if err != nil {
		t.Fatal(err)
	}
	c.setCode(code)
	// Run it with a program that prints its arguments in place of docker.
	c.words[0] = "echo"
	var got []string
	if err := c.Install(t.Context(), "/dev/disk/by-id/nvme-Samsung_SSD_980_1TB_S64DNX0R123456", func(l string) { got = append(got, l) }); err != nil {
		t.Fatal(err)
	}
	want := "run --rm --pull never --privileged --network host --pid host --volume /dev:/dev --env INSTALLER_META_BASE64 " +
		"--entrypoint /bin/installer ghcr.io/siderolabs/installer:v1.13.9 install " +
		"--disk /dev/disk/by-id/nvme-Samsung_SSD_980_1TB_S64DNX0R123456 --platform metal\n"
	if strings.Join(got, "") != want {
		t.Errorf("the default command is\n%q\nwant\n%q", strings.Join(got, ""), want)
	}

	// A value is one word, whatever it holds.
	c, err = newCommandInstaller("printf %s| {image}", "a b {disk}", "")
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := c.Install(t.Context(), "/dev/sda", func(l string) { got = append(got, l) }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "") != "a b {disk}|" {
		t.Errorf("printf printed %q", got)
	}
}

func TestUsage(t *testing.T) {
	e := newEnv(t, "")
	for _, args := range [][]string{{"now"}, {"-force"}} {
		if exit, _, _ := e.run(t, args...); exit != exitUsage || e.ran(t) != nil {
			t.Errorf("%q: exit %d", args, exit)
		}
	}
	var out, errb bytes.Buffer
	if exit := run(t.Context(), []string{"-help"}, func(string) string { return "" }, nil, &out, &errb); exit != 0 {
		t.Errorf("-help exits %d", exit)
	}
	for _, s := range []string{"INSTALL_DISK ", "INSTALL_DISK_SERIAL", "INSTALL_CODE_SHA256", "CONFIG_URL_TEMPLATE", "INSTALLER_IMAGE", "INSTALL_COMMAND",
		"FLEET_BOOT_DIR", "FLEET_STATE_DIR", defaultCommand, "META key 0xb", "-v"} {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("-help does not say %q:\n%s", s, errb.String())
		}
	}
}
