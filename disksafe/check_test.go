package disksafe

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
	"github.com/google/go-cmp/cmp"
)

const testCode = "ic-7Q2fWz9kLm4xR8tB"

func goodBoot() Boot {
	return Boot{ID: disksafetest.BootID, Record: &BootRecord{BootID: disksafetest.BootID, Attested: true, Code: testCode}}
}

// bootWith is goodBoot with its record changed by edit.
func bootWith(edit func(r *BootRecord)) Boot {
	b := goodBoot()
	edit(b.Record)
	return b
}

// TestCheck judges each tree in an attested boot with Check, and the Layout
// Check read with Judge, which must agree: a wipe of the disk text names
// (want is nil), or a refusal (a *Refusal) and its text, which never shows
// the install code, and the multipath LUN it names. The boot's refusals are
// TestCheckCode's.
func TestCheck(t *testing.T) {
	const wwn = "5000c500a1b2c3d4"
	// sas is two paths, through two hosts, of one SAS disk.
	sas := func() *disksafetest.Tree {
		return disksafetest.NewTree(sasDisk("sda", "8:0", "ZA1234AB", wwn, 2), sasDisk("sdb", "8:16", "ZA1234AB", wwn, 3))
	}
	lun7 := disksafetest.NewTree()
	for i, n := range []string{"sda", "sdb", "sdc", "sdd"} {
		lun7.Add(disksafetest.Disk{Name: n, Dev: fmt.Sprintf("8:%d", 16*i), Sectors: 100, Udev: "E:ID_SCSI_SERIAL=LUN7\n"})
	}
	s1 := disksafetest.SATADisk("sda", "8:0", "S1")
	s1Dir := "sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda"
	two := func() *disksafetest.Tree {
		return disksafetest.NewTree(s1, disksafetest.SATADisk("sdb", "8:16", "S2"))
	}
	// sata is a SATA disk whose udev record is udev.
	sata := func(name, dev, serial, udev string) disksafetest.Disk {
		return withUdev(disksafetest.SATADisk(name, dev, serial), udev)
	}
	sda, nvme := Target{Disk: "/dev/sda", Serial: "S1"}, Target{Disk: "/dev/nvme0n1", Serial: "S64DNX0R123456"}
	tests := []struct {
		name  string
		tr    *disksafetest.Tree
		fail  map[string]error // reads that fail (faultFS)
		tg    Target
		want  error  // nil: the wipe is allowed
		cause error  // what errors.Is also finds; nil: not checked
		text  string // the refusal's text, or the disk chosen
		lun   *MultipathLUN
	}{
		{name: "SATA by kernel name", tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S5Y2NX0R123456"), disksafetest.USBStick("sdb", "8:16", "USB1")),
			tg: Target{Disk: "/dev/sda", Serial: "S5Y2NX0R123456"}, text: "sda"},
		{name: "SATA by-id link, serial with blanks",
			tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S5Y2NX0R123456")).Link("dev/disk/by-id/ata-Samsung_SSD_870_EVO_1TB_S5Y2NX0R123456", "../../sda"),
			tg: Target{Disk: "/dev/disk/by-id/ata-Samsung_SSD_870_EVO_1TB_S5Y2NX0R123456", Serial: " S5Y2NX0R123456\n"}, text: "sda"},
		{name: "NVMe, its serial padded in sysfs and trimmed in udev", tr: disksafetest.NewTree(disksafetest.NVMeDisk("nvme0n1", "259:0", "S64DNX0R123456"), disksafetest.SATADisk("sda", "8:0", "OTHER")),
			tg: Target{Disk: "/dev/nvme0n1", Serial: "S64DNX0R123456", Code: testCode}, text: "nvme0n1"},
		{name: "virtio", tr: disksafetest.NewTree(disksafetest.VirtioDisk("vda", "254:0", "fleet-vd-0001"), disksafetest.VirtioDisk("vdb", "254:16", "fleet-vd-0002")),
			tg: Target{Disk: "/dev/vdb", Serial: "fleet-vd-0002"}, text: "vdb"},
		{name: "eMMC", tr: disksafetest.NewTree(disksafetest.EMMC("mmcblk1", "179:8", "0x0badf00d"), disksafetest.SDCard("mmcblk0", "179:0", "0x1234abcd")),
			tg: Target{Disk: "/dev/mmcblk1", Serial: "0x0badf00d"}, text: "mmcblk1"},
		{name: "no serial declared", tr: two(), tg: Target{Disk: "/dev/sda"}, want: ErrNoSerial, text: "no install disk serial is declared"},
		{name: "blank serial declared", tr: two(), tg: Target{Disk: "/dev/sda", Serial: " \t"}, want: ErrNoSerial, text: "no install disk serial is declared"},
		{name: "zero target", tr: two(), want: ErrNoSerial, text: "no install disk serial is declared"},
		{name: "no disk declared", tr: two(), tg: Target{Serial: "S1"}, want: ErrNoInstallDisk, text: "no install disk is declared"},
		{name: "disk not under /dev", tr: two(), tg: Target{Disk: "sda", Serial: "S1"}, want: ErrBadInstallDisk, text: "the install disk sda is not a path under /dev"},
		{name: "no disk reports the serial", tr: two(), tg: Target{Disk: "/dev/sda", Serial: "S9"}, want: ErrSerialNotFound, text: "no disk reports the serial S9"},
		{name: "serial differs in case", tr: two(), tg: Target{Disk: "/dev/sda", Serial: "s1"}, want: ErrSerialNotFound, text: "no disk reports the serial s1"},
		{name: "the one disk reports another serial", tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1")),
			tg: Target{Disk: "/dev/sda", Serial: "S3"}, want: ErrSerialNotFound, text: "no disk reports the serial S3"},
		{name: "no disks at all", tr: disksafetest.NewTree(), tg: sda, want: ErrSerialNotFound, text: "no disk reports the serial S1"},
		{name: "two disks with one serial", tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1"), disksafetest.NVMeDisk("nvme0n1", "259:0", "S1")),
			tg: sda, want: ErrSerialAmbiguous, text: "more than one disk reports the serial S1"},
		{name: "two disks with one serial in different places",
			tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1"), disksafetest.Disk{Name: "sdb", Dev: "8:16", Sectors: 100, Udev: "E:ID_SCSI_SERIAL=S1\n"}),
			tg: sda, want: ErrSerialAmbiguous, text: "more than one disk reports the serial S1"},
		{name: "two namespaces of one NVMe controller",
			tr: disksafetest.NewTree(disksafetest.NVMeDisk("nvme0n1", "259:0", "S64DNX0R123456"), disksafetest.NVMeDisk("nvme0n2", "259:1", "S64DNX0R123456")),
			tg: Target{Disk: "/dev/nvme0n1", Serial: "S64DNX0R123456"}, want: ErrSerialAmbiguous, text: "more than one disk reports the serial S64DNX0R123456"},
		{name: "a USB disk reports the serial too", tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1"), disksafetest.USBDisk("sdb", "8:16", "S1")),
			tg: sda, want: ErrSerialAmbiguous, text: "more than one disk reports the serial S1"},
		{name: "two paths of one SAS disk", tr: sas(), tg: Target{Disk: "/dev/sda", Serial: "ZA1234AB"}, want: ErrSerialAmbiguous,
			text: "more than one disk reports the serial ZA1234AB: sda and sdb are one multipath LUN (wwid naa." + wwn + ")",
			lun:  &MultipathLUN{Paths: []string{"sda", "sdb"}, WWN: "naa." + wwn}},
		{name: "two paths held by dm-multipath", tr: sas().Multipath("dm-0", "3"+wwn, "sda", "sdb"), tg: Target{Disk: "/dev/sdb", Serial: "ZA1234AB"}, want: ErrSerialAmbiguous,
			text: "more than one disk reports the serial ZA1234AB: sda and sdb are one multipath LUN (wwid naa." + wwn + ", multipath device dm-0)",
			lun:  &MultipathLUN{Paths: []string{"sda", "sdb"}, WWN: "naa." + wwn, Holder: "dm-0"}},
		{name: "four paths held by dm-multipath, no WWN", tr: lun7.Multipath("dm-0", "3600a0b80001234", "sda", "sdb", "sdc", "sdd"),
			tg: Target{Disk: "/dev/sda", Serial: "LUN7"}, want: ErrSerialAmbiguous,
			text: "more than one disk reports the serial LUN7: sda, sdb, sdc and sdd are one multipath LUN (multipath device dm-0)",
			lun:  &MultipathLUN{Paths: []string{"sda", "sdb", "sdc", "sdd"}, Holder: "dm-0"}},
		{name: "held by a device-mapper device that is not multipath",
			tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1"), withFile(disksafetest.SATADisk("sdb", "8:16", "S1"), "device/wwid", "naa.5002538e40ffffff\n")).
				Add(disksafetest.Disk{Name: "dm-0", Dev: "253:0", Sectors: 100, Files: map[string]string{"dm/uuid": "LVM-abc\n", "slaves/sda": "", "slaves/sdb": ""}}),
			tg: Target{Disk: "/dev/sdb", Serial: "S1"}, want: ErrSerialAmbiguous, text: "more than one disk reports the serial S1"},
		{name: "a multipath LUN and another disk", tr: sas().Add(sasDisk("sdc", "8:32", "ZA1234AB", "5000c500a1b2ffff", 4)),
			tg: Target{Disk: "/dev/sdb", Serial: "ZA1234AB"}, want: ErrSerialAmbiguous, text: "more than one disk reports the serial ZA1234AB"},
		{name: "slots swapped", tr: two(), tg: Target{Disk: "/dev/sda", Serial: "S2"}, want: ErrWrongDisk, text: "/dev/sda is sda, but the disk that reports S2 is sdb"},
		{name: "by-id link to the wrong disk",
			tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1"), disksafetest.SATADisk("sdb", "8:16", "S2")).Link("dev/disk/by-id/ata-S1", "../../sdb"),
			tg: Target{Disk: "/dev/disk/by-id/ata-S1", Serial: "S1"}, want: ErrWrongDisk, text: "/dev/disk/by-id/ata-S1 is sdb, but the disk that reports S1 is sda"},
		{name: "declared disk missing", tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1")),
			tg: Target{Disk: "/dev/sdb", Serial: "S1"}, want: ErrWrongDisk, text: "/dev/sdb is missing, but the disk that reports S1 is sda"},
		{name: "dangling by-id link", tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1")).Link("dev/disk/by-id/ata-S1", "../../sdq"),
			tg: Target{Disk: "/dev/disk/by-id/ata-S1", Serial: "S1"}, want: ErrWrongDisk, text: "/dev/disk/by-id/ata-S1 is missing, but the disk that reports S1 is sda"},
		{name: "declared a partition of the disk",
			tr: disksafetest.NewTree(disksafetest.Disk{Name: "sda", Dev: "8:0", Sectors: 100, Udev: "E:ID_SERIAL_SHORT=S1\n", Parts: []disksafetest.Part{{Name: "sda1", Dev: "8:1", Start: 2048, Size: 50}}}),
			tg: Target{Disk: "/dev/sda1", Serial: "S1"}, want: ErrWrongDisk, text: "/dev/sda1 is sda1, but the disk that reports S1 is sda"},
		{name: "a USB stick took the declared name", tr: disksafetest.NewTree(disksafetest.USBStick("sda", "8:0", "USB1"), disksafetest.SATADisk("sdb", "8:16", "S1")),
			tg: sda, want: ErrWrongDisk, text: "/dev/sda is sda, but the disk that reports S1 is sdb"},
		{name: "USB stick", tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1"), disksafetest.USBStick("sdb", "8:16", "USB1")),
			tg: Target{Disk: "/dev/sdb", Serial: "USB1"}, want: ErrRemovable, text: "/dev/sdb is removable"},
		{name: "SD card reader", tr: disksafetest.NewTree(disksafetest.SDReader("sdc", "8:32", "000000000819")),
			tg: Target{Disk: "/dev/sdc", Serial: "000000000819"}, want: ErrRemovable, text: "/dev/sdc is removable"},
		{name: "SD card", tr: disksafetest.NewTree(disksafetest.SDCard("mmcblk0", "179:0", "0x1234abcd")),
			tg: Target{Disk: "/dev/mmcblk0", Serial: "0x1234abcd"}, want: ErrRemovable, text: "/dev/mmcblk0 is removable"},
		{name: "USB hard disk, by its device path", tr: disksafetest.NewTree(disksafetest.USBDisk("sdb", "8:16", "WD-1")),
			tg: Target{Disk: "/dev/sdb", Serial: "WD-1"}, want: ErrUSB, text: "/dev/sdb is on USB"},
		{name: "USB hard disk, by udev alone", tr: disksafetest.NewTree(disksafetest.Disk{Name: "sdb", Dev: "8:16", Sectors: 100, Udev: "E:ID_BUS=usb\nE:ID_SERIAL_SHORT=WD-1\n"}),
			tg: Target{Disk: "/dev/sdb", Serial: "WD-1"}, want: ErrUSB, text: "/dev/sdb is on USB"},
		{name: "USB, by a USB device in its path", tr: disksafetest.NewTree().Add(disksafetest.Disk{
			Name: "sdb", Dev: "8:16", Sectors: 100, Udev: "E:ID_SERIAL_SHORT=WD-1\n",
			SysPath: "devices/platform/xhci-hcd.0.auto/3-1.4/3-1.4:1.0/host7/target7:0:0/7:0:0:0/block/sdb",
		}), tg: Target{Disk: "/dev/sdb", Serial: "WD-1"}, want: ErrUSB, text: "/dev/sdb is on USB"},
		{name: "read-only", tr: disksafetest.NewTree(disksafetest.Disk{Name: "sda", Dev: "8:0", Sectors: 100, RO: "1", Udev: "E:ID_SERIAL_SHORT=S1\n"}),
			tg: sda, want: ErrReadOnly, text: "/dev/sda is read-only"},
		{name: "loop device not asked for", tr: disksafetest.NewTree(disksafetest.LoopDisk("loop0", "7:0", "L0")),
			tg: Target{Disk: "/dev/loop0", Serial: "L0"}, want: ErrSerialNotFound, text: "no disk reports the serial L0"},
		{name: "SATA: VPD page 0x80 and udev disagree", tr: disksafetest.NewTree(sata("sda", "8:0", "S1", "E:ID_BUS=ata\nE:ID_SERIAL_SHORT=S9\n")), tg: sda,
			want: ErrSerialConflict, text: "sda reports the serial S1 in /sys/block/sda/device/vpd_pg80 but S9 in udev's ID_SERIAL_SHORT; nothing wiped"},
		{name: "SATA: declared as udev says it", tr: disksafetest.NewTree(sata("sda", "8:0", "S1", "E:ID_BUS=ata\nE:ID_SERIAL_SHORT=S9\n")),
			tg: Target{Disk: "/dev/sda", Serial: "S9"}, want: ErrSerialConflict,
			text: "sda reports the serial S9 in udev's ID_SERIAL_SHORT but S1 in /sys/block/sda/device/vpd_pg80; nothing wiped"},
		{name: "NVMe: controller serial and udev disagree",
			tr: disksafetest.NewTree(withUdev(disksafetest.NVMeDisk("nvme0n1", "259:0", "S64DNX0R123456"), "E:ID_SERIAL_SHORT=S64DNX0R999999\n")), tg: nvme, want: ErrSerialConflict,
			text: "nvme0n1 reports the serial S64DNX0R123456 in /sys/block/nvme0n1/device/serial but S64DNX0R999999 in udev's ID_SERIAL_SHORT; nothing wiped"},
		{name: "SAS: page 0x80 and udev's ID_SCSI_SERIAL disagree",
			tr: disksafetest.NewTree(withFile(sasDisk("sda", "8:0", "ZA1234AB", wwn, 2), "device/vpd_pg80", disksafetest.VPD80("ZA9999ZZ"))),
			tg: Target{Disk: "/dev/sda", Serial: "ZA1234AB"}, want: ErrSerialConflict,
			text: "sda reports the serial ZA1234AB in udev's ID_SCSI_SERIAL but ZA9999ZZ in /sys/block/sda/device/vpd_pg80; nothing wiped"},
		{name: "case counts", tr: disksafetest.NewTree(sata("sda", "8:0", "s1", "E:ID_SERIAL_SHORT=S1\n")), tg: sda,
			want: ErrSerialConflict, text: "sda reports the serial S1 in udev's ID_SERIAL_SHORT but s1 in /sys/block/sda/device/vpd_pg80; nothing wiped"},
		{name: "another disk that may be the declared one", tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1"), sata("sdb", "8:16", "S1", "E:ID_SERIAL_SHORT=S7\n")),
			tg: sda, want: ErrSerialConflict, text: "sdb reports the serial S1 in /sys/block/sdb/device/vpd_pg80 but S7 in udev's ID_SERIAL_SHORT; nothing wiped"},
		{name: "another disk that may be the declared one, and no other",
			tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S2"), sata("sdb", "8:16", "S1", "E:ID_SERIAL_SHORT=S7\n")), tg: Target{Disk: "/dev/sdb", Serial: "S1"},
			want: ErrSerialConflict, text: "sdb reports the serial S1 in /sys/block/sdb/device/vpd_pg80 but S7 in udev's ID_SERIAL_SHORT; nothing wiped"},
		{name: "another disk's disagreement on other serials",
			tr: disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1"), sata("sdb", "8:16", "S2", "E:ID_SERIAL_SHORT=S3\n")), tg: sda, text: "sda"},
		{name: "the declared disk disagrees on other serials, and another reports it",
			tr: disksafetest.NewTree(sata("sda", "8:0", "S2", "E:ID_SERIAL_SHORT=S3\n"), disksafetest.SATADisk("sdb", "8:16", "S1")), tg: sda,
			want: ErrWrongDisk, text: "/dev/sda is sda, but the disk that reports S1 is sdb"},
		{name: "the declared disk disagrees on other serials, and none reports it", tr: disksafetest.NewTree(sata("sda", "8:0", "S2", "E:ID_SERIAL_SHORT=S3\n")),
			tg: sda, want: ErrSerialNotFound, text: "no disk reports the serial S1"},
		{name: "blanks inside the serial, as the kernel and udev spell them",
			tr: disksafetest.NewTree(sata("sda", "8:0", "WD WX12  A34/5", "E:ID_BUS=ata\nE:ID_SERIAL_SHORT=WD_WX12_A34_5\n")),
			tg: Target{Disk: "/dev/sda", Serial: "WD WX12  A34/5"}, text: "sda"},
		{name: "blanks inside the serial, declared as udev spells it",
			tr: disksafetest.NewTree(sata("sda", "8:0", "WD WX12  A34/5", "E:ID_BUS=ata\nE:ID_SERIAL_SHORT=WD_WX12_A34_5\n")),
			tg: Target{Disk: "/dev/sda", Serial: "WD_WX12_A34_5"}, text: "sda"},
		{name: "SAS: udev's ID_SERIAL_SHORT is the WWN, not a serial", tr: disksafetest.NewTree(sasDisk("sda", "8:0", "ZA1234AB", wwn, 2)),
			tg: Target{Disk: "/dev/sda", Serial: "ZA1234AB"}, text: "sda"},
		{name: "SAS: the WWN names no disk", tr: disksafetest.NewTree(sasDisk("sda", "8:0", "ZA1234AB", wwn, 2)),
			tg: Target{Disk: "/dev/sda", Serial: wwn}, want: ErrSerialNotFound, text: "no disk reports the serial " + wwn},
		// Reads that fail, attributes that are missing or hold what the
		// kernel never writes: an unknown flag is never reported as set.
		{name: "removable: read error", tr: disksafetest.NewTree(s1), fail: map[string]error{"sys/block/sda/removable": syscall.EIO}, tg: sda,
			want: ErrRemovableUnreadable, cause: syscall.EIO,
			text: "/dev/sda's removable attribute cannot be read (/sys/block/sda/removable: input/output error); nothing wiped"},
		{name: "removable: neither 0 nor 1", tr: func() *disksafetest.Tree { d := s1; d.Removable = "2"; return disksafetest.NewTree(d) }(), tg: sda, want: ErrRemovableUnreadable,
			text: `/dev/sda's removable attribute cannot be read (/sys/block/sda/removable holds "2", not 0 or 1); nothing wiped`},
		{name: "removable: missing", tr: disksafetest.NewTree(s1).Rm(s1Dir + "/removable"), tg: sda,
			want: ErrRemovableUnreadable, cause: fs.ErrNotExist,
			text: "/dev/sda's removable attribute cannot be read (/sys/block/sda/removable: file does not exist); nothing wiped"},
		{name: "removable: empty", tr: disksafetest.NewTree(s1).File(s1Dir+"/removable", "\n"), tg: sda,
			want: ErrRemovableUnreadable, text: `/dev/sda's removable attribute cannot be read (/sys/block/sda/removable holds "", not 0 or 1); nothing wiped`},
		{name: "removable: unreadable, but an SD card", tr: disksafetest.NewTree(disksafetest.SDCard("mmcblk0", "179:0", "0x1234abcd")),
			fail: map[string]error{"sys/block/mmcblk0/removable": syscall.EIO}, tg: Target{Disk: "/dev/mmcblk0", Serial: "0x1234abcd"},
			want: ErrRemovable, text: "/dev/mmcblk0 is removable"},
		{name: "MMC type unreadable", tr: disksafetest.NewTree(disksafetest.EMMC("mmcblk1", "179:8", "0x0badf00d")), fail: map[string]error{"sys/block/mmcblk1/device/type": syscall.EACCES},
			tg: Target{Disk: "/dev/mmcblk1", Serial: "0x0badf00d"}, want: ErrRemovableUnreadable, cause: fs.ErrPermission,
			text: "/dev/mmcblk1's removable attribute cannot be read (/sys/block/mmcblk1/device/type: permission denied); nothing wiped"},
		{name: "MMC type unknown", tr: disksafetest.NewTree(withFile(disksafetest.EMMC("mmcblk1", "179:8", "0x0badf00d"), "device/type", "SDIO\n")),
			tg: Target{Disk: "/dev/mmcblk1", Serial: "0x0badf00d"}, want: ErrRemovableUnreadable,
			text: `/dev/mmcblk1's removable attribute cannot be read (/sys/block/mmcblk1/device/type holds "SDIO", not MMC or SD); nothing wiped`},
		{name: "ro: read error", tr: disksafetest.NewTree(s1), fail: map[string]error{"sys/block/sda/ro": syscall.EIO}, tg: sda,
			want: ErrReadOnlyUnreadable, cause: syscall.EIO, text: "/dev/sda's ro attribute cannot be read (/sys/block/sda/ro: input/output error); nothing wiped"},
		{name: "ro: neither 0 nor 1", tr: func() *disksafetest.Tree { d := s1; d.RO = "yes"; return disksafetest.NewTree(d) }(), tg: sda, want: ErrReadOnlyUnreadable,
			text: `/dev/sda's ro attribute cannot be read (/sys/block/sda/ro holds "yes", not 0 or 1); nothing wiped`},
		{name: "device path: read error", tr: disksafetest.NewTree(s1), fail: map[string]error{"sys/block/sda": syscall.EIO}, tg: sda,
			want: ErrDevicePathUnreadable, cause: syscall.EIO,
			text: "/dev/sda's device path cannot be read, so USB cannot be ruled out (/sys/block/sda: input/output error); nothing wiped"},
		{name: "device path: outside /sys", tr: func() *disksafetest.Tree {
			tr := disksafetest.NewTree(disksafetest.Disk{Name: "sda", Dev: "8:0", Sectors: 100, Udev: "E:ID_SERIAL_SHORT=S1\n"})
			tr.Link("sys/block/sda", "../../tmp/sda")
			for _, f := range []string{"dev", "size", "removable", "ro"} {
				tr.FS["tmp/sda/"+f] = tr.FS["sys/devices/virtual/block/sda/"+f]
			}
			return tr
		}(), tg: sda, want: ErrDevicePathUnreadable,
			text: `/dev/sda's device path cannot be read, so USB cannot be ruled out (/sys/block/sda links to "../../tmp/sda", outside /sys); nothing wiped`},
		{name: "device path: unreadable, but udev says USB",
			tr:   disksafetest.NewTree(disksafetest.Disk{Name: "sda", Dev: "8:0", Sectors: 100, Udev: "E:ID_BUS=usb\nE:ID_SERIAL_SHORT=S1\n"}),
			fail: map[string]error{"sys/block/sda": syscall.EIO}, tg: sda, want: ErrUSB, text: "/dev/sda is on USB"},
		// Another disk's unknown flags and device path block nothing.
		{name: "another disk's flags and device path: read errors", tr: two(), tg: sda, text: "sda",
			fail: map[string]error{"sys/block/sdb/removable": syscall.EIO, "sys/block/sdb/ro": syscall.EIO, "sys/block/sdb": syscall.EIO}},
		{name: "another disk's record fails", tr: two(), fail: map[string]error{"run/udev/data/b8:16": syscall.EIO}, tg: sda,
			want: ErrUdevUnreadable, cause: syscall.EIO, text: "sdb's udev record cannot be read (/run/udev/data/b8:16: input/output error); nothing wiped"},
		{name: "the declared disk's record fails", tr: two(), fail: map[string]error{"run/udev/data/b8:0": syscall.EACCES}, tg: sda,
			want: ErrUdevUnreadable, cause: fs.ErrPermission, text: "sda's udev record cannot be read (/run/udev/data/b8:0: permission denied); nothing wiped"},
		{name: "another disk's device number fails", tr: two(), fail: map[string]error{"sys/block/sdb/dev": syscall.EIO}, tg: sda,
			want: ErrUdevUnreadable, cause: syscall.EIO,
			text: "sdb's udev record cannot be read (its device number is unknown: /sys/block/sdb/dev: input/output error); nothing wiped"},
		{name: "another disk's device number is garbage",
			tr: two().File("sys/devices/pci0000:00/0000:00:17.0/ata2/host1/target1:0:0/1:0:0:0/block/sdb/dev", "8-16\n"), tg: sda, want: ErrUdevUnreadable,
			text: `sdb's udev record cannot be read (its device number is unknown: /sys/block/sdb/dev holds "8-16", not major:minor); nothing wiped`},
		{name: "another disk has no record", tr: two().Rm("run/udev/data/b8:16"), tg: sda, text: "sda"},
		{name: "no disk has a record", tr: two().Rm("run/udev/data/b8:0", "run/udev/data/b8:16"), tg: sda, text: "sda"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, d, err := Check(tt.tg, goodBoot(), &Config{Root: faultFS{tt.tr.FS, tt.fail}})
			if err != nil && !errors.As(err, new(*Refusal)) {
				t.Fatalf("Check: %v", err)
			}
			if l.InstallDisk != tt.tg.Disk {
				t.Fatalf("Check read the layout of %q, not of %q", l.InstallDisk, tt.tg.Disk)
			}
			if jd, jerr := Judge(l, tt.tg.Serial); jd.Name != d.Name || fmt.Sprint(jerr) != fmt.Sprint(err) {
				t.Errorf("Judge = %q, %v; Check = %q, %v", jd.Name, jerr, d.Name, err)
			}
			if tt.want == nil {
				if err != nil || d.Name != tt.text {
					t.Fatalf("Check = %q, %v; want %s", d.Name, err, tt.text)
				}
			} else if !errors.Is(err, tt.want) || (tt.cause != nil && !errors.Is(err, tt.cause)) || err.Error() != tt.text || d.Name != "" {
				t.Fatalf("Check = %q, %v\nwant a refusal of %v, %v:\n%q", d.Name, err, tt.want, tt.cause, tt.text)
			}
			var r *Refusal
			if errors.As(err, &r) && !cmp.Equal(r.LUN, tt.lun) {
				t.Errorf("Refusal.LUN = %+v, want %+v", r.LUN, tt.lun)
			}
			for _, set := range []error{ErrRemovable, ErrReadOnly} {
				if set != tt.want && errors.Is(err, set) {
					t.Errorf("an unknown flag is reported as set: %v", err)
				}
			}
			if strings.Contains(fmt.Sprintf("%v %+v %#v", err, err, err), testCode) {
				t.Errorf("the refusal shows the install code: %v", err)
			}
		})
	}
}

