package dockertest

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/repotest"
	"github.com/fleetkit/fleet/internal/syncbuf"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/testproc"
	"golang.org/x/sys/unix"
)

const (
	// readyTimeout is how long a starting containerd, then dockerd, may
	// stand still (Process.WaitReady): each serves in about a second here.
	readyTimeout = 60 * time.Second
	// dockerdStop is how long dockerd has to stop after SIGTERM: it
	// stops its containers first (10 s each at most) before it exits.
	dockerdStop = 30 * time.Second
	// stopTimeout is how long containerd and the agent have to stop at
	// the test's end.
	stopTimeout = 10 * time.Second
)

// tools are the programs Start runs.
type tools struct {
	dockerd, containerd, runc, unshare, nsenter, mount string
}

func needTools(t testing.TB, registries bool) tools {
	t.Helper()
	testenv.Short(t)
	testenv.Root(t, "dockerd, containerd and their mount namespaces")
	tl := tools{
		dockerd:    testenv.Command(t, "dockerd", "docker.io"),
		containerd: testenv.Command(t, "containerd", "containerd"),
		runc:       testenv.Command(t, "runc", "runc"),
		unshare:    testenv.Command(t, "unshare", "util-linux"),
		nsenter:    testenv.Command(t, "nsenter", "util-linux"),
	}
	if registries {
		tl.mount = testenv.Command(t, "mount", "mount")
	}
	return tl
}

