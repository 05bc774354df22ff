// Package wholemachine holds TestIntegrationWholeMachine, which provisions
// one machine made of real parts through a real fleetd, in the order HookOS
// and Tinkerbell run the steps, with the binaries a user deploys (built
// with go build): the runbook's "Plug a machine in" for a worker, and its
// refusals of a machine on another switch port and of an install disk that
// is not the declared one.
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
// compared byte for byte at the end. wipe-disk runs with
// FLEET_LOOP_DEVICES=true, since these disks are loop devices.
//
// Each program the machine runs (hookos-attest, then each action of the
// Workflow fleetd created) runs through ip netns exec in the machine's
// network namespace, and in the mount namespace ip netns exec makes, the
// test binary as machine-enter binds the machine's own parts over the
// host's: its /run (the udev database, hookos-attest's boot record, the
// run's shared directory), its SMBIOS serial (/sys/class/dmi/id) and its
// EFI variables (/sys/firmware/efi/efivars).
//
// # Tinkerbell
//
// The test plays Tinkerbell: it reads the Workflow fleetd created and its
// Template from the test apiserver, renders the Template as Tinkerbell
// does (text/template over the Workflow's hardwareMap, with quote), runs
// each action's binary with the action's environment (a path inside one of
// its volumes names the machine's side of the volume, as no container runs
// here), and writes the Workflow's status as Tinkerbell's controller does
// after each action. The last action, reboot, is waitdaemon's: it is
// reported done and the test boots the installed Talos, which reads its
// install code from META and fetches its config from the machine.
//
// The docker CLI of the wipe-disk and install actions, and efibootmgr of
// next-boot, are played by the test binary, by the name it is linked
// under: docker pull puts the image in the machine's image cache, docker
// run of the installer image writes a recognisable Talos layout (a GPT with
// an EFI system partition, META holding the META values the install action
// gave the installer in INSTALLER_META_BASE64, STATE, EPHEMERAL) and prints
// the installer's lines; efibootmgr keeps its boot entries as EFI variables
// in efivarfs's format, in the machine's /sys/firmware/efi/efivars.
//
// # Needs
//
// Root, Linux, ip, lldpd, swtpm and swtpm_setup, losetup, sfdisk, the go
// command, and the test control plane of internal/kubetest. Without one of
// them the test skips with the reason by hand, and fails with
// FLEET_REQUIRE_INTEGRATION=1. Everything it starts is stopped, and every
// namespace and loop device removed, when it ends, whether it passed or
// not.
package wholemachine
