// Package disksafe finds a node's declared install disk by its serial and
// wipes it only when it is provably that disk; it also judges the install
// step that follows the wipe.
//
// A run declares install_disk (a /dev path, such as /dev/sda or
// /dev/disk/by-id/nvme-X) and install_disk_serial. Check wipes nothing on
// its own: it returns the one disk to wipe, or a refusal whose text is the
// runbook's line. Wipe judges again, pulls the installer image, opens the
// disk exclusively, erases its signatures and records the wipe. Install runs
// the installer only in the boot that wiped.
//
// # Safety
//
// Nothing defaults to wiping. The zero Target, a nil Boot record, an empty
// serial or disk: each is a refusal. Check judges in this order, and the
// first that holds is the answer (each is an *Refusal; errors.Is finds the
// sentinel):
//
//	ErrNoSerial             wipe: no install disk serial is declared
//	ErrNoInstallDisk        wipe: no install disk is declared
//	ErrBadInstallDisk       wipe: the install disk <disk> is not a path under /dev
//	ErrNotAttested          wipe: this boot did not pass attestation
//	ErrNoInstallCode        wipe: no install code
//	ErrInstallCodeMismatch  wipe: the Workflow's install code is not the one this boot received
//	ErrUdevUnreadable       wipe: <other>'s udev record cannot be read (<reason>); nothing wiped
//	ErrSerialConflict       wipe: <other> reports the serial <serial> in <place> but <serial2> in <place2>; nothing wiped
//	ErrSerialNotFound       wipe: no disk reports the serial <serial>
//	ErrSerialAmbiguous      wipe: more than one disk reports the serial <serial>
//	ErrWrongDisk            wipe: <disk> is <name>, but the disk that reports <serial> is <other>
//	ErrRemovable            wipe: <disk> is removable
//	ErrRemovableUnreadable  wipe: <disk>'s removable attribute cannot be read (<reason>); nothing wiped
//	ErrUSB                  wipe: <disk> is on USB
//	ErrDevicePathUnreadable wipe: <disk>'s device path cannot be read, so USB cannot be ruled out (<reason>); nothing wiped
//	ErrReadOnly             wipe: <disk> is read-only
//	ErrReadOnlyUnreadable   wipe: <disk>'s ro attribute cannot be read (<reason>); nothing wiped
//
// In these lines <disk> is install_disk as the Workflow writes it,
// <name> the kernel name it resolves to through /dev links (sdb, nvme1n1,
// or sda1 for a partition; "missing" when it resolves to no block device),
// <serial> the declared serial, and <other> the kernel name of the one disk
// that reports it (ErrWrongDisk) or may report it (ErrSerialConflict,
// ErrUdevUnreadable); <place> and <place2> are two places of that disk
// that disagree (such as /sys/block/sdb/device/vpd_pg80 and udev's
// ID_SERIAL_SHORT), and <serial2> what the second says. When the disks that
// report the serial are the paths of one multipath logical unit (they
// share a WWN, or one dm-multipath device holds them), the
// ErrSerialAmbiguous line goes on to say so: "...: sda and sdb are one
// multipath LUN (wwid <wwn>, multipath device dm-0)". On success Wipe
// returns
//
//	wipe: <disk> reports the serial <serial>
//
// A disk's serial is known only when every place the kernel or udev
// exposes one for it agrees (see Disk.Sources and SerialSource: udev's
// spelling of blanks and odd characters as "_" is no disagreement, a case
// or any other difference is). A disk reports a serial when its places
// agree and one of them holds exactly that serial, so two disks that report
// it in different places are still two, and the wipe is refused. A disk
// whose places disagree reports no serial; while one of them says the
// declared serial, it may be the declared disk, and the wipe is refused
// with ErrSerialConflict, naming two of them. Another disk's disagreement
// over other serials refuses nothing. A disk without a udev record has
// nothing from udev; one whose record exists and cannot be read, or whose
// device number is unknown so its record cannot be found, may report any
// serial, and refuses every wipe while it is listed (ErrUdevUnreadable).
//
// Past the judgement, Wipe refuses with ErrPull ("wipe: the installer image
// <image> cannot be pulled (<reason>); nothing wiped") before it touches the
// disk, with ErrInUse when the kernel refuses an exclusive open (mounted,
// or held by RAID, LVM or swap), with ErrChanged when the device it opened
// is not the one it judged, and with ErrRecord when it cannot record the
// wipe. Once it writes, a failure is ErrWipeFailed. Wipe lists what it
// erases.
//
// # This boot's attestation
//
// The HookOS agent writes a BootRecord (WriteBootRecord) after each
// attestation: this boot's ID (/proc/sys/kernel/random/boot_id), whether
// the boot passed, and the install code fleetd answered. It lives in
// DefaultBootDir (/run/fleet, a tmpfs, empty at each boot), mode 0600. The
// wipe-disk action reads it (ReadBootRecord) and passes it to Check as a
// Boot with this boot's ID (BootID). A missing record, a record of another
// boot, or one that did not pass is ErrNotAttested; a pass without a code
// is ErrNoInstallCode. The record is the only place the code reaches the
// machine: a Workflow is readable by more than the machine it runs on, so
// it carries only the code's SHA-256 (install_code_sha256, Target.CodeSHA256,
// as CodeSHA256 computes it). When the Workflow carries one, the record's
// code must hash to it (compared in constant time), or the wipe is refused
// with ErrInstallCodeMismatch; a Workflow without one relies on the record
// alone. The install action judges the same with CheckCode before it runs
// the installer, and takes the code it gives the installed Talos from the
// record (Target.Code). Install codes are secrets: no error, String, log
// line or GoString of this package holds one.
//
// # Resumed runs
//
// Wipe records, in the directory the run's actions share (DefaultStateDir,
// /workflow, which the Template binds to the HookOS host's RAM-backed
// /run/fleet-workflow in every action), this boot's ID, the disk and
// whether the wipe finished (WipeRecord). Install refuses to run the
// installer unless that record is of this boot and says the same disk was
// wiped: a run that resumed at install in a new boot (whose RAM-backed
// /workflow is empty) is refused with ErrResumedRun,
//
//	install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision
//
// A failing installer's last lines come back, each prefixed "install: ",
// then "install: the installer failed; the lines above are its last
// output" (InstallerError). Success is "install: installed Talos to
// <disk>".
//
// # Which disks are listed
//
// List reads /sys/block (whole disks only) and lists sd*, vd*, xvd*, hd*,
// nvme<N>n<M> and mmcblk<N>; loop devices only with Config.Loop, and then
// only those with a backing file. Partitions, ram, zram, dm, md, sr, nbd and
// other kinds are never listed, nor hidden NVMe multipath paths, nor MMC
// boot and RPMB areas. A disk is on USB when its sysfs device path runs
// through a USB bus (a USB root hub or a USB device among its parents) or
// udev says ID_BUS=usb, and removable when the kernel
// says so or it is an SD card (MMC type SD). A flag that cannot be read, or
// whose attribute holds a value the kernel never writes, is unknown, not
// set: Check refuses the disk with its own line (ErrRemovableUnreadable,
// ErrDevicePathUnreadable, ErrReadOnlyUnreadable), never with the line of
// a set flag. Each disk also names the dm-multipath device that holds it,
// if any (Disk.Multipath), read from /sys/block/dm-N/slaves.
//
// # Privileges and platforms
//
// Listing and judging read sysfs, /run/udev/data and /dev through an fs.FS
// (Config.Root) and need no privileges; they work on any GOOS against a
// given tree. Wipe needs root (an exclusive open of a block device and its
// ioctls) and is implemented on Linux only: elsewhere it returns
// ErrUnsupported after the judgement, wiping nothing.
//
// # In a Tinkerbell action
//
// The action container needs the host's /dev, /sys, /run/udev (the udev
// database, read-only), /run/fleet (the boot record, read-only) and the
// directory the run's actions share at /workflow. See examples/wipe-disk
// and examples/templates.
//
// # Use
//
//	id, err := disksafe.BootID(nil)
//	// handle err
//	boot := disksafe.Boot{ID: id}
//	if rec, err := disksafe.ReadBootRecord(""); err == nil {
//		boot.Record = &rec
//	}
//	// sum is the Workflow's install_code_sha256
//	t := disksafe.Target{Disk: "/dev/sda", Serial: "S3Z9NB0K123456A", CodeSHA256: sum, InstallerImage: img}
//	w, err := disksafe.Wipe(ctx, t, boot, puller, nil)
//	if err != nil {
//		fmt.Println(err) // the runbook's line
//		os.Exit(1)
//	}
//	fmt.Println(w) // wipe: /dev/sda reports the serial S3Z9NB0K123456A
//
// Functions of this package are safe for concurrent use, but two Wipes of
// one disk at once are refused by the kernel's exclusive open, not by the
// package.
package disksafe
