package disksafe

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
)

// FuzzDisks feeds arbitrary sysfs attributes, udev records and device links
// for one disk (sda) beside a well-formed one (sdb, serial S2), and checks
// that List never fails or panics, that what it reports is well-formed, and
// that Check never chooses a disk it should not: one whose places disagree
// on its serial, whose flags or udev record are unknown or whose flags are
// set, or beside another disk that may report the serial.
func FuzzDisks(f *testing.F) {
	f.Add([]byte("S64DNX0R123456      \n"), []byte(disksafetest.VPD80("S1")), []byte("E:ID_SERIAL_SHORT=S1\nE:ID_BUS=ata\n"), []byte("vd-1"), "0", "0", "1953525168", "8:0", "../devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda")
	f.Add([]byte(""), []byte("\x00\x80\x00\x10  WD-WX12A3456789"), []byte("S:disk/by-id/usb-X\nE:ID_BUS=usb\nE:ID_SERIAL_SHORT=WD-WX12A3456789\n"), []byte(""), "1", "0", "60437492", "8:0", "../devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sda")
	f.Add([]byte("S2"), []byte("\x00\x80\xff\xff"), []byte("E:ID_SERIAL_SHORT=S2"), []byte("S2\x00\x00"), "0", "1", "-1", "8:x", "/sys/block/sda")
	f.Add([]byte("\xff\xfe"), []byte("\x00\x80"), []byte("E:=\nE:ID_SCSI_SERIAL\nE:ID_SERIAL_SHORT= \n"), []byte("\n"), "", "", "99999999999999999999", "", "../../../../../..")
	f.Fuzz(func(t *testing.T, serial, vpd, udev, virtio []byte, removable, ro, size, dev, link string) {
		tr := disksafetest.NewTree(disksafetest.SATADisk("sdb", "8:16", "S2"))
		dir := "sys/devices/fuzz/block/sda"
		tr.Dir(dir)
		tr.Link("sys/block/sda", link)
		tr.Link("sys/class/block/sda", "../../devices/fuzz/block/sda")
		tr.Node("dev/sda")
		for name, v := range map[string]string{"removable": removable, "ro": ro, "size": size, "dev": dev,
			"device/serial": string(serial), "device/vpd_pg80": string(vpd), "serial": string(virtio)} {
			tr.File(dir+"/"+name, v)
		}
		if d, m, ok := parseDev(strings.TrimSpace(dev)); ok {
			tr.File(fmt.Sprintf("run/udev/data/b%d:%d", d, m), string(udev))
		}

		cfg := &Config{Root: newFastFS(tr.FS)}
		disks, err := List(cfg)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, d := range disks {
			if d.Size < 0 {
				t.Errorf("%s: size %d", d.Name, d.Size)
			}
			if (d.Serial != "") != (d.SerialsAgree && len(d.Sources) > 0) || (d.Serial != "" && d.Serial != d.Sources[0].Serial) {
				t.Errorf("%s: Serial %q, SerialsAgree %t, Sources %q", d.Name, d.Serial, d.SerialsAgree, d.Sources)
			}
			var spellings []string
			for _, src := range d.Sources {
				if !slices.Contains(spellings, src.Serial) {
					spellings = append(spellings, src.Serial)
				}
				if src.Where == "" {
					t.Errorf("%s: a serial from nowhere: %q", d.Name, d.Sources)
				}
			}
			if !slices.Equal(spellings, d.Serials) {
				t.Errorf("%s: Serials %q are not the spellings of Sources %q", d.Name, d.Serials, d.Sources)
			}
			if d.SysPath == "" && d.SysPathErr == nil {
				t.Errorf("%s: neither a device path nor why not", d.Name)
			}
			for _, s := range d.Serials {
				if s == "" || len(s) > 256 || strings.TrimSpace(s) != s || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
					t.Errorf("%s: malformed serial %q", d.Name, s)
				}
			}
			if d.Dev != "" {
				if _, _, ok := parseDev(d.Dev); !ok {
					t.Errorf("%s: malformed dev %q", d.Name, d.Dev)
				}
			}
			if d.SysPath != "" && !strings.HasPrefix(d.SysPath, "/sys/") {
				t.Errorf("%s: sysfs path %q", d.Name, d.SysPath)
			}
		}

		// Judge every serial sda reports, and S2.
		serials := []string{"S2"}
		for _, d := range disks {
			if d.Name == "sda" {
				serials = append(serials, d.Serials...)
			}
		}
		for _, s := range serials {
			for _, disk := range []string{"/dev/sda", "/dev/sdb"} {
				tg := Target{Disk: disk, Serial: s}
				l, err := Read(disk, cfg)
				if err != nil {
					t.Fatal(err)
				}
				got, err := check(l, tg, goodBoot())
				if err != nil {
					continue
				}
				if "/dev/"+got.Name != disk || !got.reports(s) || !got.SerialsAgree || got.Removable || got.USB || got.ReadOnly ||
					got.RemovableErr != nil || got.ReadOnlyErr != nil || got.SysPathErr != nil || got.SysPath == "" || got.UdevErr != nil {
					t.Fatalf("Check chose %+v for %v", got, tg)
				}
				for _, src := range got.Sources {
					if !sameSerial(src.Serial, got.Serial) {
						t.Fatalf("Check chose %s, whose places disagree: %q", got.Name, got.Sources)
					}
				}
				for _, other := range l.Disks {
					if other.Name != got.Name && (other.reports(s) || other.mayReport(s) || other.UdevErr != nil) {
						t.Fatalf("Check chose %s though %s may report %q too", got.Name, other.Name, s)
					}
				}
			}
		}
	})
}

// FuzzSameSerial compares sameSerial with udev's spelling written out
// plainly: two places agree exactly when udev would spell them alike. Its
// seeds are the cases: case counts, a run of blanks is one _, characters
// udev does not keep are _, values are trimmed before.
func FuzzSameSerial(f *testing.F) {
	for _, c := range [][2]string{
		{"S1", "S1"}, {"S1", "s1"}, {"S1", "S1 "}, {"A", ""}, {"", ""}, {"AB", "A"},
		{"A B", "A_B"}, {"A   B", "A_B"}, {"A   B", "A__B"}, {"A  B", "A__B"}, {"A\tB", "A_B"}, {"WD WX12  A/3", "WD_WX12_A_3"},
		{"A/B", "A_B"}, {"A/B", "A B"}, {"A!B", "A?B"}, {"A#+-.:=@_\\x", "A#+-.:=@_\\x"}, {"A#+-.:=@_\\B", "A#+-.:=@_\\B"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		spell := func(s string) string {
			var out strings.Builder
			blank := false
			for i := 0; i < len(s); i++ {
				c := s[i]
				if c == ' ' || c == '\t' {
					blank = true
					continue
				}
				if blank {
					out.WriteByte('_')
					blank = false
				}
				if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("#+-.:=@_\\", c) >= 0) {
					c = '_'
				}
				out.WriteByte(c)
			}
			if blank {
				out.WriteByte('_')
			}
			return out.String()
		}
		if got, want := sameSerial(a, b), spell(a) == spell(b); got != want {
			t.Fatalf("sameSerial(%q, %q) = %t; udev spells them %q and %q", a, b, got, spell(a), spell(b))
		}
		if sameSerial(a, b) != sameSerial(b, a) {
			t.Fatalf("sameSerial(%q, %q) is not symmetric", a, b)
		}
	})
}
