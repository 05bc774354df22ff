package tinktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetkit/fleet/internal/repotest"
)

// stopTimeout is how long tinkerbell has to exit after SIGTERM before it is
// killed.
const stopTimeout = 10 * time.Second

// process is the tinkerbell program Start started.
type process struct {
	cmd  *exec.Cmd
	log  string        // path of its combined output
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done is closed
}

// errPortTaken is wrapped when tinkerbell exited because a port was taken.
var errPortTaken = errors.New("a port was taken")

// startProcess starts path with args in dir, its output going to logPath,
// with an environment that holds no TINKERBELL_* variable (each would set a
// flag) and no KUBECONFIG.
func startProcess(path, dir, logPath string, args []string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start tinkerbell: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr()
	if err := startOnSpawner(cmd); err != nil {
		return nil, fmt.Errorf("start tinkerbell (%s): %w", path, err)
	}
	p := &process{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// cleanEnv returns env without the variables that would configure
// tinkerbell behind Start's back.
func cleanEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "TINKERBELL_") || strings.HasPrefix(kv, "KUBECONFIG=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// spawns carries commands to the spawner goroutine, which starts them.
var (
	spawnerOnce sync.Once
	spawns      chan spawn
)

type spawn struct {
	cmd  *exec.Cmd
	done chan error
}

// startOnSpawner starts cmd from one goroutine locked to its OS thread for
// the life of the test binary. Linux ties a child's parent-death signal
// (procAttr) to the thread that started it, and Go ends a thread when a
// goroutine that locked it returns: a child started from an ordinary
// goroutine could be signalled mid-test because some unrelated test locked
// and left that thread.
func startOnSpawner(cmd *exec.Cmd) error {
	spawnerOnce.Do(func() {
		spawns = make(chan spawn)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives on
			for s := range spawns {
				s.done <- s.cmd.Start()
			}
		}()
	})
	s := spawn{cmd: cmd, done: make(chan error, 1)}
	spawns <- s
	return <-s.done
}

// exited returns an error when p has exited, nil while it runs.
func (p *process) exited() error {
	select {
	case <-p.done:
		log := p.logTail()
		if strings.Contains(log, "address already in use") {
			return fmt.Errorf("tinkerbell exited (%v): %w: %s", p.err, errPortTaken, log)
		}
		return fmt.Errorf("tinkerbell exited (%v): %s", p.err, log)
	default:
		return nil
	}
}

// stop sends p SIGTERM and waits for it to exit; after stopTimeout it sends
// SIGKILL. Only p's own process is signalled.
func (p *process) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	pid := p.cmd.Process.Pid
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop tinkerbell (pid %d): %w", pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill tinkerbell (pid %d): %w", pid, err)
	}
	<-p.done
	return fmt.Errorf("tinkerbell (pid %d) did not exit within %v of SIGTERM and was killed", pid, stopTimeout)
}

// logTail returns the end of p's output, for error messages.
func (p *process) logTail() string {
	f, err := os.Open(p.log)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const n = 3000
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		if _, err := f.Seek(fi.Size()-n, io.SeekStart); err != nil {
			return "(log unreadable: " + err.Error() + ")"
		}
	}
	data, _ := io.ReadAll(f)
	return "its log " + p.log + " ends:\n" + repotest.Tail(string(data), n)
}

// keepLog copies the whole log out of the test's temporary directory,
// which the test's end removes, and returns where it went, with the lines
// of Rufio and tink-controller that report an error or a failure (at most
// 60): what a failed test needs to tell Tinkerbell's own failure from
// fleet's.
func (p *process) keepLog() string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	var b strings.Builder
	if f, err := os.CreateTemp("", "tinkerbell-log-*.json"); err == nil {
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil && cerr == nil {
			fmt.Fprintf(&b, "its whole log is kept at %s", f.Name())
		}
	}
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if n == 60 {
			b.WriteString("\n(more)")
			break
		}
		controller := strings.Contains(l, `"logger":"rufio"`) || strings.Contains(l, `"logger":"tink-controller"`)
		if controller && (strings.Contains(l, `"error"`) || strings.Contains(l, "failed") || strings.Contains(l, "Failed")) {
			b.WriteString("\n" + repotest.Tail(l, 600))
			n++
		}
	}
	if n == 0 {
		b.WriteString("\nno line of Rufio or tink-controller reports an error")
	}
	return b.String()
}

// waitReady waits until tinkerbell's HTTP server answers 200 at healthURL
// and its gRPC port accepts a connection at grpcAddr, p exits, or timeout
// passes. tinkerbell serves both only after its CRD migration.
func waitReady(ctx context.Context, p *process, timeout time.Duration, healthURL, grpcAddr string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var dialer net.Dialer
	var last string
	for {
		last = probe(ctx, client, &dialer, healthURL, grpcAddr)
		if last == "" {
			return nil
		}
		if err := p.exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tinkerbell was not ready within %v (last: %s): %s", timeout, last, p.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probe returns "" when healthURL answers 200 and grpcAddr accepts a
// connection, and otherwise what failed.
func probe(ctx context.Context, client *http.Client, dialer *net.Dialer, healthURL, grpcAddr string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, healthURL, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("%s answered %s: %s", healthURL, resp.Status, repotest.Tail(string(body), 500))
	}
	conn, err := dialer.DialContext(ctx, "tcp", grpcAddr)
	if err != nil {
		return "tink-server's gRPC port: " + err.Error()
	}
	conn.Close()
	return ""
}

// freePorts returns n distinct ports of 127.0.0.1 that were free a moment
// ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
