package disksafe

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
	"github.com/google/go-cmp/cmp"
)

func TestListDiskKinds(t *testing.T) {
	// Each disk's places agree on one serial; want holds the rest of what
	// List says, beside the disk's name, number, size and sysfs path.
	tests := []struct {
		name string
		disk disksafetest.Disk
		loop bool
		want Disk
	}{
		{name: "SATA", disk: disksafetest.SATADisk("sda", "8:0", "S5Y2NX0R123456"), want: Disk{
			Sources: []SerialSource{{"/sys/block/sda/device/vpd_pg80", "S5Y2NX0R123456"}, {"udev's ID_SERIAL_SHORT", "S5Y2NX0R123456"}},
			WWN:     "naa.5002538e40a1b2c3", Model: "Samsung SSD 870", Transport: "ata",
		}},
		{name: "NVMe", disk: disksafetest.NVMeDisk("nvme0n1", "259:0", "S64DNX0R123456"), want: Disk{
			Sources: []SerialSource{{"/sys/block/nvme0n1/device/serial", "S64DNX0R123456"}, {"udev's ID_SERIAL_SHORT", "S64DNX0R123456"}},
			WWN:     "eui.002538b231b2c3d4", Model: "Samsung SSD 980 1TB", Transport: "nvme",
		}},
		{name: "virtio", disk: disksafetest.VirtioDisk("vda", "254:0", "fleet-vd-0001"),
			want: Disk{Sources: []SerialSource{{"/sys/block/vda/serial", "fleet-vd-0001"}}, Transport: "virtio"}},
		{name: "USB stick", disk: disksafetest.USBStick("sdb", "8:16", "4C530001230815117283"), want: Disk{
			Sources: []SerialSource{{"udev's ID_SERIAL_SHORT", "4C530001230815117283"}},
			Model:   "Ultra Fit", Transport: "usb", Removable: true, USB: true,
		}},
		{name: "USB hard disk", disk: disksafetest.USBDisk("sdc", "8:32", "WD-WX12A3456789"), want: Disk{
			Sources:   []SerialSource{{"/sys/block/sdc/device/vpd_pg80", "WD-WX12A3456789"}, {"udev's ID_SERIAL_SHORT", "WD-WX12A3456789"}},
			Transport: "usb", USB: true,
		}},
		{name: "SD card reader on USB", disk: disksafetest.SDReader("sdd", "8:48", "000000000819"), want: Disk{
			Sources: []SerialSource{{"udev's ID_SERIAL_SHORT", "000000000819"}},
			Model:   "SD/MMC Reader", Transport: "usb", Removable: true, USB: true,
		}},
		{name: "SD card", disk: disksafetest.SDCard("mmcblk0", "179:0", "0x1234abcd"),
			want: Disk{Sources: []SerialSource{{"/sys/block/mmcblk0/device/serial", "0x1234abcd"}}, Transport: "mmc", Removable: true}},
		{name: "eMMC", disk: disksafetest.EMMC("mmcblk1", "179:8", "0x0badf00d"),
			want: Disk{Sources: []SerialSource{{"/sys/block/mmcblk1/device/serial", "0x0badf00d"}}, Transport: "mmc"}},
		{name: "loop with a backing file", disk: disksafetest.LoopDisk("loop3", "7:3", "fleet-loop-3"), loop: true,
			want: Disk{Sources: []SerialSource{{"udev's ID_SERIAL_SHORT", "fleet-loop-3"}}, Transport: "loop", BackingFile: "/tmp/loop3.img"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := List(&Config{Root: disksafetest.NewTree(tt.disk).FS, Loop: tt.loop})
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Name, want.Dev, want.Size = tt.disk.Name, tt.disk.Dev, tt.disk.Sectors*512
			want.SysPath = "/sys/" + tt.disk.SysPath
			if tt.disk.SysPath == "" {
				want.SysPath = "/sys/devices/virtual/block/" + tt.disk.Name
			}
			want.Serial, want.Serials, want.SerialsAgree = want.Sources[0].Serial, []string{want.Sources[0].Serial}, true
			if diff := cmp.Diff([]Disk{want}, got); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListSkips(t *testing.T) {
	tr := disksafetest.NewTree().
		Add(disksafetest.SATADisk("sda", "8:0", "KEEP")).
		Add(disksafetest.Disk{Name: "loop0", Dev: "7:0", Sectors: 0}). // unused loop
		Add(disksafetest.LoopDisk("loop1", "7:1", "L1")).
		Add(disksafetest.Disk{Name: "zram0", Dev: "252:0", Sectors: 100, Files: map[string]string{"serial": "Z"}}).
		Add(disksafetest.Disk{Name: "dm-0", Dev: "253:0", Sectors: 100, Udev: "E:ID_SERIAL_SHORT=DM\n"}).
		Add(disksafetest.Disk{Name: "md0", Dev: "9:0", Sectors: 100}).
		Add(disksafetest.Disk{Name: "sr0", Dev: "11:0", Sectors: 100, Removable: "1"}).
		Add(disksafetest.Disk{Name: "nbd0", Dev: "43:0", Sectors: 100}).
		Add(disksafetest.Disk{Name: "ram0", Dev: "1:0", Sectors: 100}).
		Add(disksafetest.Disk{Name: "mmcblk0boot0", Dev: "179:8", Sectors: 100}).
		Add(disksafetest.Disk{Name: "nvme0c0n1", Dev: "259:9", Sectors: 100, Files: map[string]string{"hidden": "1"}}).
		Add(disksafetest.Disk{Name: "nvme1n1", Dev: "259:10", Sectors: 100, Files: map[string]string{"hidden": "1"}})
	names := func(cfg *Config) []string {
		ds, err := List(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, d := range ds {
			n = append(n, d.Name)
		}
		return n
	}
	if got := names(&Config{Root: tr.FS}); !cmp.Equal(got, []string{"sda"}) {
		t.Errorf("List = %q, want [sda]", got)
	}
	if got := names(&Config{Root: tr.FS, Loop: true}); !cmp.Equal(got, []string{"loop1", "sda"}) {
		t.Errorf("List with Loop = %q, want [loop1 sda]", got)
	}
}

func TestListOddValues(t *testing.T) {
	// Unreadable and unexpected attributes: the disk is still listed, its
	// flags are unknown (not set), and bad serials are left out.
	tr := disksafetest.NewTree().Add(disksafetest.Disk{
		Name: "sda", Dev: "8:0", Sectors: 100, Removable: "2", RO: "yes",
		Files: map[string]string{
			"device/serial":   "bad\x01serial",
			"device/vpd_pg80": "\x00\x83\x00\x04ABCD", // not page 0x80
			"serial":          "",
		},
		Udev: "E:ID_SERIAL_SHORT=" + string(make([]byte, 300)) + "\n",
	})
	delete(tr.FS, "sys/devices/virtual/block/sda/size")
	tr.File("sys/devices/virtual/block/sda/dev", "garbage\n")
	got, err := List(&Config{Root: tr.FS})
	if err != nil {
		t.Fatal(err)
	}
	want := []Disk{{
		Name: "sda", SerialsAgree: true, SysPath: "/sys/devices/virtual/block/sda",
		RemovableErr: errors.New(`/sys/block/sda/removable holds "2", not 0 or 1`),
		ReadOnlyErr:  errors.New(`/sys/block/sda/ro holds "yes", not 0 or 1`),
		UdevErr:      errors.New(`its device number is unknown: /sys/block/sda/dev holds "garbage", not major:minor`),
	}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b error) bool { return errText(a) == errText(b) })); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func TestListNoSysBlock(t *testing.T) {
	tr := disksafetest.NewTree().Rm("sys/block", "sys/class/block")
	if _, err := List(&Config{Root: tr.FS}); err == nil {
		t.Fatal("List without /sys/block gave no error")
	}
}

func TestResolve(t *testing.T) {
	tr := disksafetest.NewTree().
		Add(disksafetest.SATADisk("sda", "8:0", "A")).
		Add(disksafetest.Disk{Name: "sdb", Dev: "8:16", Sectors: 100, Parts: []disksafetest.Part{{Name: "sdb1", Dev: "8:17", Start: 2048, Size: 50}}})
	tr.Link("dev/disk/by-id/ata-A", "../../sda")
	tr.Link("dev/disk/by-id/wwn-abs", "/dev/sdb")
	tr.Link("dev/disk/by-id/part", "../../sdb1")
	tr.Link("dev/disk/by-id/chain", "ata-A")
	tr.Link("dev/disk/by-id/dangling", "../../sdz")
	tr.Link("dev/disk/by-id/loop1", "loop2")
	tr.Link("dev/disk/by-id/loop2", "loop1")
	tr.Link("dev/disk/by-id/escape", "../../../../../../sys/block/sda")
	tr.File("dev/notadevice", "")
	tr.Node("dev/mapper/sda") // a block node outside /dev's top level
	tr.FS["dev/chardev"] = &fstest.MapFile{Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666}
	tr.Node("dev/unknown") // no sysfs entry

	tests := map[string]string{
		"/dev/sda":                  "sda",
		"/dev/sdb":                  "sdb",
		"/dev/sdb1":                 "sdb1",
		"/dev/disk/by-id/ata-A":     "sda",
		"/dev/disk/by-id/wwn-abs":   "sdb",
		"/dev/disk/by-id/part":      "sdb1",
		"/dev/disk/by-id/chain":     "sda",
		"/dev/./disk/../sda":        "sda",
		"/dev/disk/by-id/dangling":  "",
		"/dev/disk/by-id/loop1":     "",
		"/dev/disk/by-id/escape":    "",
		"/dev/disk/by-id/none":      "",
		"/dev/notadevice":           "",
		"/dev/mapper/sda":           "",
		"/dev/chardev":              "",
		"/dev/unknown":              "",
		"/dev/sdz":                  "",
		"sda":                       "",
		"/sys/block/sda":            "",
		"/dev":                      "",
		"/dev/":                     "",
		"":                          "",
		"/dev/../sys/class/block/x": "",
	}
	for p, want := range tests {
		if got := Resolve(p, &Config{Root: tr.FS}); got != want {
			t.Errorf("Resolve(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestReadFileBounds(t *testing.T) {
	tr := disksafetest.NewTree()
	for _, n := range []int{0, 1, 63, 64, 65, 4096, maxAttr} {
		tr.File("f", strings.Repeat("x", n))
		b, err := readFile(tr.FS, "f")
		if err != nil || len(b) != n {
			t.Errorf("readFile of %d bytes = %d bytes, %v", n, len(b), err)
		}
	}
	tr.File("f", strings.Repeat("x", maxAttr+1))
	if _, err := readFile(tr.FS, "f"); err == nil {
		t.Errorf("readFile of %d bytes gave no error", maxAttr+1)
	}
}