func start(t testing.TB, cfg *Config) *Docker {
	t.Helper()
	tl := needTools(t, len(cfg.Registries) > 0)
	if len(cfg.Registries) > 0 && cfg.Netns == "" {
		t.Fatalf("dockertest: Config.Registries needs Config.Netns: the names are the machine's")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	if cfg.Netns != "" {
		if _, err := os.Stat(filepath.Join("/run/netns", cfg.Netns)); err != nil {
			t.Fatalf("dockertest: network namespace %q: %v", cfg.Netns, err)
		}
		testenv.IP(t, "-n", cfg.Netns, "link", "set", "lo", "up")
	}
	// Not t.TempDir: its path holds the test's name, and containerd's
	// sockets must stay within 108 bytes.
	dir, err := os.MkdirTemp("", "dockertest-")
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	d := &Docker{
		dir:    dir,
		socket: filepath.Join(dir, "docker.sock"),
		netns:  cfg.Netns,
		log:    filepath.Join(dir, "dockerd.log"),
	}
	t.Cleanup(func() { removeState(t, dir) })

	t0 := time.Now()
	runtimeArgs, lacking, err := boundedRuntime(ctx, dir, tl.runc)
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	if len(lacking) > 0 {
		t.Logf("dockertest: this process's capability bounding set lacks capabilities %v, which dockerd gives privileged containers: runc runs through boundedrunc, which leaves them out (built in %v)", lacking, testproc.Round(time.Since(t0)))
	}

	// Stop's steps, and the test's end's: the last added runs first.
	t.Cleanup(func() { d.stop(t) })
	names := registryAddrs(cfg.Registries)
	d.forwardAll(t, cfg, names)

	d.output = &syncbuf.Buffer{}
	sl, err := listenSyslog(filepath.Join(dir, "containers.sock"), d.output)
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	d.atStop(func(testing.TB) { sl.close() })

	t1 := time.Now()
	cp, err := d.startContainerd(tl)
	if cp != nil {
		d.atStop(func(t testing.TB) {
			if err := cp.Stop(stopTimeout); err != nil {
				t.Errorf("dockertest: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	if err := cp.WaitReady(ctx, readyTimeout, func(context.Context) error {
		c, err := net.Dial("unix", d.containerdSocket())
		if err == nil {
			c.Close()
		}
		return err
	}); err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	d.nsPID = cp.Pid()
	containerdReady := time.Since(t1)
	if len(names) > 0 {
		if err := d.nameRegistries(tl, names); err != nil {
			t.Fatalf("dockertest: %v", err)
		}
		for _, n := range names {
			runtimeArgs = append(runtimeArgs, "--insecure-registry", n.name)
		}
	}

	t2 := time.Now()
	dp, err := d.startDockerd(tl, append(runtimeArgs, sl.args()...))
	if dp != nil {
		d.atStop(func(t testing.TB) {
			if err := dp.Stop(dockerdStop); err != nil {
				t.Errorf("dockertest: %v", err)
			}
			if t.Failed() {
				t.Logf("dockertest: dockerd: %s", dp.Tail())
			}
		})
	}
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	client := d.client()
	// dockerd's API answers /_ping with 200 once it serves.
	if err := dp.WaitReady(ctx, readyTimeout, testproc.HTTPReady(client, "http://docker/_ping", "")); err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	where := "the test's network namespace"
	if cfg.Netns != "" {
		where = "network namespace " + cfg.Netns
	}
	t.Logf("dockertest: dockerd ready in %v (containerd %v, dockerd %v), in %s, socket %s", testproc.Round(time.Since(t1)), testproc.Round(containerdReady), testproc.Round(time.Since(t2)), where, d.socket)
	return d
}

// forwardAll listens in cfg.Netns on each of cfg.Forward's addresses,
// then on port 80 of each registry name's address in names, and forwards
// to the test's; Stop closes the forwards.
func (d *Docker) forwardAll(t testing.TB, cfg *Config, names []registryName) {
	t.Helper()
	if cfg.Netns != "" {
		for _, addr := range cfg.Forward {
			f, err := testenv.Forward(cfg.Netns, addr, addr)
			if err != nil {
				t.Fatalf("dockertest: %v", err)
			}
			d.atStop(func(testing.TB) { f.Close() })
		}
	}
	for _, n := range names {
		f, err := testenv.Forward(cfg.Netns, net.JoinHostPort(n.addr, "80"), cfg.Registries[n.name])
		if err != nil {
			t.Fatalf("dockertest: registry %s: %v", n.name, err)
		}
		d.atStop(func(testing.TB) { f.Close() })
	}
}

// atStop adds step to Stop's, before those added earlier.
func (d *Docker) atStop(step func(testing.TB)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.halt = append([]func(testing.TB){step}, d.halt...)
}

// stop kills d's agents and runs Stop's steps, once.
func (d *Docker) stop(t testing.TB) {
	d.mu.Lock()
	if d.halted {
		d.mu.Unlock()
		return
	}
	d.halted = true
	agents, halt := d.agents, d.halt
	d.mu.Unlock()
	for _, a := range agents {
		if err := a.Kill(); err != nil {
			t.Errorf("dockertest: %v", err)
		}
	}
	for _, step := range halt {
		step(t)
	}
}

func (d *Docker) containerdSocket() string {
	return filepath.Join(d.dir, "containerd", "containerd.sock")
}

// startContainerd writes containerd's config and starts it in a mount
// namespace of its own, whose mounts are slaves of the test's, in the
// network namespace d.netns.
func (d *Docker) startContainerd(tl tools) (*testproc.Process, error) {
	state := filepath.Join(d.dir, "containerd")
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(state, "root"), filepath.Join(state, "state"), d.containerdSocket(), filepath.Join(state, "opt"))
	path := filepath.Join(d.dir, "containerd.toml")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return nil, err
	}
	args := []string{tl.unshare, "--mount", "--propagation", "slave", tl.containerd, "--config", path}
	if d.netns != "" {
		args = append([]string{tl.nsenter, "--net=" + filepath.Join("/run/netns", d.netns)}, args...)
	}
	return testproc.StartLogged("containerd", command(args...), filepath.Join(d.dir, "containerd.log"), false)
}

// registryName is a registry's host name and its address in the machine.
type registryName struct{ name, addr string }

// registryAddrs gives each name of registries an address of the machine's
// loopback, 127.0.0.2 on, in the order of the names.
func registryAddrs(registries map[string]string) []registryName {
	var out []registryName
	for _, name := range slices.Sorted(maps.Keys(registries)) {
		out = append(out, registryName{name: name, addr: fmt.Sprintf("127.0.0.%d", 2+len(out))})
	}
	return out
}

// nameRegistries writes a hosts file, this machine's /etc/hosts and a line
// for each of names, and binds it over /etc/hosts in containerd's mount
// namespace, where dockerd resolves registries' names.
func (d *Docker) nameRegistries(tl tools, names []registryName) error {
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if len(hosts) > 0 && hosts[len(hosts)-1] != '\n' {
		hosts = append(hosts, '\n')
	}
	for _, n := range names {
		hosts = fmt.Appendf(hosts, "%s\t%s\n", n.addr, n.name)
	}
	path := filepath.Join(d.dir, "hosts")
	if err := os.WriteFile(path, hosts, 0o644); err != nil {
		return err
	}
	out, err := exec.Command(tl.nsenter, "--target", strconv.Itoa(d.nsPID), "--mount", tl.mount, "--bind", path, "/etc/hosts").CombinedOutput()
	if err != nil {
		return fmt.Errorf("bind the machine's hosts file over /etc/hosts: %w: %s", err, out)
	}
	return nil
}

// startDockerd starts dockerd in containerd's mount and network
// namespaces, on containerd, with its own state.
func (d *Docker) startDockerd(tl tools, runtimeArgs []string) (*testproc.Process, error) {
	daemonJSON := filepath.Join(d.dir, "daemon.json")
	if err := os.WriteFile(daemonJSON, []byte("{}\n"), 0o600); err != nil {
		return nil, err
	}
	args := []string{
		tl.nsenter, "--target", strconv.Itoa(d.nsPID), "--mount", "--net", tl.dockerd,
		"--host", "unix://" + d.socket,
		"--data-root", filepath.Join(d.dir, "data"),
		"--exec-root", filepath.Join(d.dir, "exec"),
		"--pidfile", filepath.Join(d.dir, "docker.pid"),
		"--config-file", daemonJSON,
		"--containerd", d.containerdSocket(),
		"--iptables=false",
		"--ip-forward=false",
		"--ip-masq=false",
		"--bridge=none",
		"--userland-proxy=false",
	}
	args = append(args, runtimeArgs...)
	return testproc.StartLogged("dockerd", command(args...), d.log, false)
}

// client returns an HTTP client of dockerd's API socket.
func (d *Docker) client() *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", d.socket)
		}},
	}
}

