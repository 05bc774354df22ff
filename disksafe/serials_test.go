package disksafe

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// sasDisk is a SAS disk as scsi_id describes it: udev's ID_SERIAL_SHORT is
// the NAA WWN from VPD page 0x83, ID_SCSI_SERIAL the serial from page 0x80.
// Each gets its own host adapter by host, so two of one wwn are two paths.
func sasDisk(name, dev, serial, wwn string, host int) fakeDisk {
	h := itoa(int64(host))
	return fakeDisk{
		name: name, dev: dev, sectors: 23437770752,
		sysPath: "devices/pci0000:00/0000:00:1f.0/0000:0" + h + ":00.0/host" + h + "/port-" + h + ":0/end_device-" + h + ":0/target" + h + ":0:0/" + h + ":0:0:0/block/" + name,
		files: map[string]string{
			"device/vpd_pg80": vpd80(serial),
			"device/wwid":     "naa." + wwn + "\n",
			"device/model":    "ST12000NM0027   \n",
		},
		udev: "E:ID_SCSI=1\nE:ID_BUS=scsi\nE:ID_SERIAL=3" + wwn + "\nE:ID_SERIAL_SHORT=" + wwn + "\n" +
			"E:ID_WWN=0x" + wwn + "\nE:ID_SCSI_SERIAL=" + serial + "\n",
	}
}

// withUdev returns d with its udev record replaced.
func withUdev(d fakeDisk, udev string) fakeDisk {
	d.udev = udev
	return d
}

// withFile returns d with one more file (see fakeDisk.files).
func withFile(d fakeDisk, name, data string) fakeDisk {
	files := map[string]string{name: data}
	for k, v := range d.files {
		if k != name {
			files[k] = v
		}
	}
	d.files = files
	return d
}

// multipath adds a dm-multipath device holding paths, as multipathd names
// one: dm/uuid "mpath-<wwid>", and each path in its slaves.
func (t *tree) multipath(dm, wwid string, paths ...string) *tree {
	files := map[string]string{"dm/uuid": "mpath-" + wwid + "\n"}
	for _, p := range paths {
		files["slaves/"+p] = ""
	}
	return t.add(fakeDisk{name: dm, dev: "253:0", sectors: 100, files: files})
}

// TestSerials judges what a disk's places say together (serials); which
// places say a serial, and how it is trimmed, is TestSerialSources's.
func TestSerials(t *testing.T) {
	tests := []struct {
		name     string
		says     []string // what each place says, in Disk.Sources's order
		agree    bool
		serial   string
		serials  []string
		reported []string // serials the disk reports
	}{
		{"one place", []string{"S1"}, true, "S1", []string{"S1"}, []string{"S1"}},
		{"no place", nil, true, "", nil, nil},
		{"two places alike", []string{"S1", "S1"}, true, "S1", []string{"S1"}, []string{"S1"}},
		{"two places apart", []string{"S1", "S2"}, false, "", []string{"S1", "S2"}, nil},
		{"case counts", []string{"s1", "S1"}, false, "", []string{"s1", "S1"}, nil},
		{"udev's spelling", []string{"AB  C*D", "AB_C_D"}, true, "AB  C*D", []string{"AB  C*D", "AB_C_D"}, []string{"AB  C*D", "AB_C_D"}},
		{"not udev's spelling", []string{"AB  C*D", "AB__C_D"}, false, "", []string{"AB  C*D", "AB__C_D"}, nil},
		{"a longer serial", []string{"S1", "S1X"}, false, "", []string{"S1", "S1X"}, nil},
		{"udev's spelling first", []string{"AB_C_D", "AB  C*D"}, true, "AB_C_D", []string{"AB_C_D", "AB  C*D"}, []string{"AB_C_D", "AB  C*D"}},
		{"the third of four places disagrees", []string{"S1", "S1", "S3", "S1"}, false, "", []string{"S1", "S3"}, nil},
		{"a third place disagrees", []string{"S1", "S1", "S2"}, false, "", []string{"S1", "S2"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Disk
			for _, s := range tt.says {
				d.Sources = append(d.Sources, SerialSource{Where: "somewhere", Serial: s})
			}
			d.Serial, d.Serials, d.SerialsAgree = serials(d.Sources)
			if d.SerialsAgree != tt.agree || d.Serial != tt.serial || !cmp.Equal(d.Serials, tt.serials) {
				t.Errorf("SerialsAgree %t, Serial %q, Serials %q; want %t, %q, %q", d.SerialsAgree, d.Serial, d.Serials, tt.agree, tt.serial, tt.serials)
			}
			for _, s := range append([]string{"S1", "S2", "AB_C_D", "AB  C*D"}, tt.serials...) {
				if want := slices.Contains(tt.reported, s); d.reports(s) != want {
					t.Errorf("reports(%q) = %t, want %t", s, d.reports(s), want)
				}
			}
		})
	}
}

