// Package disksafe finds a node's declared install disk by its serial and
// wipes it only when it is provably that disk, in a boot that passed
// attestation and holds the run's install code.
//
// A run declares install_disk (a /dev path, such as /dev/sda or
// /dev/disk/by-id/nvme-X) and install_disk_serial (a Target). The package
// does three things with it:
//
//   - Judge judges a Layout (the machine's disks as Read saw them, and the
//     kernel name install_disk resolves to) for a serial, and returns the
//     one disk to wipe or a refusal. It is pure: it reads nothing, so a
//     Layout written by hand is judged the same.
//   - Check reads the disks once, for the Target's install_disk, and adds
//     the attested-boot gate (CheckCode) to Judge: this boot's record must
//     say it passed attestation and hold the install code whose SHA-256 the
//     Workflow carries.
//   - Wipe judges as Check does, opens the disk exclusively, judges again
//     with it open, records the wipe for the install step, and erases every
//     partition table and file system signature on it.
//
// The install action's guard, CheckWiped, refuses an install unless this
// boot's wipe-disk wiped that disk. Pulling the installer image and running
// the installer are the actions' own (examples/wipe-disk,
// examples/install). ReadGPT reads a GUID partition table, within bounds
// that keep every partition it accepts inside the disk.
//
// # Safety
//
// Nothing defaults to wiping. The zero Target, a nil Boot record, an empty
// serial or disk: each is a refusal. Check judges in this order, and the
// first that holds is the answer (each is a *Refusal; errors.Is finds the
// sentinel). The lines are the runbook's, as the wipe-disk action prints
// them: Wipe's refusals begin "wipe: " (Refusal.Op); Judge's, Check's and
// CheckCode's carry no operation, and the caller prints its own.
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
// <disk> is install_disk as the Workflow writes it, <name> the kernel name
// it resolves to through /dev links ("missing" when none), <serial> the
// declared serial, <other> the kernel name of the disk that reports (or may
// report) it, and <place>/<serial2> what two disagreeing places of that disk
// say. When the disks that report the serial are the paths of one
// multipath logical unit, the ErrSerialAmbiguous line says so. On success
// Wipe returns
//
//	wipe: <disk> reports the serial <serial>
//
// A disk reports a serial only when every place the kernel or udev exposes
// one for it agrees (Disk.Sources): udev's "_" for blanks and odd
// characters is no disagreement, any other difference is. A disk whose
// places disagree reports no serial, and while one of them says the
// declared serial, the wipe is refused (ErrSerialConflict). A disk whose
// udev record exists and cannot be read may report any serial, and refuses
// every wipe (ErrUdevUnreadable). A flag that cannot be read is unknown,
// never set, and refuses with its own line.
//
// Past the judgement Wipe refuses, with nothing wiped, a disk the kernel
// will not open exclusively (ErrInUse: mounted, or held by RAID, LVM or
// swap), a device that is not the one judged (ErrChanged), and a wipe it
// cannot record (ErrRecord). Once it writes, a failure is ErrWipeFailed.
//
// # This boot's attestation
//
// The HookOS agent writes a BootRecord (WriteBootRecord) after each
// attestation: this boot's ID (BootID), whether it passed, and the install
// code fleetd answered, in DefaultBootDir (a tmpfs, empty at each boot),
// mode 0600. A Workflow carries only the code's SHA-256 (CodeSHA256,
// Target.CodeSHA256), never the code. Install codes are secrets: no error,
// String, GoString or log line of this package holds one.
//
// # Resumed runs
//
// Wipe records this boot's ID, the disk and whether the wipe finished
// (WipeRecord) in the directory the run's actions share (DefaultStateDir).
// CheckWiped refuses an install unless that record is of this boot and of
// the same disk, wiped to the end; a run resumed at install in a new boot
// is refused with ErrResumedRun:
//
//	install: this run resumed in a new boot after wipe-disk; nothing installed; set desired_action to provision
//
// # Which disks are listed
//
// List lists whole disks only: sd*, vd*, xvd*, hd*, nvme<N>n<M> and
// mmcblk<N>, and loop devices with a backing file only when Config.Loop is
// set. Partitions, ram, zram, dm, md, sr, nbd, hidden NVMe paths and MMC
// boot areas are never listed, so never wiped.
//
// # Privileges and platforms
//
// Listing and judging read sysfs, the udev database and /dev through an
// fs.FS (Config.Root), need no privileges, and work on any GOOS against a
// given tree. Wipe needs root and is implemented on Linux only: elsewhere
// it returns ErrUnsupported after the judgement, wiping nothing. The
// action's container needs the host's /dev, /sys, /run/udev, /run/fleet
// and the run's shared /workflow (see examples/wipe-disk).
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
//	t := disksafe.Target{Disk: "/dev/sda", Serial: "S3Z9NB0K123456A", CodeSHA256: sum}
//	w, err := disksafe.Wipe(ctx, t, boot, nil)
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