func TestCheckLayoutOfAnotherDisk(t *testing.T) {
	tr := disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1"))
	l, err := Read("/dev/sdb", &Config{Root: tr.FS})
	if err != nil {
		t.Fatal(err)
	}
	d, err := check(l, Target{Disk: "/dev/sda", Serial: "S1"}, goodBoot())
	if err == nil {
		t.Fatalf("Check of a layout read for another path chose %s", d.Name)
	}
}

func TestTargetStringHidesCode(t *testing.T) {
	tg := Target{Disk: "/dev/sda", Serial: "S1", Code: testCode}
	r := BootRecord{BootID: disksafetest.BootID, Attested: true, Code: testCode}
	for _, s := range []string{
		fmt.Sprint(tg), fmt.Sprintf("%v %+v %#v %s", tg, tg, tg, tg),
		fmt.Sprint(r), fmt.Sprintf("%v %+v %#v %s", r, r, r, r),
		fmt.Sprintf("%v %+v", []any{tg, &tg}, []any{r, &r}),
	} {
		if strings.Contains(s, testCode) {
			t.Errorf("%q shows the install code", s)
		}
	}
	if want := "install_disk=/dev/sda install_disk_serial=S1 install_code=set"; tg.String() != want {
		t.Errorf("String = %q, want %q", tg.String(), want)
	}
}