func TestSameSerial(t *testing.T) {
	tests := []struct {
		a, b string
		same bool
	}{
		{"S1", "S1", true},
		{"S1", "s1", false},
		{"S1", "S1 ", false}, // values are trimmed before
		{"A B", "A_B", true},
		{"A   B", "A_B", true},
		{"A   B", "A__B", false},
		{"A/B", "A_B", true},
		{"A/B", "A B", true},
		{"A#+-.:=@_\\B", "A#+-.:=@_\\B", true},
		{"A!B", "A?B", true}, // udev spells both A_B
		{"A", "", false},
		{"", "", true},
		{"AB", "A", false},
	}
	for _, tt := range tests {
		if got := sameSerial(tt.a, tt.b); got != tt.same {
			t.Errorf("sameSerial(%q, %q) = %t, want %t", tt.a, tt.b, got, tt.same)
		}
		if got := sameSerial(tt.b, tt.a); got != tt.same {
			t.Errorf("sameSerial(%q, %q) = %t, want %t", tt.b, tt.a, got, tt.same)
		}
	}
}

// faultFS serves a MapFS, except that opening a file or reading a link at a
// chosen path fails with a chosen error, as a failing sysfs attribute does.
// Paths are as the package asks for them, e.g. sys/block/sda/removable.
type faultFS struct {
	fstest.MapFS
	fail map[string]error
}

func (f faultFS) Open(name string) (fs.File, error) {
	if err := f.fail[name]; err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return f.MapFS.Open(name)
}

func (f faultFS) ReadLink(name string) (string, error) {
	if err := f.fail[name]; err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	return f.MapFS.ReadLink(name)
}

