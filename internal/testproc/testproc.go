package testproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fleetkit/fleet/internal/repotest"
)

// A Process is a program Start started. Its methods are safe for
// concurrent use.
type Process struct {
	name   string
	cmd    *exec.Cmd
	output func() string
	done   chan struct{} // closed when it has exited
	err    error         // its exit, once done is closed
}

// ErrPortTaken is wrapped by Exited when the program's output says a port
// it was to listen on was taken: the caller may start it again on others.
var ErrPortTaken = errors.New("a port was taken")

// Start starts cmd, whose output the caller has directed; name names it in
// errors, and output returns what it printed so far (FileOutput, or a
// buffer's String).
func Start(name string, cmd *exec.Cmd, output func() string) (*Process, error) {
	cmd.SysProcAttr = procAttr()
	p := &Process{name: name, cmd: cmd, output: output, done: make(chan struct{})}
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

// StartLogged starts cmd as Start does, its output going to the file at
// logPath: created, or appended to when appendLog (a program started
// again).
func StartLogged(name string, cmd *exec.Cmd, logPath string, appendLog bool) (*Process, error) {
	flag := os.O_TRUNC
	if appendLog {
		flag = os.O_APPEND
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|flag, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer f.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = f, f
	return Start(name, cmd, FileOutput(logPath))
}

// Name is the name Start was given.
func (p *Process) Name() string { return p.name }

// Pid is p's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Tail returns the end of p's output, for error messages.
func (p *Process) Tail() string {
	return "its output ends:\n" + repotest.Tail(p.output(), 3000)
}

// Exited returns an error when p has exited, nil while it runs. The error
// wraps ErrPortTaken when p's output says so.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		out := p.Tail()
		if strings.Contains(out, "address already in use") {
			return fmt.Errorf("%s exited (%v): %w; %s", p.name, p.err, ErrPortTaken, out)
		}
		return fmt.Errorf("%s exited (%v); %s", p.name, p.err, out)
	default:
		return nil
	}
}

// ExitError returns what waiting for p returned once it exited (nil for
// an exit status of 0), and nil while it runs.
func (p *Process) ExitError() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop sends p SIGTERM and waits for it to exit; after timeout it sends
// SIGKILL, and returns an error. Only p's own process is signalled.
func (p *Process) Stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return nil // exited already; Exited reports it
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
	if err := p.Kill(); err != nil {
		return err
	}
	return fmt.Errorf("%s (pid %d) did not exit within %v of SIGTERM and was killed", p.name, pid, timeout)
}

// Kill sends p SIGKILL, as a crash does, and waits for it to exit. Only
// p's own process is signalled.
func (p *Process) Kill() error {
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

// WaitReady calls probe until it returns nil, and returns nil; it returns
// p's exit (Exited) when p exits first, and an error when ctx ends. It
// gives up when stall passes in which neither p's output nor probe's error
// changed, or at most 5 stalls in all: a program that starts slowly on a
// loaded machine, printing as it goes, is waited for, and one that stands
// still is not.
func (p *Process) WaitReady(ctx context.Context, stall time.Duration, probe func(context.Context) error) error {
	start, moved := time.Now(), time.Now()
	var last, out string
	for {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		if err := p.Exited(); err != nil {
			return err
		}
		if o := p.output(); err.Error() != last || o != out {
			last, out, moved = err.Error(), o, time.Now()
		}
		if time.Since(moved) > stall || time.Since(start) > 5*stall {
			return fmt.Errorf("%s was not ready after %v, the last %v without progress (last: %s); %s",
				p.name, time.Since(start).Round(time.Second), time.Since(moved).Round(time.Second), last, p.Tail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready: %w (last: %s); %s", p.name, ctx.Err(), last, p.Tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// HTTPReady returns a probe for WaitReady: a GET of url with client,
// with token as a bearer token when not "", which is ready when it
// answers 200.
func HTTPReady(client *http.Client, url, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s: %s", url, resp.Status, repotest.Tail(string(body), 500))
		}
		return nil
	}
}

// FileOutput returns the output function of a process writing to path:
// its last 4000 bytes.
func FileOutput(path string) func() string {
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

// Env returns the test binary's environment without the variables that
// begin with one of prefixes: those that would configure the program
// behind its caller's back.
func Env(prefixes ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			out = append(out, kv)
		}
	}
	return out
}

// FreePorts returns n distinct ports of 127.0.0.1 that were free a moment
// ago.
func FreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close() // held until all n are found, so that they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// GoBuild runs go build with args (its flags and packages) in module, a
// directory relative to the repository root ("." for fleet's own), into
// out (a file, or a directory when it ends in "/"), with the test binary's
// environment more env.
func GoBuild(ctx context.Context, module, out string, env []string, args ...string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("needs the go command on PATH to build %s: %w", strings.Join(args, " "), err)
	}
	root, err := repotest.Root()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goCmd, append([]string{"build", "-o", out}, args...)...)
	cmd.Dir, cmd.Env = filepath.Join(root, module), append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s (in %s): %w: %s", strings.Join(args, " "), module, err, repotest.Tail(stderr.String(), 2000))
	}
	return nil
}

// Tool returns the path of the tool name of the Go module module
// (relative to the repository root), as repotest.Tool does, and logs with
// logf when it had to build it: a cold build.
func Tool(ctx context.Context, module, name string, logf func(string, ...any)) (string, error) {
	t0 := time.Now()
	p, err := repotest.Tool(ctx, module, name)
	if d := time.Since(t0); err == nil && d > 10*time.Second {
		logf("built %s in %v (a cold build; scripts/test builds it before go test)", name, Round(d))
	}
	return p, err
}

// Round rounds d for the logs of the harnesses: to 10 ms.
func Round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
