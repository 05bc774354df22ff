package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// StartLLDPD starts lldpd with the command line enter (a program that
// enters the switch's network namespace, its arguments, and lldpd),
// sending every second on each interface of ifs, configured further by
// conf (lldpcli's commands, one a line), until t ends. Only the process
// the test started is stopped.
func StartLLDPD(t testing.TB, enter, ifs []string, conf string) {
	t.Helper()
	// lldpd runs the lldpcli that reads its configuration as its own
	// unprivileged user (_lldpd), which must reach the control socket: a
	// directory of t.TempDir's is closed to it.
	dir, err := os.MkdirTemp("", "testenv-lldpd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	confFile := filepath.Join(dir, "lldpd.conf")
	if err := os.WriteFile(confFile, []byte("configure lldp tx-interval 1\n"+conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(enter[0], append(enter[1:],
		"-d",                            // foreground
		"-u", filepath.Join(dir, "ctl"), // a control socket of its own
		"-p", filepath.Join(dir, "pid"), // not /run/lldpd.pid
		"-I", strings.Join(ifs, ","),
		"-O", confFile)...)
	Run(t, "lldpd", cmd)
}
