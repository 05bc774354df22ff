package dockertest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/fleetkit/fleet/internal/repotest"
)

// process is a program Start or StartAgent started.
type process struct {
	name string
	cmd  *exec.Cmd
	out  func() string // its output so far
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done is closed
}

// startProcess starts cmd, its output going to out, with an environment
// that holds no variable that would configure Docker's client, the agent,
// containerd or Tinkerbell behind the caller's back. output returns what
// it printed, for error messages.
//
// The process starts from an OS thread of its own, locked for the
// process's life: Linux ties a child's parent-death signal (SIGTERM here,
// should the test binary die without stopping it) to the thread that
// started it, and Go ends a thread whose goroutine returns locked, which
// this one does only once the process has exited.
func startProcess(name string, cmd *exec.Cmd, out io.Writer, output func() string) (*process, error) {
	cmd.Env = cleanEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	p := &process{name: name, cmd: cmd, out: output, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the process
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, cmd.Path, err)
	}
	return p, nil
}

// cleanEnv returns env without the variables that configure the programs
// started here: DOCKER_* (Docker's client in the agent), AGENT_* (the
// agent's flags), CONTAINERD_* and TINKERBELL_*.
func cleanEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "DOCKER_") || strings.HasPrefix(kv, "AGENT_") ||
			strings.HasPrefix(kv, "CONTAINERD_") || strings.HasPrefix(kv, "TINKERBELL_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// exited returns an error when p has exited, nil while it runs.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); its output ends:\n%s", p.name, p.err, repotest.Tail(p.out(), 3000))
	default:
		return nil
	}
}

// stop sends p SIGTERM and waits for it to exit; after timeout it sends
// SIGKILL, and returns an error. Only p's own process is signalled.
func (p *process) stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	pid := p.cmd.Process.Pid
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s (pid %d): %w", p.name, pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, pid, err)
	}
	<-p.done
	return fmt.Errorf("%s (pid %d) did not exit within %v of SIGTERM and was killed", p.name, pid, timeout)
}

// kill sends p SIGKILL and waits for it to exit. Only p's own process is
// signalled.
func (p *process) kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, p.cmd.Process.Pid, err)
	}
	<-p.done
	return nil
}

// fileOutput returns the output function of a process writing to path.
func fileOutput(path string) func() string {
	return func() string {
		f, err := os.Open(path)
		if err != nil {
			return "(no output: " + err.Error() + ")"
		}
		defer f.Close()
		const n = 4000
		if fi, err := f.Stat(); err == nil && fi.Size() > n {
			if _, err := f.Seek(fi.Size()-n, io.SeekStart); err != nil {
				return "(output unreadable: " + err.Error() + ")"
			}
		}
		b, _ := io.ReadAll(f)
		return string(b)
	}
}
