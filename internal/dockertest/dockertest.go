package dockertest

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/syncbuf"
	"github.com/fleetkit/fleet/internal/testproc"
)

// Config holds the optional settings of Start. A nil *Config means every
// default. It must not change while Start runs.
type Config struct {
	// Netns is the network namespace (a name under /run/netns, as ip netns
	// add makes) that containerd, dockerd, their containers and the agent
	// run in: the machine's. Start brings its loopback interface up. "":
	// the test's own.
	Netns string
	// Forward are addresses of 127.0.0.1 in the test's network namespace
	// (host:port: the registry, tink-server) that the programs in Netns
	// reach at the same address: Start listens on each in Netns and
	// forwards every connection to it. Ignored when Netns is "". nil: none.
	Forward []string
	// Registries maps registry host names, as image references name them
	// (such as registry.example, which fleetd's image settings name in
	// fleet's Templates in a test), to registries of the test's network namespace
	// (host:port, such as an imagetest registry on 127.0.0.1), so that
	// dockerd pulls an image named after the name from the registry it
	// maps to: Start gives each name an address of its own on Netns's
	// loopback (127.0.0.2, 127.0.0.3, ... in the order of the names) in a
	// hosts file of its own, bound over /etc/hosts in the mount namespace
	// containerd, dockerd and the agent share (the test's /etc/hosts is
	// unchanged), forwards port 80 of that address to the registry, and
	// lets dockerd pull from the name over plain HTTP
	// (--insecure-registry; it tries HTTPS on port 443 first, which
	// nothing answers). Requires Netns. nil: none.
	Registries map[string]string
}

// Docker is a containerd and a dockerd that Start started for one test:
// one machine's container engine, as HookOS runs one. Its methods are safe
// for concurrent use. It stops when that test ends.
type Docker struct {
	dir    string
	socket string
	netns  string
	log    string
	nsPID  int // containerd's PID: whose namespaces dockerd and the agent join
	output *syncbuf.Buffer

	mu     sync.Mutex
	agents []*Agent           // those StartAgent started, for Stop
	halt   []func(testing.TB) // Stop's steps, in order: dockerd, containerd, the sockets
	halted bool
}

// Socket returns the path of dockerd's API socket: the agent's
// --docker-socket, and what a Template binds where an action expects the
// machine's Docker (/var/run/docker.sock).
func (d *Docker) Socket() string { return d.socket }

// PID returns the process ID of containerd, whose mount and network
// namespaces dockerd and the agent join: the machine's. A program run with
// `nsenter --target PID --mount` sees, and may change, the paths the
// machine's dockerd resolves its containers' volumes in (a Template's
// /run/udev:/run/udev, say), without touching the test's mount namespace.
// Its mounts end with the namespace, when Start's processes stop.
func (d *Docker) PID() int { return d.nsPID }

// ContainerOutput returns what the containers dockerd ran have printed so
// far, one line each, as "<container name>: <line>", stdout and stderr
// alike: dockerd's syslog log driver sends each line to a socket Start
// serves. The agent names an action's container
// tinkerbell_<action>_<action ID>. Unlike the agent's own log, it holds
// every line: the agent closes a container's attach stream as soon as the
// container exits, and what its reader had not read yet is lost.
func (d *Docker) ContainerOutput() string { return d.output.String() }

