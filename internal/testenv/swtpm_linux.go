package testenv

import (
	"os/exec"
	"testing"
	"time"
)

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
	if err := Until(t.Context(), 10*time.Second, func() bool {
		return UnixListening(sock)
	}); err != nil {
		t.Fatalf("swtpm does not listen on %s: %s", sock, out.String())
	}
	return stop
}
