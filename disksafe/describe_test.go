package disksafe

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
	"github.com/google/go-cmp/cmp"
)

func TestSerialSources(t *testing.T) {
	const dir = "sys/block/sda"
	tests := []struct {
		name                 string
		deviceSerial, serial string
		vpd80                []byte
		udev                 map[string]string
		want                 []SerialSource
	}{
		{name: "none"},
		{name: "every place, in order", deviceSerial: " A \n", serial: "B\x00", vpd80: []byte(disksafetest.VPD80("C  ")),
			udev: map[string]string{"ID_SERIAL_SHORT": "D"}, want: []SerialSource{
				{"/sys/block/sda/device/serial", "A"},
				{"/sys/block/sda/serial", "B"},
				{"/sys/block/sda/device/vpd_pg80", "C"},
				{"udev's ID_SERIAL_SHORT", "D"},
			}},
		{name: "scsi_id's identifier is not a serial", udev: map[string]string{"ID_SERIAL_SHORT": "naa.5000", "ID_SCSI_SERIAL": "E"},
			want: []SerialSource{{"udev's ID_SCSI_SERIAL", "E"}}},
		{name: "an empty ID_SCSI_SERIAL still marks scsi_id", udev: map[string]string{"ID_SERIAL_SHORT": "naa.5000", "ID_SCSI_SERIAL": ""}},
		{name: "values that are not serials are left out", deviceSerial: "  \n", serial: "caf\xc3\xa9", vpd80: []byte{0, 0x83, 0, 1, 'X'},
			udev: map[string]string{"ID_SERIAL_SHORT": "a\tb\x01"}},
	}
	for _, tt := range tests {
		got := serialSources(dir, tt.deviceSerial, tt.serial, tt.vpd80, tt.udev)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: serialSources (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestTransport(t *testing.T) {
	const (
		ata    = "/sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda"
		onUSB  = "/sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb"
		scsi   = "/sys/devices/pci0000:00/0000:00:10.0/host2/target2:0:0/2:0:0:0/block/sdd"
		loop   = "/sys/devices/virtual/block/loop0"
		nvme   = "/sys/devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/nvme0n1"
		virtio = "/sys/devices/virtual/block/vda"
	)
	tests := []struct {
		name, disk, sysPath string
		udev                map[string]string
		usb                 bool
		transport           string
	}{
		{"ata", "sda", ata, nil, false, "ata"},
		{"usb path", "sdb", onUSB, nil, true, "usb"},
		{"usb path, udev says ata", "sdb", onUSB, map[string]string{"ID_BUS": "ata"}, true, "usb"},
		{"udev's ID_BUS=usb", "sda", ata, map[string]string{"ID_BUS": "usb"}, true, "usb"},
		{"udev's ID_PATH through usb", "sda", ata, map[string]string{"ID_PATH": "pci-0000:00:14.0-usb-0:1:1.0-scsi-0:0:0:0"}, true, "usb"},
		{"udev's ID_PATH of a usb controller alone", "sda", ata, map[string]string{"ID_PATH": "pci-0000:00:14.0-usbv2"}, false, "ata"},
		{"the path wins over ID_BUS", "sdd", scsi, map[string]string{"ID_BUS": "ata"}, false, "scsi"},
		{"ID_BUS when the path says nothing", "vda", virtio, map[string]string{"ID_BUS": "ata"}, false, "ata"},
		{"ID_BUS not printable", "vda", virtio, map[string]string{"ID_BUS": "\x01"}, false, ""},
		{"path unknown, ID_BUS", "sda", "", map[string]string{"ID_BUS": "scsi"}, false, "scsi"},
		{"path unknown, nvme by name", "nvme0n1", "", nil, false, "nvme"},
		{"nvme path", "nvme0n1", nvme, nil, false, "nvme"},
		{"ID_BUS before the nvme name", "nvme0n1", virtio, map[string]string{"ID_BUS": "ata"}, false, "ata"},
		{"loop", "loop0", loop, nil, false, "loop"},
		{"loop, udev's ID_BUS", "loop0", loop, map[string]string{"ID_BUS": "ata"}, false, "loop"},
		{"loop on usb", "loop0", loop, map[string]string{"ID_BUS": "usb"}, true, "usb"},
		{"nothing known", "sda", "", nil, false, ""},
		{"a virtual path says nothing", "zram0", loop, nil, false, ""},
		{"usb path through a hub's ports", "sdc", "/sys/devices/platform/xhci/3-1.4.2/3-1.4.2:1.0/host7/target7:0:0/7:0:0:0/block/sdc", nil, true, "usb"},
		{"virtio path", "vda", "/sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda", nil, false, "virtio"},
		{"mmc path", "mmcblk0", "/sys/devices/pci0000:00/0000:00:1a.0/mmc_host/mmc0/mmc0:aaaa/block/mmcblk0", nil, false, "mmc"},
		// Not USB: PCI addresses, SCSI addresses, names with letters.
		{"no usb in the path", "sde", "/sys/devices/pci0000:00/0000:00:14.0/usbx/1-/-1/1-1:/1-1:1/1-a/usb/host0/block/sde", nil, false, "scsi"},
	}
	for _, tt := range tests {
		usb, tr := transport(tt.disk, tt.sysPath, tt.udev)
		if usb != tt.usb || tr != tt.transport {
			t.Errorf("%s: transport = %t, %q; want %t, %q", tt.name, usb, tr, tt.usb, tt.transport)
		}
	}
}

func TestDescribeFlags(t *testing.T) {
	eio := &fs.PathError{Op: "read", Path: "x", Err: errors.New("input/output error")}
	tests := []struct {
		name    string
		s       sysDisk
		rem, ro bool
		remErr  string
		roErr   string
	}{
		{name: "both 0", s: sysDisk{name: "sda", dir: "sys/block/sda", removable: "0", ro: "0"}},
		{name: "both 1", s: sysDisk{name: "sda", dir: "sys/block/sda", removable: "1", ro: "1"}, rem: true, ro: true},
		{name: "unreadable", s: sysDisk{name: "sda", dir: "sys/block/sda", remErr: eio, roErr: eio},
			remErr: "/sys/block/sda/removable: input/output error", roErr: "/sys/block/sda/ro: input/output error"},
		{name: "neither 0 nor 1", s: sysDisk{name: "sda", dir: "sys/block/sda", removable: "2", ro: "yes"},
			remErr: `/sys/block/sda/removable holds "2", not 0 or 1`, roErr: `/sys/block/sda/ro holds "yes", not 0 or 1`},
		{name: "eMMC", s: sysDisk{name: "mmcblk0", dir: "sys/block/mmcblk0", removable: "0", ro: "0", mmcType: "MMC"}},
		{name: "SD card", s: sysDisk{name: "mmcblk0", dir: "sys/block/mmcblk0", removable: "0", ro: "0", mmcType: "SD"}, rem: true},
		{name: "SD combo", s: sysDisk{name: "mmcblk0", dir: "sys/block/mmcblk0", removable: "0", ro: "0", mmcType: "SD combo"}, rem: true},
		{name: "SDIO", s: sysDisk{name: "mmcblk0", dir: "sys/block/mmcblk0", removable: "0", ro: "0", mmcType: "SDIO"},
			remErr: `/sys/block/mmcblk0/device/type holds "SDIO", not MMC or SD`},
		{name: "MMC type unreadable", s: sysDisk{name: "mmcblk0", dir: "sys/block/mmcblk0", removable: "0", ro: "0", mmcErr: eio},
			remErr: "/sys/block/mmcblk0/device/type: input/output error"},
		{name: "the flag's error comes first", s: sysDisk{name: "mmcblk0", dir: "sys/block/mmcblk0", remErr: eio, ro: "0", mmcType: "SDIO"},
			remErr: "/sys/block/mmcblk0/removable: input/output error"},
		{name: "both unreadable", s: sysDisk{name: "mmcblk0", dir: "sys/block/mmcblk0", remErr: eio, ro: "0", mmcErr: eio},
			remErr: "/sys/block/mmcblk0/removable: input/output error"},
		{name: "an SD card whose flag is unknown", s: sysDisk{name: "mmcblk0", dir: "sys/block/mmcblk0", removable: "x", ro: "0", mmcType: "SD"},
			rem: true, remErr: `/sys/block/mmcblk0/removable holds "x", not 0 or 1`},
		{name: "not MMC: device/type is not read", s: sysDisk{name: "sda", dir: "sys/block/sda", removable: "0", ro: "0", mmcType: "SD"}},
	}
	for _, tt := range tests {
		d := describe(tt.s)
		if d.Removable != tt.rem || errText(d.RemovableErr) != tt.remErr {
			t.Errorf("%s: Removable = %t, %v; want %t, %s", tt.name, d.Removable, d.RemovableErr, tt.rem, tt.remErr)
		}
		if d.ReadOnly != tt.ro || errText(d.ReadOnlyErr) != tt.roErr {
			t.Errorf("%s: ReadOnly = %t, %v; want %t, %s", tt.name, d.ReadOnly, d.ReadOnlyErr, tt.ro, tt.roErr)
		}
	}
}

func TestDescribeDevAndUdev(t *testing.T) {
	eio := &fs.PathError{Op: "read", Path: "x", Err: errors.New("input/output error")}
	missing := &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}
	tests := []struct {
		name    string
		s       sysDisk
		dev     string
		udevErr string
		serial  string
	}{
		{name: "read", s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", udev: []byte("E:ID_SERIAL_SHORT=S1\n")}, dev: "8:0", serial: "S1"},
		{name: "leading zeros", s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "008:00"}, dev: "8:0"},
		{name: "no record", s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", udevErr: missing}, dev: "8:0"},
		{name: "record unreadable", s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", udevErr: eio}, dev: "8:0",
			udevErr: "/run/udev/data/b8:0: input/output error"},
		{name: "dev unreadable", s: sysDisk{name: "sda", dir: "sys/block/sda", devErr: eio},
			udevErr: "its device number is unknown: /sys/block/sda/dev: input/output error"},
		{name: "dev not major:minor", s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "8"},
			udevErr: `its device number is unknown: /sys/block/sda/dev holds "8", not major:minor`},
		{name: "dev out of range", s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:4294967296"},
			udevErr: `its device number is unknown: /sys/block/sda/dev holds "8:4294967296", not major:minor`},
		{name: "a record without a dev is not read", s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "x", udev: []byte("E:ID_SERIAL_SHORT=S1\n")},
			udevErr: `its device number is unknown: /sys/block/sda/dev holds "x", not major:minor`},
	}
	for _, tt := range tests {
		d := describe(tt.s)
		if d.Dev != tt.dev || errText(d.UdevErr) != tt.udevErr || d.Serial != tt.serial {
			t.Errorf("%s: Dev, UdevErr, Serial = %q, %v, %q; want %q, %s, %q", tt.name, d.Dev, d.UdevErr, d.Serial, tt.dev, tt.udevErr, tt.serial)
		}
	}
}

func TestDescribe(t *testing.T) {
	notLink := &fs.PathError{Op: "readlink", Path: "x", Err: errors.New("invalid argument")}
	tests := []struct {
		name string
		s    sysDisk
		want Disk
	}{
		{name: "sizes",
			s:    sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", size: "100", removable: "0", ro: "0", link: "../devices/virtual/block/sda"},
			want: Disk{Name: "sda", Dev: "8:0", Size: 51200, SerialsAgree: true, SysPath: "/sys/devices/virtual/block/sda"}},
		{name: "the largest size",
			s:    sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", size: "18014398509481983", removable: "0", ro: "0", link: "/sys/devices/virtual/block/sda"},
			want: Disk{Name: "sda", Dev: "8:0", Size: 18014398509481983 * 512, SerialsAgree: true, SysPath: "/sys/devices/virtual/block/sda"}},
		{name: "sizes that are not counts",
			s:    sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", size: "18014398509481984", removable: "0", ro: "0", link: "../devices/virtual/block/sda"},
			want: Disk{Name: "sda", Dev: "8:0", SerialsAgree: true, SysPath: "/sys/devices/virtual/block/sda"}},
		{name: "a negative size",
			s:    sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", size: "-1", removable: "0", ro: "0", link: "../devices/virtual/block/sda"},
			want: Disk{Name: "sda", Dev: "8:0", SerialsAgree: true, SysPath: "/sys/devices/virtual/block/sda"}},
		{name: "WWN and model from sysfs before udev",
			s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", removable: "0", ro: "0", link: "../devices/virtual/block/sda",
				wwid: "naa.1\n", deviceWWID: "naa.2", model: "M1 ",
				udev: []byte("E:ID_WWN_WITH_EXTENSION=naa.3\nE:ID_WWN=naa.4\nE:ID_MODEL=M2\n")},
			want: Disk{Name: "sda", Dev: "8:0", SerialsAgree: true, SysPath: "/sys/devices/virtual/block/sda", WWN: "naa.1", Model: "M1"}},
		{name: "WWN and model from udev, in order",
			s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", removable: "0", ro: "0", link: "../devices/virtual/block/sda",
				wwid: " \n", model: "\x00",
				udev: []byte("E:ID_WWN_WITH_EXTENSION=\nE:ID_WWN=naa.4\nE:ID_MODEL=M2\n")},
			want: Disk{Name: "sda", Dev: "8:0", SerialsAgree: true, SysPath: "/sys/devices/virtual/block/sda", WWN: "naa.4", Model: "M2"}},
		{name: "device/wwid", s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", removable: "0", ro: "0", link: "../devices/virtual/block/sda",
			deviceWWID: "naa.2", udev: []byte("E:ID_WWN=naa.4\n")},
			want: Disk{Name: "sda", Dev: "8:0", SerialsAgree: true, SysPath: "/sys/devices/virtual/block/sda", WWN: "naa.2"}},
		{name: "not a link", s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", removable: "0", ro: "0", linkErr: notLink},
			want: Disk{Name: "sda", Dev: "8:0", SerialsAgree: true, SysPathErr: errors.New("/sys/block/sda: invalid argument")}},
		{name: "a link outside /sys", s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", removable: "0", ro: "0", link: "../../dev/sda"},
			want: Disk{Name: "sda", Dev: "8:0", SerialsAgree: true, SysPathErr: errors.New(`/sys/block/sda links to "../../dev/sda", outside /sys`)}},
		{name: "an absolute link outside /sys",
			s:    sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", removable: "0", ro: "0", link: "/system/devices/sda"},
			want: Disk{Name: "sda", Dev: "8:0", SerialsAgree: true, SysPathErr: errors.New(`/sys/block/sda links to "/system/devices/sda", outside /sys`)}},
		// One disk reporting different serials in different places lists
		// each, in the documented order, and reports none of them; beside
		// ID_SCSI_SERIAL, udev's ID_SERIAL_SHORT is scsi_id's device
		// identifier, not a serial.
		{name: "serials from every place, and the first of a udev key's values",
			s: sysDisk{name: "sda", dir: "sys/block/sda", dev: "8:0", size: "100", removable: "0", ro: "0",
				link:         "../devices/pci0000:00/0000:00:10.0/host0/target0:0:0/0:0:0:0/block/sda",
				deviceSerial: "  A-dev \n", serial: "B-virtio\x00\x00", vpd80: []byte(disksafetest.VPD80("C-vpd   ")),
				udev: []byte("E:ID_SERIAL_SHORT=D-short\nE:ID_SCSI_SERIAL=E-scsi\nE:ID_SCSI_SERIAL=ignored-second\n")},
			want: Disk{Name: "sda", Dev: "8:0", Size: 51200, Transport: "scsi",
				Serials: []string{"A-dev", "B-virtio", "C-vpd", "E-scsi"},
				Sources: []SerialSource{
					{"/sys/block/sda/device/serial", "A-dev"},
					{"/sys/block/sda/serial", "B-virtio"},
					{"/sys/block/sda/device/vpd_pg80", "C-vpd"},
					{"udev's ID_SCSI_SERIAL", "E-scsi"},
				},
				SysPath: "/sys/devices/pci0000:00/0000:00:10.0/host0/target0:0:0/0:0:0:0/block/sda"}},
		{name: "the first of udev's ID_SERIAL_SHORT values",
			s: sysDisk{name: "sdb", dir: "sys/block/sdb", dev: "8:16", size: "100", removable: "0", ro: "0", link: "../devices/virtual/block/sdb",
				udev: []byte("E:ID_SERIAL_SHORT=D-short\nE:ID_SERIAL_SHORT=ignored-second\n")},
			want: Disk{Name: "sdb", Dev: "8:16", Size: 51200, Serial: "D-short", Serials: []string{"D-short"}, SerialsAgree: true,
				Sources: []SerialSource{{"udev's ID_SERIAL_SHORT", "D-short"}}, SysPath: "/sys/devices/virtual/block/sdb"}},
		{name: "a loop device",
			s:    sysDisk{name: "loop0", dir: "sys/block/loop0", backingFile: "/tmp/a.img", dev: "7:0", removable: "0", ro: "1", link: "../devices/virtual/block/loop0"},
			want: Disk{Name: "loop0", Dev: "7:0", ReadOnly: true, SerialsAgree: true, SysPath: "/sys/devices/virtual/block/loop0", Transport: "loop", BackingFile: "/tmp/a.img"}},
	}
	for _, tt := range tests {
		got := describe(tt.s)
		if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b error) bool { return errText(a) == errText(b) })); diff != "" {
			t.Errorf("%s: describe (-want +got):\n%s", tt.name, diff)
		}
	}
}

// errText is err's text; "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
