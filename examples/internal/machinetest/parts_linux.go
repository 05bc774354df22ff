package machinetest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/internal/syncbuf"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/testproc"
)

// StartLLDPD starts lldpd with the command line enter (a program that
// enters the switch's network namespace, its arguments, and lldpd),
// sending every second on each interface of ports, which it names by a
// locally assigned port ID "Port N", as UniFi switches do, until t ends.
// Only the process the test started is stopped.
func StartLLDPD(t *testing.T, enter []string, ports map[string]int) {
	t.Helper()
	// lldpd runs the lldpcli that reads its configuration as its own
	// unprivileged user (_lldpd), which must reach the control socket: a
	// directory of t.TempDir's is closed to it.
	dir, err := os.MkdirTemp("", "machinetest-lldpd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("configure lldp tx-interval 1\nconfigure system hostname %s\n", SwitchName)
	ifs := slices.Sorted(maps.Keys(ports))
	for _, i := range ifs {
		name := fmt.Sprintf("Port %d", ports[i])
		conf += fmt.Sprintf("configure ports %s lldp portidsubtype local %q description %q\n", i, name, name)
	}
	confFile := filepath.Join(dir, "lldpd.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(enter[0], append(enter[1:],
		"-d", "-u", filepath.Join(dir, "ctl"), "-p", filepath.Join(dir, "pid"), "-I", strings.Join(ifs, ","), "-O", confFile)...)
	Run(t, "lldpd", cmd)
}

// Run starts cmd, its output in out, and returns stop, which stops it
// with SIGTERM (and SIGKILL, failing t, when it does not stop within 5 s)
// unless it ended on its own first, and logs its output when t failed.
// stop runs once, at the latest when t ends. Only the process the test
// started is signalled.
func Run(t testing.TB, name string, cmd *exec.Cmd) (stop func(), out *syncbuf.Buffer) {
	t.Helper()
	out = &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	p, err := testproc.Start(name, cmd, out.String)
	if err != nil {
		t.Fatal(err)
	}
	stop = sync.OnceFunc(func() {
		if err := p.Stop(5 * time.Second); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, out.String())
		}
	})
	t.Cleanup(stop)
	return stop, out
}

// ServeTPM serves the swtpm TPM state on the unix socket sock, and returns
// once it listens. It stops at stop, or when t ends.
func ServeTPM(t testing.TB, swtpm, state, sock string) (stop func()) {
	t.Helper()
	return Swtpm(t, swtpm, state, sock, "--server", "type=unixio,path="+sock, "--flags", "not-need-init,startup-clear")
}

// Swtpm runs swtpm socket on the TPM state with args, and returns once it
// listens on the unix socket sock (without a probe dial, which would end a
// swtpm run with --terminate). It stops at stop, or when t ends.
func Swtpm(t testing.TB, swtpm, state, sock string, args ...string) (stop func()) {
	t.Helper()
	stop, out := Run(t, "swtpm", exec.Command(swtpm, append([]string{"socket", "--tpm2", "--tpmstate", "dir=" + state}, args...)...))
	if err := testenv.Until(t.Context(), 10*time.Second, func() bool {
		return testenv.UnixListening(sock)
	}); err != nil {
		t.Fatalf("swtpm does not listen on %s: %s", sock, out.String())
	}
	return stop
}

// EKs reads the EK hashes of the TPM served at sock, as the receiving scan
// the runbook asks for would.
func EKs(t testing.TB, sock string) attest.Binding {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	dev := attest.OpenChannel(conn)
	defer dev.Close()
	b, err := attesttest.Approve(dev)
	if err != nil {
		t.Fatalf("read swtpm's EKs: %v", err)
	}
	return b
}

// Digest returns the SHA-256 of the whole of the file p.
func Digest(t testing.TB, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