// boundedRuntime returns dockerd's flags that make boundedrunc its default
// runtime, building it into dir, when this process's capability bounding
// set lacks capabilities the kernel knows (and their numbers); none when
// it lacks none.
func boundedRuntime(ctx context.Context, dir, runc string) (args []string, lacking []int, err error) {
	lacking, err = lackedCapabilities()
	if err != nil || len(lacking) == 0 {
		return nil, nil, err
	}
	bin := filepath.Join(dir, "bin", "boundedrunc")
	if err := testproc.GoBuild(ctx, ".", bin, []string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags", "-X main.runc="+runc, "./internal/dockertest/boundedrunc"); err != nil {
		return nil, nil, err
	}
	return []string{"--add-runtime", "fleet-runc=" + bin, "--default-runtime", "fleet-runc"}, lacking, nil
}

// lackedCapabilities returns the numbers of the capabilities, up to the
// kernel's last, that this process's bounding set lacks.
func lackedCapabilities() ([]int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return nil, err
	}
	last, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("cap_last_cap: %w", err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(status)) {
		v, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		bnd, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("CapBnd: %w", err)
		}
		var lacking []int
		for c := 0; c <= last && c < 64; c++ {
			if bnd&(1<<c) == 0 {
				lacking = append(lacking, c)
			}
		}
		return lacking, nil
	}
	return nil, fmt.Errorf("/proc/self/status holds no CapBnd")
}

// removeState unmounts whatever is still mounted under dir in the test's
// mount namespace (nothing, when containerd and dockerd ran in their own,
// as Start starts them; an overlay or a bind left by a crash otherwise),
// deepest first, and removes dir.
func removeState(t testing.TB, dir string) {
	mounts, err := mountsUnder(dir)
	if err != nil {
		t.Errorf("dockertest: %v", err)
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			t.Errorf("dockertest: unmount %s: %v", m, err)
		} else {
			t.Logf("dockertest: unmounted %s, left mounted in the test's mount namespace", m)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("dockertest: remove dockerd's state: %v", err)
	}
}

// mountsUnder returns the mount points under dir in this process's mount
// namespace, deepest first.
func mountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a blank).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (d *Docker) startAgent(t testing.TB, id, grpc string) *Agent {
	t.Helper()
	nsenter := testenv.Command(t, "nsenter", "util-linux")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin, err := testproc.Tool(ctx, "tools/tinkerbell", "agent", t.Logf)
	if err != nil {
		testenv.Unavailable(t, "Tinkerbell's agent: %v", err)
	}
	args := []string{
		nsenter, "--target", strconv.Itoa(d.nsPID), "--mount", "--net", bin,
		"--id", id,
		"--grpc-server", grpc,
		"--attribute-detection=false",
		"--runtime", "docker",
		"--docker-socket", d.socket,
	}
	out := &syncbuf.Buffer{}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.halted {
		t.Fatalf("dockertest: StartAgent on a stopped Docker")
	}
	a := &Agent{out: out, started: time.Now()}
	cmd := command(args...)
	cmd.Stdout, cmd.Stderr = out, out
	p, err := testproc.Start("agent", cmd, out.String)
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	a.p = p
	d.agents = append(d.agents, a)
	t.Cleanup(func() {
		if err := p.Stop(stopTimeout); err != nil {
			t.Errorf("dockertest: %v", err)
		}
		if t.Failed() {
			t.Logf("dockertest: the agent's output ends:\n%s", repotest.Tail(out.String(), 6000))
		}
	})
	return a
}
