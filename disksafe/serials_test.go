package disksafe

import (
	"io/fs"
	"slices"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
	"github.com/google/go-cmp/cmp"
)

// sasDisk is a SAS disk as scsi_id describes it: udev's ID_SERIAL_SHORT is
// the NAA WWN from VPD page 0x83, ID_SCSI_SERIAL the serial from page 0x80.
// Each gets its own host adapter by host, so two of one wwn are two paths.
func sasDisk(name, dev, serial, wwn string, host int) disksafetest.Disk {
	h := strconv.Itoa(host)
	return disksafetest.Disk{
		Name: name, Dev: dev, Sectors: 23437770752,
		SysPath: "devices/pci0000:00/0000:00:1f.0/0000:0" + h + ":00.0/host" + h + "/port-" + h + ":0/end_device-" + h + ":0/target" + h + ":0:0/" + h + ":0:0:0/block/" + name,
		Files: map[string]string{
			"device/vpd_pg80": disksafetest.VPD80(serial),
			"device/wwid":     "naa." + wwn + "\n",
			"device/model":    "ST12000NM0027   \n",
		},
		Udev: "E:ID_SCSI=1\nE:ID_BUS=scsi\nE:ID_SERIAL=3" + wwn + "\nE:ID_SERIAL_SHORT=" + wwn + "\n" +
			"E:ID_WWN=0x" + wwn + "\nE:ID_SCSI_SERIAL=" + serial + "\n",
	}
}

// withUdev returns d with its udev record replaced.
func withUdev(d disksafetest.Disk, udev string) disksafetest.Disk {
	d.Udev = udev
	return d
}

// withFile returns d with one more file (see disksafetest.Disk.Files).
func withFile(d disksafetest.Disk, name, data string) disksafetest.Disk {
	files := map[string]string{name: data}
	for k, v := range d.Files {
		if k != name {
			files[k] = v
		}
	}
	d.Files = files
	return d
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
