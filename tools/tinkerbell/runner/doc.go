// Command runner stands in, inside a machine that has no container engine,
// for Tinkerbell's agent with its docker runtime and for the engine itself:
// it takes a Workflow's actions from the real tink-server over its gRPC
// API (Tinkerbell v0.25.0's WorkflowService, the calls the agent makes),
// runs each action's program as a process of the machine, and reports each
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
// no program for image ..."). The program runs in the machine's own
// namespaces, as a privileged container with host networking would, with
// PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin and the
// action's environment. Of the action's volumes (HOST:CONTAINER[:ro]), one
// whose two paths are the same needs nothing; for another the runner binds
// HOST on CONTAINER in the machine's mount namespace (creating both
// directories) before the program starts, and leaves it for the run's
// later actions, which share it; ":ro" is not enforced. A volume of the
// engine's socket (a path ending docker.sock) is skipped: the docker
// stand-in below is the engine.
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
// boot ("No such image: ..." otherwise, exit 125); it binds each volume
// into the image's root file system (read-only with :ro), chroots there,
// and runs the entrypoint with ARG..., the image's environment and each
// --env (NAME alone passes the caller's value, as docker does), its output
// on the caller's, and exits with its code. --privileged, --network host
// and --pid host are the machine's own namespaces, which is all the stand-in
// has. Any other flag is refused (exit 125).
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
