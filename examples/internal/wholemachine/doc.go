// Package wholemachine holds TestIntegrationWholeMachine, which runs
// machines made of real parts through a real fleetd and the real
// Tinkerbell, in the order HookOS and Tinkerbell run the steps, with the
// programs a user deploys: the runbook's "Plug a machine in" for a worker,
// "Approve a machine's EKs", and each machine-side row of "If something
// goes wrong" that can be made real here, one case, on a machine of its
// own, per row (see The cases).
//
// # The machine
//
// The machine is a network namespace ("machine") whose one interface, eth0,
// holds the node's address and is plugged into port swp of a "switch"
// namespace. There lldpd announces the port as the switch names it ("Port
// N", a locally assigned port ID, as UniFi switches send it), and a bridge
// joins the port to an uplink whose other end is in the test's own
// namespace. fleetd runs as a process in the test's namespace and listens
// on the uplink's address, so the machine reaches fleetd through its switch
// port, from the node's address.
//
// The machine's TPM is swtpm, manufactured by swtpm_setup with EK
// certificates, which hookos-attest reaches through swtpm's unix socket
// (-tpm names a socket). Its disks are two loop devices: the install disk,
// holding an old install, whose serial is given in the machine's udev
// database, and a decoy with another serial, filled with random bytes and
// compared byte for byte at the end.
//
// HookOS's own program, hookos-attest, runs through ip netns exec in the
// machine's network namespace, and in the mount namespace ip netns exec
// makes, the test binary as machine-enter binds the machine's own parts
// over the host's: its /run (the udev database, hookos-attest's boot
// record, the run's shared directory /run/fleet-workflow, the Docker
// socket) and its SMBIOS serial (/sys/class/dmi/id). The machine has no
// UEFI firmware: the test's host has none, and efibootmgr works only on a
// real efivarfs, so the machine is one that booted HookOS by legacy BIOS.
//
// # What is real
//
//   - fleetctl approve, the operator's, against fleetd's approver API.
//   - fleetd, the binary a user deploys (go build), against NetBox
//     (inventory/netboxtest) and the kube-apiserver and etcd of
//     internal/kubetest: it creates the Hardware, its Templates (the
//     released fleet-provision, unchanged) and the run's Workflow.
//   - Tinkerbell v0.25.0 (internal/tinktest): tink-controller renders the
//     Template with the Workflow's values and drives the Workflow's status;
//     tink-server serves the actions to the agent and takes its reports.
//     Rufio runs beside them; this test's runs ask it for no power job.
//   - The machine's container engine and agent (internal/dockertest):
//     containerd and dockerd of its own in the machine's network namespace,
//     and Tinkerbell's agent with the docker runtime, worker ID the
//     machine's MAC, over gRPC to tink-server. The agent pulls each
//     action's image and runs it as a privileged container with the
//     Template's environment and volumes. dockerd's mount namespace is made
//     the machine's by machine-enter (as for hookos-attest), so the
//     Template's volumes (/dev, /sys, /run/udev, /run/fleet,
//     /run/fleet-workflow, /var/run/docker.sock) are the machine's parts.
//   - fleet's actions as images (internal/imagetest), built from
//     examples/wipe-disk, examples/install and examples/next-boot with the
//     docker CLI or efibootmgr of this host beside them, as .ko.yaml's base
//     images give them, and served from a registry on the test's loopback.
//     fleetd's settings (FLEET_IMAGE_WIPE_DISK, FLEET_IMAGE_INSTALL,
//     FLEET_IMAGE_NEXT_BOOT) name them as registry.example/fleet/<name>:v1
//     in the Templates, and the machine resolves that registry, and
//     ghcr.io (waitdaemon, the reboot action's released image), to the
//     test's registry (dockertest's
//     Config.Registries: the machine's /etc/hosts, as its DNS would): the
//     references stay as the Template names them. The wipe-disk image sets
//     FLEET_LOOP_DEVICES=true in its environment, since the machine's
//     disks are loop devices, which the Template never counts as disks.
//   - wipe-disk pulls the class's installer image with the docker CLI
//     through the machine's Docker socket, and install runs it from the
//     machine's cache with docker run. next-boot finds no UEFI firmware
//     (no /sys/firmware/efi), says the machine booted by legacy BIOS and
//     changes nothing: its efibootmgr does not run.
//
// # What stands in
//
//   - Talos's installer image (imagetest.Installer): its /bin/installer
//     writes a recognisable Talos layout (a GPT with an EFI system
//     partition, META holding the values the install action gave the
//     installer, STATE, EPHEMERAL) and installs nothing that boots. Talos's
//     own image cannot be pulled here.
//   - waitdaemon, the reboot action's image (imagetest.WaitDaemon): it
//     says what it would run and exits 0. The real one cannot be pulled
//     here, and would reboot the test's host (reboot, in the host's PID
//     namespace).
//   - The machine's reboot: once the Workflow ends SUCCESS, the test boots
//     the installed Talos: it reads the install code from META and fetches
//     the node's config from the machine, twice.
//
// The forwarding of the registry's and tink-server's loopback ports into
// the machine's namespace is plumbing in place of a provisioning network,
// not a part of the machine.
//
// # The cases
//
// Each case is a subtest named in the test's table (wholeMachineCases),
// with the runbook's lines in a comment; docs/runbook-coverage.md cites
// them by name. A case gets its own machine, NetBox, fleetd and namespace,
// and, when it runs a Workflow, its own Tinkerbell and container engine;
// the control plane, the programs and the images are built once. Cases
// that run no Workflow run in parallel, after the rest.
//
//   - provision: "Plug a machine in" to active, with a config fetch while
//     NetBox does not answer (503), one the node never acknowledges
//     (journaled with its address), and one of the spent code
//     (FleetInstallConfigRefetched).
//   - approve-then-power-cycle: pending-approval, a second TPM claiming
//     the serial, fleetctl approve's lines, the apply, the power cycle,
//     attest: PASSED and the run; then HookOS boots again after the
//     run's success (FleetNodeBootedHookOSAfterInstall), and the config
//     expires unread (FLEET_CONFIG_TTL 20 s): 404, FleetInstallConfigMissing.
//   - replaced-tpm: another TPM in the machine: ek-hash-mismatch, nothing
//     written; the entry names its EKs, and it passes.
//   - no-lldp-frame, binding-unauthored,
//     lacks-install-disk-serial, serial-no-entry-names,
//     auto-provision-off, control-plane-waits, control-planes-off,
//     first-control-plane: fleetd's refusals and no-provision answers,
//     on the console, in the journal and in the audit lines.
//   - disk-serial-changed, disks-swapped, two-disks-report-the-serial,
//     installer-image-missing: wipe-disk's refusals, FAILED at wipe-disk
//     with nothing wiped.
//   - fleetd-does-not-answer: the machine resets before its run began,
//     and in its next boot nothing answers at fleetd's address: attest:
//     try 5 failed, and wipe-disk refuses the boot.
//   - never-reported: no agent reports; with the Template's
//     global_timeout set to 10 s fleetd deletes the Workflow, and the next
//     boot gets no provision (last run not repeated).
//   - resumed-after-wipe-disk: the machine resets while the installer
//     writes; the next boot's engine and agent resume the run at install,
//     which refuses.
//   - installer-met-its-own-writes: the agent restarts (SIGTERM) while the
//     installer writes; in the same boot install runs again, and the
//     installer fails in Talos's words on the disk it started.
//   - passed-global-timeout: the power fails after the install (the
//     registry holds next-boot's pull: imagetest's Registry.Hold); the
//     node boots its install and is active; with global_timeout 45 s
//     tink-controller ends the run TIMEOUT, and fleetd says nothing is to
//     be done.
//
// A machine's power cycle (world.powerCycle) ends its boot as a power loss
// does: the agent is killed (it reports nothing more), the container
// engine stops (dockertest's Docker.Stop), HookOS's /run starts empty (the
// boot record and the run's shared directory are gone) and a new engine
// starts with an empty image cache; the kernel's boot ID is the test's
// host's and stays, which the actions never need to tell a new boot: the
// missing records do. The slow stand-in installer (imagetest.SlowInstaller)
// takes 10 minutes between its partition table and its marks unless it is
// stopped, so a case stops the machine while it writes.
//
// # What cannot be made real here
//
//   - wipe: <disk> is removable, is on USB: the machine's disks are loop
//     devices; the kernel never marks a loop device removable, and its
//     sysfs path is virtual, never under a USB controller.
//   - wipe: no install disk serial is declared: fleetd renders no Workflow
//     without install_disk_serial (lacks-install-disk-serial is its
//     refusal); only an older fleetd would.
//   - ek-missing: swtpm_setup manufactures every TPM with both EKs.
//   - wipe: ... no install code: a boot that passes without a code while
//     the run waits at wipe-disk is one the class's Secure Boot policy
//     refuses, and this machine has no UEFI firmware to quote its boot
//     (examples/internal/firmware has).
//   - recorded no attested switch port, and the Rufio job's refusal: runs
//     the provision loop starts from desired_action power-cycle the
//     machine through its BMC; this machine has none
//     (provision/rufio_linux_test.go runs Rufio against a BMC of its own).
//
// # Times
//
// Measured 2026-12-05 on two shared cores with another engineer's long
// tests beside, warm caches, over eight runs of go test -count=1 -v and
// seven with -race (which instruments the test binary, not the programs it
// starts):
//
//	Tinkerbell ready after it starts          0.3 to 1.5 s
//	the machine's containerd and dockerd      0.6 to 1.4 s
//	the Workflow, agent start to SUCCESS      6.7 to 12.5 s
//	  wipe-disk (its image's pull, and the
//	  installer's, included)                  1.8 to 3.8 s
//	  install                                 2.1 to 3.9 s
//	  next-boot                               0.7 to 1.8 s
//	  reboot                                  0.7 to 1.5 s
//	the refused wipe, agent start to FAILED   1.8 to 4.3 s
//	the whole machine, from its parts' start
//	  to its node active in NetBox            17 to 26 s
//	the five images, built and pushed         6 to 12 s (-race: 25 to 35 s)
//	the whole test, in its binary             64 to 100 s (-race: 87 to 140 s)
//
// Each action's figure is Tinkerbell's own (executionDuration); the test
// logs them, and the Workflow's progress with the time each state was
// seen.
//
// # Needs
//
// Root, Linux, ip, lldpd, swtpm and swtpm_setup, losetup, sfdisk, nsenter,
// dockerd, containerd, runc, unshare, mount, the docker CLI, efibootmgr,
// the go command, the test control plane of internal/kubetest and the
// tools/tinkerbell module. Without one of them the test skips with the
// reason by hand, and fails with FLEET_REQUIRE_INTEGRATION=1. Everything it
// starts is stopped, and every namespace and loop device removed, when it
// ends, whether it passed or not. Its waits on the real parts are sized by
// their progress: a Workflow fails the test only when its status stands
// still for 3 minutes.
package wholemachine
