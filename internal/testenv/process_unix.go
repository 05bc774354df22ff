//go:build unix

package testenv

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// StopAtCleanup stops cmd, which the test started, when t ends: SIGTERM,
// then SIGKILL after 5 s (an error: it should have stopped). When t failed
// it logs output, the process's output so far, if not nil.
func StopAtCleanup(t testing.TB, name string, cmd *exec.Cmd, output fmt.Stringer) {
	pid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-done
			t.Errorf("%s (PID %d) did not stop on SIGTERM; killed", name, pid)
		}
		if t.Failed() && output != nil {
			t.Logf("%s (PID %d) output:\n%s", name, pid, output.String())
		}
	})
}
