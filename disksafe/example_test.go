package disksafe_test

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/disksafe/disksafetest"
)

// machine is a fake root file system: an NVMe disk that reports serial
// S64DNX0R123456 and a USB stick, with a /dev/disk/by-id link.
func machine() fs.FS {
	return disksafetest.NewTree().
		Add(disksafetest.NVMeDisk("nvme0n1", "259:0", "S64DNX0R123456")).
		Add(disksafetest.USBStick("sda", "8:0", "4C530001230815117283")).
		Link("dev/disk/by-id/nvme-Samsung_SSD_980_1TB_S64DNX0R123456", "../../nvme0n1").FS
}

func ExampleCheck() {
	cfg := &disksafe.Config{Root: machine()}
	boot := disksafe.Boot{
		ID:     "6f1d3c52-8a0e-4c1b-9d7e-2b5a4f6e8c90",
		Record: &disksafe.BootRecord{BootID: "6f1d3c52-8a0e-4c1b-9d7e-2b5a4f6e8c90", Attested: true, Code: "ic-secret"},
	}
	for _, t := range []disksafe.Target{
		{Disk: "/dev/disk/by-id/nvme-Samsung_SSD_980_1TB_S64DNX0R123456", Serial: "S64DNX0R123456"},
		{Disk: "/dev/sda", Serial: "S64DNX0R123456"},
		{Disk: "/dev/sda", Serial: "4C530001230815117283"},
		{Disk: "/dev/nvme0n1", Serial: "S64DNX0R000000"},
		{Disk: "/dev/nvme0n1"},
	} {
		_, d, err := disksafe.Check(t, boot, cfg)
		switch {
		case errors.Is(err, disksafe.ErrWrongDisk):
			fmt.Println("check:", err, "(wrong disk)")
		case err != nil:
			fmt.Println("check:", err)
		default:
			fmt.Println("would wipe", d.Name, "of", d.Size>>30, "GiB")
		}
	}
	// Output:
	// would wipe nvme0n1 of 476 GiB
	// check: /dev/sda is sda, but the disk that reports S64DNX0R123456 is nvme0n1 (wrong disk)
	// check: /dev/sda is removable
	// check: no disk reports the serial S64DNX0R000000
	// check: no install disk serial is declared
}

// Judge needs no machine: a Layout written by hand is judged as one Read.
func ExampleJudge() {
	l := disksafe.Layout{
		Disks: []disksafe.Disk{
			{Name: "sda", Dev: "8:0", SysPath: "/sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda",
				Serial: "S5Y2NX0R123456", Serials: []string{"S5Y2NX0R123456"}, SerialsAgree: true,
				Sources: []disksafe.SerialSource{{Where: "/sys/block/sda/device/vpd_pg80", Serial: "S5Y2NX0R123456"}}},
			{Name: "sdb", Dev: "8:16", SysPath: "/sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb",
				USB: true, Serial: "USB1", Serials: []string{"USB1"}, SerialsAgree: true,
				Sources: []disksafe.SerialSource{{Where: "udev's ID_SERIAL_SHORT", Serial: "USB1"}}},
		},
		InstallDisk:     "/dev/sda",
		InstallDiskName: "sda",
	}
	d, err := disksafe.Judge(l, "S5Y2NX0R123456")
	fmt.Println(d.Name, err)
	_, err = disksafe.Judge(l, "USB1")
	fmt.Println(err)
	// Output:
	// sda <nil>
	// /dev/sda is sda, but the disk that reports USB1 is sdb
}

func ExampleWiped() {
	fmt.Println(disksafe.Wiped{Disk: "/dev/sda", Name: "sda", Serial: "S5Y2NX0R123456"})
	// Output:
	// wipe: /dev/sda reports the serial S5Y2NX0R123456
}
