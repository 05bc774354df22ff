package disksafe

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
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
