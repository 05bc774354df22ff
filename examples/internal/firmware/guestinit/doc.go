// Command guestinit is /init of the boot image TestIntegrationFirmware
// builds (see package firmware): the first process of a Linux kernel that
// UEFI firmware booted through shim and grub, in an initramfs without udev
// or a shell. It stands where HookOS's init and its onboot containers
// stand, and runs HookOS's own program, hookos-attest, unchanged.
//
// In order, it:
//
//  1. mounts devtmpfs on /dev, proc, sysfs, securityfs on
//     /sys/kernel/security and a tmpfs on /run;
//  2. loads the kernel modules /lib/modules/fleet.load lists, one path a
//     line, in that order (finit_module; the list puts each module's
//     dependencies before it), and mounts efivarfs;
//  3. says on the console what the firmware left the kernel: the
//     SecureBoot variable as efivarfs shows it, the kernel's lockdown
//     mode, and the size of the TCG event log in securityfs, or that there
//     is none;
//  4. reads /etc/fleet/env (KEY=VALUE lines), brings up lo and the
//     interface FLEET_INTERFACE names with the address FLEET_ADDRESS
//     (CIDR) once its driver made it;
//  5. runs /bin/hookos-attest with that environment, its output on the
//     console, and says how it exited and what this boot's record holds
//     (attested, and whether a code is set; never the code);
//  6. when FLEET_INSTALL_DISK names the install disk, says which disks
//     the kernel's sysfs shows, the serial each reports and where, and
//     whether the install disk is the one disk that reports
//     FLEET_INSTALL_DISK_SERIAL, as disksafe judges it before a wipe
//     (disksafe.Read and disksafe.Judge, without udev); it wipes nothing;
//  7. when FLEET_TINK_SERVER names tink-server (HOST:PORT), runs the
//     runner (/bin/runner, tools/tinkerbell/runner), as HookOS runs
//     Tinkerbell's agent, with the MAC of FLEET_INTERFACE as the worker
//     ID, the images file /etc/fleet/images, and FLEET_RUNNER_WAIT (default
//     60s) as how long it waits for an action; the runner's output goes to
//     the console, and the Workflow's reboot action reboots the machine;
//  8. powers the machine off.
//
// # The installed system
//
// When the kernel's arguments name talos.config=, it stands in for the
// installed Talos's first boot instead: it loads its modules, says which
// boot entry the firmware booted (BootCurrent, and that entry's
// description and device path: HD(<partition>,GPT,<GUID>)/<loader>), and
// the talos.config= URL; finds the disk whose META (the layout of
// internal/imagetest/standin) holds the install code; gives eth0 the address QEMU's fw_cfg item
// opt/fleet/address holds; fetches the config over HTTPS from the URL with
// the code for ${code}, trusting /etc/talos/ca.pem; checks that it is a
// worker's v1alpha1 machine config whose install disk selector is the
// serial of the disk META is on, with a document giving the node's
// address; says so, and powers off. Its lines begin "fleet-init: talos: ",
// and none holds the code.
//
// Its own lines begin with "fleet-init: ". Any failure is said on the
// console, and the machine powers off: nothing waits for a person.
//
// # Platforms
//
// Linux only, as the first process of a kernel: it mounts, loads modules
// and powers off. Elsewhere it builds and exits 1.
package main
