package main

import (
	"io"
	"log"
	"os"
	"path/filepath"
	"testing"
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