// Printed returns the lines the container name printed so far
// (ContainerOutput's, without "<name>: ") once one of them satisfies
// match: it waits as long as the containers' output grows, for dockerd's
// log driver may deliver a line after the agent reported its action. When
// the output stood still for stall without such a line, it returns the
// lines and false.
func (d *Docker) Printed(name string, stall time.Duration, match func(string) bool) ([]string, bool) {
	prefix := name + ": "
	var lines []string
	grown, size := time.Now(), -1
	for {
		out := d.ContainerOutput()
		lines = lines[:0]
		for l := range strings.Lines(out) {
			if rest, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), prefix); ok {
				lines = append(lines, rest)
			}
		}
		if slices.ContainsFunc(lines, match) {
			return lines, true
		}
		if len(out) != size {
			grown, size = time.Now(), len(out)
		}
		if time.Since(grown) > stall {
			return lines, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Log returns the path of dockerd's and containerd's output. It is removed
// when the test ends; Start logs its end when the test failed.
func (d *Docker) Log() string { return d.log }

// Agent is Tinkerbell's agent that StartAgent started for one test. Its
// methods are safe for concurrent use. It stops when that test ends.
type Agent struct {
	out     *syncbuf.Buffer
	started time.Time
	p       *testproc.Process
}

// Output returns what the agent has printed so far: its JSON log lines.
// Each action's container output is the message of lines with a
// container_name, as the agent reads it from Docker's attach stream
// without demultiplexing it: each chunk begins with the stream's 8-byte
// frame header (JSON-escaped, \u0001 or \u0002 for stdout or stderr, then
// the length), and a line may come after the agent reported the action.
func (a *Agent) Output() string { return a.out.String() }

// Started returns when the agent was started.
func (a *Agent) Started() time.Time { return a.started }

// agentStop is how long Agent.Stop gives the agent: docker stop gives the
// action's container 5 s, and its removal takes a few more.
const agentStop = 30 * time.Second

// Stop stops the agent as a service manager restarts it, with SIGTERM,
// and waits until it has exited: the agent stops the action it runs (docker
// stop, which gives the container 5 s), removes its container, and exits
// without reporting the action, which tink-server then serves again to the
// next agent of the worker. After agentStop it is killed, and Stop returns
// an error. Stopping a stopped agent does nothing.
func (a *Agent) Stop() error { return a.p.Stop(agentStop) }

// Kill kills the agent at once (SIGKILL), as a power loss does, and waits
// until it has exited: it reports nothing more, and the action's container
// is left to dockerd. Killing a stopped agent does nothing.
func (a *Agent) Kill() error { return a.p.Kill() }

// Start starts a container engine for t: containerd and dockerd, each with
// its own state under a new temporary directory, in the network namespace
// cfg.Netns and in a mount namespace of their own, and waits until
// dockerd's API answers (see the package doc). It stops both, and removes
// their state, when t ends.
//
// Start ends t through internal/testenv when it cannot run (not root, not
// Linux, a program missing, -short): a skip with the reason by hand, a
// failure with FLEET_REQUIRE_INTEGRATION=1. It fails t when containerd or
// dockerd does not become ready.
func Start(t testing.TB, cfg *Config) *Docker {
	t.Helper()
	if cfg == nil {
		cfg = &Config{}
	}
	return start(t, cfg)
}

// Stop ends the machine's container engine as a power loss or a reset ends
// HookOS's: it kills every agent StartAgent started on d (SIGKILL: none
// reports anything more), then stops dockerd (SIGTERM; it stops the
// containers that still run) and containerd, and stops forwarding d's
// addresses. What d's containers printed stays in ContainerOutput, and its
// state on disk until the test ends. Start may then start the engine of the
// machine's next boot in the same network namespace. Stopping a stopped
// Docker does nothing; Stop fails t when a process had to be killed.
func (d *Docker) Stop(t testing.TB) {
	t.Helper()
	d.stop(t)
}

// StartAgent starts Tinkerbell's agent (v0.25.0, the tools/tinkerbell
// module's agent) for t in d's namespaces, as HookOS starts it: with worker
// ID id (for fleet's Templates the machine's lowercase MAC), tink-server's
// gRPC at grpc (plain, as tinktest serves it), the docker runtime on d,
// and no attribute detection. It stops the agent when t ends.
//
// StartAgent ends t through internal/testenv when the agent cannot be
// built, and fails it when the agent does not start.
func (d *Docker) StartAgent(t testing.TB, id, grpc string) *Agent {
	t.Helper()
	return d.startAgent(t, id, grpc)
}
