package main

import (
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/siderolabs/talos/pkg/machinery/meta"
)

// On a disk that is not empty the stand-in fails in Talos's installer's
// words, which the runbook quotes after "install: "; a STANDIN_WRITE_TIME
// that is no duration is refused before the disk is touched.
func TestRunRefusals(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(disk, make([]byte, 64<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	lg := log.New(io.Discard, "", 0)
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	args := []string{"install", "--disk", disk, "--platform", "metal"}

	env[writeTimeEnv] = "soon"
	if err := run(args, getenv, lg); err == nil || err.Error() != `STANDIN_WRITE_TIME="soon" is not a duration` {
		t.Errorf("run with a bad write time = %v", err)
	}
	env[writeTimeEnv] = "1ms"
	if err := run(args, getenv, lg); err != nil {
		t.Fatalf("the first install: %v", err)
	}
	want := "failed to perform disk operations: disk " + disk + ` is not empty, skipping install, detected "gpt"`
	if err := run(args, getenv, lg); err == nil || err.Error() != want {
		t.Errorf("the second install = %v, want %q", err, want)
	}
}

// parseCommand reads fleet's install action's arguments as Talos's
// installer does, and refuses anything else.
func TestParseCommand(t *testing.T) {
	values := meta.Values{{Key: meta.DownloadURLCode, Value: "https://fleetd.test/config?code=c0de"}}
	env := map[string]string{"INSTALLER_META_BASE64": values.Encode(false)}
	getenv := func(k string) string { return env[k] }
	c, err := parseCommand([]string{"install", "--disk", "/dev/nvme0n1", "--platform", "metal"}, getenv)
	if err != nil || c.Disk != "/dev/nvme0n1" || len(c.Values) != 1 || c.Values[0].Value != "https://fleetd.test/config?code=c0de" {
		t.Fatalf("parseCommand: %+v, %v", c, err)
	}
	for _, args := range [][]string{
		nil,
		{"upgrade", "--disk", "/dev/sda", "--platform", "metal"},
		{"install", "--platform", "metal"},
		{"install", "--disk", "/dev/sda", "--platform", "aws"},
		{"install", "--disk"},
	} {
		if _, err := parseCommand(args, getenv); err == nil || !strings.HasPrefix(err.Error(), "usage: installer install --disk DISK --platform metal") {
			t.Errorf("parseCommand(%q): %v, want the usage", args, err)
		}
	}
	bad := func(string) string { return "not base64!" }
	if _, err := parseCommand([]string{"install", "--disk", "/dev/sda", "--platform", "metal"}, bad); err == nil || !strings.HasPrefix(err.Error(), "decoding META values: ") {
		t.Errorf("parseCommand with bad META values: %v", err)
	}
}

// installError words a refusal as Talos's installer does (that of a disk
// not empty: TestRunRefusals).
func TestInstallError(t *testing.T) {
	c := command{Disk: "/dev/sda"}
	if err := c.installError(nil); err != nil {
		t.Errorf("installError(nil) = %v", err)
	}
	if err := c.installError(io.ErrShortWrite); err == nil || err.Error() != "failed to perform disk operations on /dev/sda: short write" {
		t.Errorf("installError of a write: %v", err)
	}
}
