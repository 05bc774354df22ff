// Package dockertest runs a machine's container engine and Tinkerbell's
// agent for a test, as HookOS runs them: a dockerd of its own per machine
// (Debian's docker.io, on a containerd of its own) in the machine's network
// namespace, and the agent with the docker runtime, its worker ID the
// machine's MAC, over gRPC to the tink-server of internal/tinktest. Each
// action's image is pulled for real and runs as a privileged container.
//
// # What runs
//
// Start makes a directory under $TMPDIR (not the test's: containerd's
// sockets must stay short) and runs, in it:
//
//   - containerd with its own root, state and socket (its CRI plugin off),
//     under `unshare --mount --propagation slave`, and, with Config.Netns,
//     `nsenter --net=/run/netns/<netns>`: a mount namespace of its own, to
//     which the test's mounts propagate and from which none of its own
//     (overlays, binds, netns files) leaks back;
//   - dockerd, joined to containerd's mount and network namespaces (nsenter
//     --target), with --host unix://<dir>/docker.sock, --data-root,
//     --exec-root, --pidfile and --config-file ({}) in the directory,
//     --containerd on that containerd, and --iptables=false,
//     --ip-forward=false, --bridge=none: it changes nothing of the host's
//     network. A container without a network of its own gets none; "host"
//     is the machine's namespace. Its syslog log driver sends every line a
//     container prints to a socket of Start's (ContainerOutput): the agent
//     removes each action's container when it ends, and its own log of an
//     action's output may lose the end (it closes the attach stream as
//     the container exits, racing its reader; seen under -race), so that
//     is the record a test can rely on. dockerd's local cache still
//     serves attach and logs.
//
// dockerd gets containerd of Start's own rather than the one it would
// start itself, because it would use a system containerd instead when
// /run/containerd/containerd.sock exists: then every machine's containers
// would share one containerd, outside the machine's namespaces.
//
// Start returns once dockerd's API answers /_ping. StartAgent runs the
// agent of the tools/tinkerbell module (`go -C tools/tinkerbell tool -n
// agent`) in the same namespaces with --id, --grpc-server,
// --attribute-detection=false, --runtime docker and --docker-socket.
//
// # The machine's network
//
// The registry of internal/imagetest and tink-server listen on the test's
// 127.0.0.1 only, which another network namespace cannot reach. For each
// address of Config.Forward, Start listens on the same address in the
// machine's namespace (its loopback brought up) and forwards each
// connection to the test's, so references such as 127.0.0.1:<port>/fleet/
// wipe-disk:v1 and the agent's --grpc-server mean the same in both
// namespaces, and dockerd pulls from 127.0.0.0/8 without TLS, as it allows
// by default. The forwarding is plumbing of the test's loopback, in place
// of the route a real machine has to its provisioning network; nothing of
// the machine's side is played.
//
// Images named after a registry's host name rather than an address, as
// fleet's Templates name theirs (ghcr.io/fleetkit/fleet/wipe-disk:v0.1.0
// released, or registry.example/fleet/wipe-disk:v1 from fleetd's image
// settings in a test), are
// pulled through Config.Registries: each name gets an address of the
// machine's loopback (127.0.0.2 on) in a hosts file bound over /etc/hosts
// in containerd's mount namespace, which dockerd and the agent share (the
// machine's name resolution, as DNS is a real machine's), port 80 there is
// forwarded to the registry the name maps to, and dockerd pulls from the
// name over plain HTTP (--insecure-registry). The image references stay
// as the Template names them.
//
// PID returns containerd's process ID: `nsenter --target PID --mount`
// changes the mount namespace where dockerd resolves a container's
// volumes, so a test can bind a machine's own directories (its /run, say)
// where a Template's volumes name the host's, without touching the
// test's.
//
// # Capabilities
//
// dockerd gives a privileged container every capability the kernel knows.
// Where the test's own capability bounding set lacks one (sandboxed
// machines have been seen without CAP_SYS_RESOURCE), runc cannot start any
// privileged container. Start then builds internal/dockertest/boundedrunc
// and makes it dockerd's default runtime: it removes from each container's
// spec the capabilities the bounding set lacks, which no process here can
// hold anyway, and runs runc. Start logs when it does.
//
// # Lifetime
//
// A test may end a machine's boot before its own end: Agent.Stop stops an
// agent as its service manager restarts it (SIGTERM: it stops its action
// and reports nothing), Agent.Kill kills it as a power loss does, and
// Docker.Stop ends the whole engine as a power loss or reset ends HookOS's
// (its agents killed, dockerd and containerd stopped, its addresses no
// longer forwarded), so that Start can start the next boot's in the same
// network namespace.
//
// When the test ends the agent gets SIGTERM (SIGKILL after 10 s), then
// dockerd (after 30 s, time to stop its containers), then containerd (10
// s); a kill is a test error. The forwarders close, anything still mounted
// under the directory in the test's mount namespace (nothing, unless a
// crash left it) is unmounted, and the directory is removed. Should the
// test binary die, each of those processes gets SIGTERM from the kernel
// (a parent-death signal); the directory, $TMPDIR/dockertest-*, then stays
// behind. Network namespaces are the caller's: Start neither makes nor
// removes them.
//
// # When it cannot run
//
// Start ends the test through internal/testenv (a skip with the reason by
// hand, a failure with FLEET_REQUIRE_INTEGRATION=1) when it does not run as
// root on Linux, runs with -short, or misses a program: dockerd (Debian's
// docker.io), containerd, runc, unshare and nsenter (util-linux), ip
// (iproute2) with Config.Netns, and mount with Config.Registries.
// StartAgent does when the go command or the tools module is missing or
// the agent does not build. containerd or dockerd standing still unready
// for a minute fails the test, with its output.
//
// # Cost
//
// containerd answers about 0.1 s after it starts and dockerd 0.3 s after
// that; building boundedrunc, where needed, takes about 0.4 s warm. A cold
// build of the agent takes about 30 s (scripts/test builds it before go
// test runs); warm, finding it takes about 1 s. The agent reports its
// first action about 0.15 s after it starts when a Workflow waits for it.
// An action whose image dockerd lacks takes about 1 s for a pull of 45 MB
// from the loopback registry and its run; one whose image is cached (the
// agent pulls before each action, so the registry sees each) about 0.3 s.
// A GetAction that finds no runnable Workflow blocks in tink-server for up
// to a minute, retrying every second: a Workflow created meanwhile is
// served within about a second. tink-server serves a worker nothing while
// one of its Workflows has ended and still exists: delete it first.
//
// # Use
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }
//
//	func TestSomething(t *testing.T) {
//		env := kubetest.Start(t)
//		tb := tinktest.Start(t, env, env.Namespace(t), nil)
//		reg := imagetest.StartRegistry(t)
//		// ip netns add <netns> ...
//		d := dockertest.Start(t, &dockertest.Config{Netns: netns, Forward: []string{reg.Host(), tb.GRPC()}})
//		// ... Hardware, a Template naming reg's images, a Workflow ...
//		agent := d.StartAgent(t, mac, tb.GRPC())
//		// ... wait for the Workflow; agent.Output() holds each action's output ...
//	}
package dockertest