// TestCheckUnreadable judges trees whose reads of fail fail: the verdict on
// the disk (default /dev/sda) that reports its serial. An unknown flag is
// never reported as set.
func TestCheckUnreadable(t *testing.T) {
	sata := sataDisk("sda", "8:0", "S1")
	sataDir := "sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda"
	two := func() *tree { return newTree().add(sata).add(sataDisk("sdb", "8:16", "S2")) }
	tests := []struct {
		name  string
		tr    *tree
		fail  map[string]error
		disk  string
		want  error // nil: a wipe of sda
		cause error // what errors.Is also finds; nil: not checked
		text  string
	}{
		{name: "removable: read error", tr: newTree().add(sata), fail: map[string]error{"sys/block/sda/removable": syscall.EIO},
			want: ErrRemovableUnreadable, cause: syscall.EIO,
			text: "/dev/sda's removable attribute cannot be read (/sys/block/sda/removable: input/output error); nothing wiped"},
		{name: "removable: neither 0 nor 1", tr: func() *tree { d := sata; d.removable = "2"; return newTree().add(d) }(), want: ErrRemovableUnreadable,
			text: `/dev/sda's removable attribute cannot be read (/sys/block/sda/removable holds "2", not 0 or 1); nothing wiped`},
		{name: "removable: missing", tr: newTree().add(sata).rm(sataDir + "/removable"),
			want: ErrRemovableUnreadable, cause: fs.ErrNotExist,
			text: "/dev/sda's removable attribute cannot be read (/sys/block/sda/removable: file does not exist); nothing wiped"},
		{name: "removable: empty", tr: newTree().add(sata).file(sataDir+"/removable", "\n"),
			want: ErrRemovableUnreadable, text: `/dev/sda's removable attribute cannot be read (/sys/block/sda/removable holds "", not 0 or 1); nothing wiped`},
		{name: "removable: unreadable, but an SD card", tr: newTree().add(sdCard("mmcblk0", "179:0", "0x1234abcd")),
			fail: map[string]error{"sys/block/mmcblk0/removable": syscall.EIO}, disk: "/dev/mmcblk0", want: ErrRemovable, text: "/dev/mmcblk0 is removable"},
		{name: "MMC type unreadable", tr: newTree().add(emmc("mmcblk1", "179:8", "0x0badf00d")),
			fail: map[string]error{"sys/block/mmcblk1/device/type": syscall.EACCES}, disk: "/dev/mmcblk1", want: ErrRemovableUnreadable, cause: fs.ErrPermission,
			text: "/dev/mmcblk1's removable attribute cannot be read (/sys/block/mmcblk1/device/type: permission denied); nothing wiped"},
		{name: "MMC type unknown", tr: newTree().add(withFile(emmc("mmcblk1", "179:8", "0x0badf00d"), "device/type", "SDIO\n")), disk: "/dev/mmcblk1",
			want: ErrRemovableUnreadable,
			text: `/dev/mmcblk1's removable attribute cannot be read (/sys/block/mmcblk1/device/type holds "SDIO", not MMC or SD); nothing wiped`},
		{name: "ro: read error", tr: newTree().add(sata), fail: map[string]error{"sys/block/sda/ro": syscall.EIO},
			want: ErrReadOnlyUnreadable, cause: syscall.EIO, text: "/dev/sda's ro attribute cannot be read (/sys/block/sda/ro: input/output error); nothing wiped"},
		{name: "ro: neither 0 nor 1", tr: func() *tree { d := sata; d.ro = "yes"; return newTree().add(d) }(), want: ErrReadOnlyUnreadable,
			text: `/dev/sda's ro attribute cannot be read (/sys/block/sda/ro holds "yes", not 0 or 1); nothing wiped`},
		{name: "device path: read error", tr: newTree().add(sata), fail: map[string]error{"sys/block/sda": syscall.EIO},
			want: ErrDevicePathUnreadable, cause: syscall.EIO,
			text: "/dev/sda's device path cannot be read, so USB cannot be ruled out (/sys/block/sda: input/output error); nothing wiped"},
		{name: "device path: outside /sys", tr: func() *tree {
			tr := newTree().add(fakeDisk{name: "sda", dev: "8:0", sectors: 100, udev: "E:ID_SERIAL_SHORT=S1\n"})
			tr.link("sys/block/sda", "../../tmp/sda")
			for _, f := range []string{"dev", "size", "removable", "ro"} {
				tr.fs["tmp/sda/"+f] = tr.fs["sys/devices/virtual/block/sda/"+f]
			}
			return tr
		}(), want: ErrDevicePathUnreadable,
			text: `/dev/sda's device path cannot be read, so USB cannot be ruled out (/sys/block/sda links to "../../tmp/sda", outside /sys); nothing wiped`},
		{name: "device path: unreadable, but udev says USB",
			tr:   newTree().add(fakeDisk{name: "sda", dev: "8:0", sectors: 100, udev: "E:ID_BUS=usb\nE:ID_SERIAL_SHORT=S1\n"}),
			fail: map[string]error{"sys/block/sda": syscall.EIO}, want: ErrUSB, text: "/dev/sda is on USB"},
		// Another disk's unknown flags and device path block nothing.
		{name: "another disk's flags and device path: read errors", tr: two(),
			fail: map[string]error{"sys/block/sdb/removable": syscall.EIO, "sys/block/sdb/ro": syscall.EIO, "sys/block/sdb": syscall.EIO}},
		{name: "another disk's record fails", tr: two(), fail: map[string]error{"run/udev/data/b8:16": syscall.EIO},
			want: ErrUdevUnreadable, cause: syscall.EIO, text: "sdb's udev record cannot be read (/run/udev/data/b8:16: input/output error); nothing wiped"},
		{name: "the declared disk's record fails", tr: two(), fail: map[string]error{"run/udev/data/b8:0": syscall.EACCES},
			want: ErrUdevUnreadable, cause: fs.ErrPermission, text: "sda's udev record cannot be read (/run/udev/data/b8:0: permission denied); nothing wiped"},
		{name: "another disk's device number fails", tr: two(), fail: map[string]error{"sys/block/sdb/dev": syscall.EIO},
			want: ErrUdevUnreadable, cause: syscall.EIO,
			text: "sdb's udev record cannot be read (its device number is unknown: /sys/block/sdb/dev: input/output error); nothing wiped"},
		{name: "another disk's device number is garbage",
			tr: two().file("sys/devices/pci0000:00/0000:00:17.0/ata2/host1/target1:0:0/1:0:0:0/block/sdb/dev", "8-16\n"), want: ErrUdevUnreadable,
			text: `sdb's udev record cannot be read (its device number is unknown: /sys/block/sdb/dev holds "8-16", not major:minor); nothing wiped`},
		{name: "another disk has no record", tr: two().rm("run/udev/data/b8:16")},
		{name: "no disk has a record", tr: two().rm("run/udev/data/b8:0", "run/udev/data/b8:16")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.disk == "" {
				tt.disk = "/dev/sda"
			}
			tg := Target{Disk: tt.disk, Serial: "S1"}
			if tt.disk != "/dev/sda" {
				tg.Serial = map[string]string{"/dev/mmcblk0": "0x1234abcd", "/dev/mmcblk1": "0x0badf00d"}[tt.disk]
			}
			d, err := judge(t, &Config{Root: faultFS{tt.tr.fs, tt.fail}}, tg, goodBoot())
			checkVerdict(t, d, err, "sda", tt.want, tt.cause, tt.text)
			for _, other := range []error{ErrRemovable, ErrReadOnly} {
				if other != tt.want && errors.Is(err, other) {
					t.Errorf("an unknown flag is reported as set: %v", err)
				}
			}
		})
	}
}

