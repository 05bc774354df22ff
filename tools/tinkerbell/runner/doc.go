// Command runner stands in, inside a machine that has no container engine,
// for Tinkerbell's agent with its docker runtime and for the engine itself:
// it takes a Workflow's actions from the real tink-server over its gRPC
// API (Tinkerbell v0.25.0's WorkflowService, the calls the agent makes),
// runs each action's program as a process of the machine in a mount
// namespace of its own with the action's volumes, and reports each
// action's state back, so that tink-controller drives the Workflow as it
// does for the agent. fleet's firmware test (examples/internal/firmware)
// puts it in the initramfs of a VM that booted through UEFI firmware, where
// HookOS would run the agent and Docker.
//
//	runner -server HOST:PORT -interface eth0 -images FILE [-wait 20s]
//
// The worker ID is the MAC address of -interface (as HookOS is given the
// machine's MAC as its worker ID), or -id.
//
// # What it does as the agent does
//
// In a loop it asks tink-server for an action (GetAction with the worker
// ID), reports it RUNNING ("running action"), runs it with the action's
// timeout, and reports SUCCESS, FAILED or TIMEOUT with the message "action
// completed", the execution's start, stop and duration, as the agent
// does. An action's environment is the Workflow's (the task's and the
// action's, as tink-server joins them) and its command, when the action
// names one, is given to its program as arguments, as the docker runtime
// appends it to the image's entrypoint.
//
// # What it does in place of containers
//
// The action's image names the program: -images is a file of lines
//
//	IMAGE PROGRAM
//
// (blank lines and # comments skipped), where PROGRAM is the absolute path
// of the image's entrypoint as the machine holds it, or the word
// waitdaemon. An image the file does not name fails its action ("runner:
// no program for image ..."). The program runs with
// PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin and the
// action's environment, in a container of the runner's that isolates its
// mounts and nothing else:
//
//   - a mount namespace of its own, a copy of the machine's, in which every
//     mount is private: what the runner or the program mounts there never
//     reaches the machine's namespace, and ends with the program.
//   - each of the action's volumes (the task's and the action's, as
//     tink-server joins them) bound, with the mounts under it, at its
//     container path, a path before the paths under it. A volume is
//     HOST:CONTAINER[:MODE] as Docker reads a bind: both paths absolute,
//     MODE ro or rw (the default). A ":ro" volume is read-only with every
//     mount under it (efivarfs under /sys, say), as Docker 25 and later
//     make it for a client of API 1.44 or later on Linux 5.12 and later
//     (on an older kernel only its own mount, as Docker then, and as
//     Docker 20.10 always): a write into it fails with EROFS ("read-only
//     file system"), and the machine's file stays as it was. A missing
//     HOST is made a directory, as Docker makes it. A named volume, another
//     mode (propagation, SELinux labels, nocopy) or two volumes at one
//     container path fail the action ("runner: invalid volume
//     specification: ...", "runner: duplicate mount point: ..."). A volume
//     of the engine's socket (a host path ending docker.sock) is left out:
//     the docker stand-in below is the engine.
//
// To make it, the runner runs itself again (/proc/self/exe, with a hidden
// first argument) in a new mount namespace, as a shim that makes the
// mounts private, binds the volumes and then executes the program in its
// own place: the program's process, exit code and signals (the action's
// timeout kills it) are the shim's. A shim that cannot set the container
// up exits 125 with a line "runner: container: ...", one that cannot start
// the program 126, or 127 when it is not found, as docker run does.
//
// Where it still differs from Docker's privileged container:
//
//   - the root file system is the machine's, not the image's: outside its
//     volumes the program sees, and may write, the machine's files; a
//     missing container path is made in the machine's file system (an
//     empty directory, or file when HOST is one), where it stays after the
//     action, where Docker makes it in the container's root.
//   - the machine's other mounts are all there (its /proc, /sys, /dev,
//     /run), where Docker's container has its own /proc, sysfs and /dev
//     and only the volumes of the machine's.
//   - the PID, network, IPC, UTS, cgroup and user namespaces are the
//     machine's: the Template's pid and network settings (host, in fleet's
//     Templates) are not read, and an action without them, which Docker
//     would give namespaces of its own, shares the machine's too. The
//     program runs with the runner's credentials and capabilities (root's,
//     as a privileged container's), no cgroup limits, and the machine's
//     hostname.
//
// waitdaemon stands in for Tinkerbell's waitdaemon image, which fleet's
// Templates run as their reboot action: like it, the action succeeds at
// once, and WAIT_SECONDS (default 10) later the runner runs the action's
// command on the machine. The one command it runs is reboot: it syncs the
// disks and restarts the machine (reboot(2)), as reboot in the host's PID
// namespace does. The runner stays until then.
//
// # The docker stand-in
//
// Run as docker (a link named docker to the runner, on PATH), it stands in
// for the docker CLI and its engine for what fleet's actions ask of them:
//
//	docker pull IMAGE
//	docker run [--rm] [--pull never|missing|always] [--privileged] [--network host]
//	  [--pid host] [--volume HOST:CONTAINER[:ro]]... [--env NAME[=VALUE]]...
//	  [--entrypoint PATH] IMAGE [ARG...]
//
// Images are directories of an image store (DOCKER_STANDIN_STORE, default
// /var/lib/fleet-images): IMAGE's root file system is STORE/IMAGE/rootfs,
// its config's environment STORE/IMAGE/env (KEY=VALUE lines) and its
// entrypoint STORE/IMAGE/entrypoint. pull finds the image there, as a
// registry would serve it, and records it as pulled in this boot
// (/run/docker-standin); a missing image fails as docker does ("pull access
// denied for ..."). run with --pull never runs only an image pulled in this
// boot ("No such image: ..." otherwise, exit 125); it runs the entrypoint
// in a container as the runner's actions run (a mount namespace of its
// own, the volumes under the same rules), but whose root is the image's
// root file system: it binds each volume into it, changes its root there,
// and runs the entrypoint with ARG..., the image's environment and each
// --env (NAME alone passes the caller's value, as docker does), its output
// on the caller's, and exits with its code. A volume's HOST is read in the
// caller's mount namespace (an action's), where Docker's engine reads it
// in the machine's; for the volumes of fleet's actions (/dev) the two are
// the same. --privileged, --network host and --pid host are the machine's
// own namespaces, which is all the stand-in has. Any other flag is refused
// (exit 125).
//
// # When it stops
//
// It stops after an action that did not succeed (the Workflow goes no
// further; the agent would go on asking), or when tink-server has had no
// action for it for -wait: from its start, or since its last action. Its
// lines begin "runner: ". Exit codes: 0 when every action it ran
// succeeded (or there was none), 1 when one did not or tink-server could
// not be reached, 2 for usage errors.
package main
