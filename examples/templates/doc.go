// Package templates holds the Tinkerbell Templates of fleet's runs, as YAML
// files and embedded in Go so that fleetd can create them in a cluster:
//
//	fleet-provision.yaml  wipe-disk, install, next-boot, reboot
//	fleet-retire.yaml     wipe-disk alone, pulling no installer
//
// Provision and Retire return them as tinkerbell.Template objects. Their
// names are the defaults of provision.Config's ProvisionTemplate and
// RetireTemplate, and a Template must live in the namespace of the
// Workflows that name it (provision.Config.Namespace, "tinkerbell" by
// default):
//
//	kubectl -n tinkerbell apply -f examples/templates/fleet-provision.yaml -f examples/templates/fleet-retire.yaml
//
// # Template values
//
// Each run's Workflow carries the values provision puts in its hardwareMap
// (provision.ValueMAC and the other Value constants), which Tinkerbell
// renders into the template data with Go's text/template, refusing a value
// the Workflow lacks:
//
//	device_1             the MAC the machine attested with, which is the
//	                     Tinkerbell agent's worker ID in HookOS
//	install_disk         the device's install_disk
//	install_disk_serial  the device's install_disk_serial
//	install_code_sha256  the SHA-256 of the run's install code, 64
//	                     lowercase hex characters
//	installer_image      the Talos installer image of the node's class
//
// No value is a secret. Whoever may read Workflows reads them, and so does
// any machine that asks Tinkerbell for the actions of the run's MAC, so the
// install code never travels in a Workflow, nor the config URL that
// carries it: it reaches the machine only in fleetd's attestation answer,
// and hookos-attest writes it to this boot's record in /run/fleet
// (disksafe.BootRecord). wipe-disk and install read it there, and refuse
// unless it hashes to install_code_sha256.
//
// Every value goes in through quote (Sprig's, which Tinkerbell's renderer
// provides): a Go-quoted string, which YAML reads back as the same string.
// So a value that holds a quote or a line break, as an install_disk or a
// serial anyone may write in NetBox could, stays one string and cannot add
// an image, a command or a volume to the run.
//
// # Actions, images and volumes
//
// Tinkerbell runs each action as a privileged container in HookOS. The
// files name the images fleet releases, DefaultImages:
// ghcr.io/fleetkit/fleet/<action>:Release for wipe-disk, install and
// next-boot, and waitdaemon for the reboot. ProvisionWith and RetireWith
// return the Templates with other images (Images), for example those of
// your registry, built from examples/wipe-disk, examples/install and
// examples/next-boot (wipe-disk and install with the docker CLI beside the
// binary, next-boot with efibootmgr). fleetd takes them from its settings
// FLEET_IMAGE_WIPE_DISK, FLEET_IMAGE_INSTALL, FLEET_IMAGE_NEXT_BOOT and
// FLEET_IMAGE_REBOOT, creates the Templates with them, and updates a
// Template whose actions name other images (ActionImages). The images are
// inside the Template's spec.data, a string, which an image rewrite of
// kustomize or of a registry mirror tool never reads: set them there.
//
//	wipe-disk  proves the install disk by its serial and wipes it, in a boot
//	           that passed attestation with a code (disksafe.Wipe); in a
//	           provision run it pulls the installer image first. Volumes:
//	           /dev, /sys and /run/udev (read-only) to find the disk, /run/fleet
//	           (read-only) for hookos-attest's boot record, and the Docker
//	           socket to pull.
//	install    runs the class's Talos installer from the pulled image, only in
//	           the boot that wiped (disksafe.CheckWiped) and received the run's
//	           code (disksafe.CheckCode), and gives the installed Talos that
//	           code in META. Volumes: /run/fleet (read-only) for the boot
//	           record, and the Docker socket.
//	next-boot  sets UEFI BootNext to the installed disk's EFI system
//	           partition, so the reboot boots Talos rather than netbooting
//	           HookOS. Volumes: /dev, and /sys read-write for efivarfs.
//	reboot     Tinkerbell's usual waitdaemon
//	           (ghcr.io/jacobweinstock/waitdaemon), which reports the action
//	           done and reboots the host 10 seconds later, so the Workflow
//	           ends SUCCESS before the machine goes down. Volume: the Docker
//	           socket.
//
// Tinkerbell's agent mounts no directory that the actions of a run share,
// so the task binds the HookOS directory /run/fleet-workflow (a tmpfs: a new
// boot starts with it empty) at /workflow in every action, and sets
// FLEET_STATE_DIR to it: wipe-disk records its wipe there for install, which
// refuses a run that resumed in a new boot. FLEET_BOOT_DIR names
// /run/fleet, where hookos-attest records the boot, for wipe-disk and
// install.
//
// # Timeouts
//
// A provision run has 3600 s in all (wipe-disk 900, install 1200, next-boot
// 120, reboot 90); a retirement 1800 s (wipe-disk 900). fleetd deletes a
// Workflow that never reported its first action within its global timeout.
//
// # The installer image
//
// The installed Talos fetches its config from the URL its kernel
// arguments' talos.config= names, with ${code} replaced by the install code
// the install action writes to META. So the class's installer image must
// carry
//
//	talos.config=https://fleetd.example:8443/config/${code}
//
// (fleetd's FLEET_PUBLIC_URL, then /config/${code}); see examples/install,
// and examples/talos/schematic.yaml, the Image Factory schematic that
// carries it.
package templates
