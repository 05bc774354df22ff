package testenv

import (
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/syncbuf"
	"github.com/fleetkit/fleet/internal/testproc"
)

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