func TestCheckMultipathLUN(t *testing.T) {
	const (
		wwn  = "5000c500a1b2c3d4"
		wwid = "35000c500a1b2c3d4"
	)
	// sas is two paths, through two hosts, of one SAS disk.
	sas := func() *tree {
		return newTree().add(sasDisk("sda", "8:0", "ZA1234AB", wwn, 2)).add(sasDisk("sdb", "8:16", "ZA1234AB", wwn, 3))
	}
	lun7 := newTree()
	for i, n := range []string{"sda", "sdb", "sdc", "sdd"} {
		lun7.add(fakeDisk{name: n, dev: fmt.Sprintf("8:%d", 16*i), sectors: 100, udev: "E:ID_SCSI_SERIAL=LUN7\n"})
	}
	tests := []struct {
		name string
		tr   *tree
		want string
		lun  *MultipathLUN
	}{
		{name: "two paths of one SAS disk", tr: sas(),
			want: "more than one disk reports the serial ZA1234AB: sda and sdb are one multipath LUN (wwid naa." + wwn + ")",
			lun:  &MultipathLUN{Paths: []string{"sda", "sdb"}, WWN: "naa." + wwn}},
		{name: "two paths held by dm-multipath", tr: sas().multipath("dm-0", wwid, "sda", "sdb"),
			want: "more than one disk reports the serial ZA1234AB: sda and sdb are one multipath LUN (wwid naa." + wwn + ", multipath device dm-0)",
			lun:  &MultipathLUN{Paths: []string{"sda", "sdb"}, WWN: "naa." + wwn, Holder: "dm-0"}},
		{name: "four paths held by dm-multipath, no WWN", tr: lun7.multipath("dm-0", "3600a0b80001234", "sda", "sdb", "sdc", "sdd"),
			want: "more than one disk reports the serial LUN7: sda, sdb, sdc and sdd are one multipath LUN (multipath device dm-0)",
			lun:  &MultipathLUN{Paths: []string{"sda", "sdb", "sdc", "sdd"}, Holder: "dm-0"}},
		{name: "held by a device-mapper device that is not multipath",
			tr: newTree().add(sataDisk("sda", "8:0", "S1")).add(withFile(sataDisk("sdb", "8:16", "S1"), "device/wwid", "naa.5002538e40ffffff\n")).
				add(fakeDisk{name: "dm-0", dev: "253:0", sectors: 100, files: map[string]string{"dm/uuid": "LVM-abc\n", "slaves/sda": "", "slaves/sdb": ""}}),
			want: "more than one disk reports the serial S1"},
		{name: "two namespaces of one NVMe controller", tr: newTree().add(nvmeDisk("nvme0n1", "259:0", "S64DNX0R123456")).
			add(withFile(nvmeDisk("nvme0n2", "259:1", "S64DNX0R123456"), "wwid", "eui.002538b231b2c3d5\n")),
			want: "more than one disk reports the serial S64DNX0R123456"},
		{name: "a multipath LUN and another disk", tr: sas().add(sasDisk("sdc", "8:32", "ZA1234AB", "5000c500a1b2ffff", 4)),
			want: "more than one disk reports the serial ZA1234AB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serial := strings.Fields(strings.TrimPrefix(tt.want, "more than one disk reports the serial "))[0]
			serial = strings.TrimSuffix(serial, ":")
			for _, disk := range []string{"/dev/sda", "/dev/sdb"} {
				d, err := judge(t, &Config{Root: tt.tr.fs}, Target{Disk: disk, Serial: serial}, goodBoot())
				checkVerdict(t, d, err, "", ErrSerialAmbiguous, nil, tt.want)
				var r *Refusal
				if !errors.As(err, &r) || !cmp.Equal(r.LUN, tt.lun) {
					t.Errorf("Refusal.LUN = %+v, want %+v", r.LUN, tt.lun)
				}
			}
		})
	}
}
