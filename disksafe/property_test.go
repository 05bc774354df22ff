package disksafe

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
)

// layout is a random machine and run, with the truth about each disk kept
// beside the tree the package reads, so the test's verdict does not come
// from the code under test.
type layout struct {
	tr     *disksafetest.Tree
	fail   map[string]error // reads that fail (faultFS)
	cfg    *Config
	target Target
	boot   Boot

	disks    []truth // every block device in the tree, listed or not
	declared string  // the kernel name target.Disk truly resolves to; "" none
}

type truth struct {
	name               string
	listed             bool     // a disk List must list
	serials            []string // every spelling its places hold
	agree              bool     // its places name one serial of serialPool
	removable, usb, ro bool

	// Flags that cannot be read: their attribute is missing, fails, or
	// holds a value the kernel never writes; or the device path fails.
	removableUnknown, roUnknown, pathUnknown bool
	mmcTypeUnknown, udevUnknown              bool
}

// serialPool holds the serials of the layouts. Each is one serial, spelled
// as the kernel spells it and as udev does (udevSpelled): "s1" and "S1" are
// two serials.
var serialPool = []string{"S1", "S2", "S3", "WD-WX12A3456789", "WD WX12 A/3", "s1"}

// udevSpelled is how udev writes in its record each serial of serialPool
// that it spells otherwise.
var udevSpelled = map[string]string{"WD WX12 A/3": "WD_WX12_A_3"}

// serialOf returns which serial of serialPool a place's value is.
func serialOf(v string) string {
	for k, u := range udevSpelled {
		if v == u {
			return k
		}
	}
	return v
}

func pick[T any](r *rand.Rand, v ...T) T { return v[r.IntN(len(v))] }

// randomLayout builds layout number i.
func randomLayout(i int) *layout {
	r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	l := &layout{tr: disksafetest.NewTree(), fail: map[string]error{}, cfg: &Config{Loop: r.IntN(2) == 0}}
	l.cfg.Root = faultFS{l.tr.FS, l.fail}

	names := []string{"sda", "sdb", "sdc", "sdd", "nvme0n1", "nvme1n1", "nvme2n1", "vda", "vdb", "mmcblk0", "loop0", "loop1", "dm-0", "zram0", "md0", "sr0"}
	r.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
	n := 1 + r.IntN(6)
	if r.IntN(12) == 0 {
		n = 0
	}
	for k, name := range names[:n] {
		d := disksafetest.Disk{Name: name, Dev: fmt.Sprintf("%d:%d", 8+k, k*16), Sectors: int64(1 + r.IntN(1<<30))}
		tr := truth{name: name, listed: true}
		isLoop := strings.HasPrefix(name, "loop")
		switch {
		case isLoop:
			hasFile := r.IntN(4) != 0
			if hasFile {
				d.Files = map[string]string{"loop/backing_file": "/var/lib/" + name + ".img\n"}
			}
			tr.listed = l.cfg.Loop && hasFile
		case slices.Contains([]string{"dm-0", "zram0", "md0", "sr0"}, name):
			tr.listed = false
		}
		if d.Files == nil {
			d.Files = map[string]string{}
		}

		// Serials, from one or two places (rebuildTruth works out
		// what the disk then reports).
		var udev strings.Builder
		s := pick(r, serialPool...)
		for range 1 + r.IntN(2) {
			if r.IntN(8) == 0 {
				continue // no serial from this place
			}
			if r.IntN(4) == 0 {
				s = pick(r, serialPool...) // mostly the places agree
			}
			u := cmp.Or(udevSpelled[s], s) // as udev writes it
			switch r.IntN(6) {
			case 0:
				d.Files["device/serial"] = s + strings.Repeat(" ", r.IntN(8)) + "\n"
			case 1:
				d.Files["serial"] = s
			case 2:
				d.Files["device/vpd_pg80"] = disksafetest.VPD80(strings.Repeat(" ", r.IntN(4)) + s)
			case 3:
				fmt.Fprintf(&udev, "E:ID_SERIAL_SHORT=%s\n", u)
			case 4:
				fmt.Fprintf(&udev, "E:ID_SCSI_SERIAL=%s\n", u)
			case 5:
				// scsi_id: a WWN in ID_SERIAL_SHORT, the serial in
				// ID_SCSI_SERIAL.
				fmt.Fprintf(&udev, "E:ID_SCSI=1\nE:ID_SERIAL_SHORT=5000c500a1b2c3d%d\nE:ID_SCSI_SERIAL=%s\n", k, u)
			}
		}

		// Flags, and the flags that cannot be read.
		var missing []string
		flag := func(attr string, set, unknown *bool) string {
			switch x := r.IntN(64); {
			case x < 8:
				*set = true
				return "1"
			case x == 8:
				*unknown = true
				return pick(r, "2", "yes", " ", "01")
			case x == 9:
				*unknown = true
				missing = append(missing, attr)
			case x == 10:
				*unknown = true
				l.fail["sys/block/"+name+"/"+attr] = pick(r, syscall.EIO, syscall.EACCES)
			}
			return "0"
		}
		d.Removable = flag("removable", &tr.removable, &tr.removableUnknown)
		d.RO = flag("ro", &tr.ro, &tr.roUnknown)
		if strings.HasPrefix(name, "mmcblk") {
			switch r.IntN(8) {
			case 0, 1, 2:
				d.Files["device/type"] = "SD\n"
				tr.removable = true // an SD card
			case 3:
				d.Files["device/type"] = "SDIO\n"
				tr.mmcTypeUnknown = true
			case 4:
				tr.mmcTypeUnknown = true // no type
			case 5:
				d.Files["device/type"] = "MMC\n"
				l.fail["sys/block/"+name+"/device/type"] = syscall.EIO
				tr.mmcTypeUnknown = true
			default:
				d.Files["device/type"] = "MMC\n"
			}
		}
		if r.IntN(16) == 0 {
			l.fail["sys/block/"+name] = syscall.EIO
			tr.pathUnknown = true
		}
		switch r.IntN(160) {
		case 0:
			l.fail["run/udev/data/b"+d.Dev] = syscall.EIO
			tr.udevUnknown = true
		case 1:
			l.fail["sys/block/"+name+"/dev"] = syscall.EIO
			tr.udevUnknown = true
		}
		d.SysPath = fmt.Sprintf("devices/pci0000:00/0000:00:%02x.0/host%d/target%d:0:0/%d:0:0:0/block/%s", k, k, k, k, name)
		switch r.IntN(8) {
		case 0:
			fmt.Fprintf(&udev, "E:ID_BUS=usb\n")
			tr.usb = true
		case 1:
			d.SysPath = fmt.Sprintf("devices/pci0000:00/0000:00:14.0/usb%d/%d-1/%d-1:1.0/host%d/target%d:0:0/%d:0:0:0/block/%s", k+1, k+1, k+1, k, k, k, name)
			tr.usb = !tr.pathUnknown // a path that cannot be read tells nothing
		case 2:
			d.SysPath = fmt.Sprintf("devices/platform/xhci.%d/%d-2.%d/%d-2.%d:1.0/host%d/target%d:0:0/%d:0:0:0/block/%s", k, k+1, k, k+1, k, k, k, k, name)
			tr.usb = !tr.pathUnknown
		}
		d.Udev = udev.String()
		l.tr.Add(d)
		sp := "sys/" + d.SysPath
		for _, attr := range missing {
			delete(l.tr.FS, sp+"/"+attr)
		}
		l.disks = append(l.disks, rebuildTruth(tr, d))
	}

	// The declared disk.
	diskName := "sdz"
	if n > 0 {
		diskName = names[r.IntN(n)]
	}
	switch r.IntN(20) {
	case 0:
		l.target.Disk = ""
	case 1:
		l.target.Disk = diskName // not under /dev
	case 2:
		l.target.Disk = "/dev/sdz" // missing
	case 3:
		l.tr.Link("dev/disk/by-id/declared", "../../gone")
		l.target.Disk = "/dev/disk/by-id/declared"
	case 4, 5, 6, 7:
		l.tr.Link("dev/disk/by-id/declared", "../../"+diskName)
		l.target.Disk = "/dev/disk/by-id/declared"
		l.declared = diskName
	default:
		l.target.Disk = "/dev/" + diskName
		l.declared = diskName
	}
	if n == 0 {
		l.declared = ""
	}

	// The declared serial: mostly one the declared disk reports.
	var own []string
	for _, d := range l.disks {
		if d.name == diskName {
			own = d.serials
		}
	}
	switch x := r.IntN(16); {
	case x == 0:
		l.target.Serial = ""
	case x == 1:
		l.target.Serial = " " + pick(r, serialPool...) + "\n"
	case x == 2:
		l.target.Serial = "S9"
	case x < 12 && len(own) > 0:
		l.target.Serial = pick(r, own...)
	default:
		l.target.Serial = pick(r, serialPool...)
	}

	// This boot.
	rec := &BootRecord{BootID: disksafetest.BootID, Attested: true, Code: testCode}
	l.boot = Boot{ID: disksafetest.BootID, Record: rec}
	switch r.IntN(24) {
	case 0:
		l.boot.Record = nil
	case 1:
		rec.BootID = "00000000-0000-4000-8000-000000000000"
	case 2:
		rec.Attested = false
	case 3:
		rec.Code = ""
	case 4:
		l.boot.ID = ""
	}
	switch r.IntN(12) {
	case 0:
		l.target.Code = "ic-another-code"
	case 1, 2, 3, 4, 5:
		l.target.Code = testCode
	}
	return l
}

// rebuildTruth works out the serials a disk truly reports from what was
// written to the tree, where a later write to the same place replaced an
// earlier one.
func rebuildTruth(tr truth, d disksafetest.Disk) truth {
	var s, serials []string
	add := func(v string) {
		v = strings.Trim(v, " \n\x00")
		if v == "" {
			return
		}
		if !slices.Contains(s, v) {
			s = append(s, v)
		}
		if !slices.Contains(serials, serialOf(v)) {
			serials = append(serials, serialOf(v))
		}
	}
	add(d.Files["device/serial"])
	add(d.Files["serial"])
	if v := d.Files["device/vpd_pg80"]; len(v) > 4 {
		add(v[4:])
	}
	// In a udev record the first value of a key counts. Beside
	// ID_SCSI_SERIAL, ID_SERIAL_SHORT is scsi_id's WWN, not a serial.
	keys := []string{"E:ID_SERIAL_SHORT=", "E:ID_SCSI_SERIAL="}
	if strings.Contains(d.Udev, "E:ID_SCSI_SERIAL=") {
		keys = keys[1:]
	}
	for _, k := range keys {
		for line := range strings.Lines(d.Udev) {
			if v, ok := strings.CutPrefix(line, k); ok {
				add(v)
				break
			}
		}
	}
	tr.serials = s
	tr.agree = len(serials) <= 1
	return tr
}

// verdict is what the runbook's rules say about a layout: the refusal, or
// nil and the disk to wipe.
func (l *layout) verdict() (string, error) {
	serial := strings.TrimSpace(l.target.Serial)
	switch {
	case serial == "":
		return "", ErrNoSerial
	case l.target.Disk == "":
		return "", ErrNoInstallDisk
	case !strings.HasPrefix(l.target.Disk, "/dev/"):
		return "", ErrBadInstallDisk
	}
	b := l.boot
	switch {
	case b.Record == nil || b.ID == "" || b.Record.BootID != b.ID || !b.Record.Attested:
		return "", ErrNotAttested
	case b.Record.Code == "":
		return "", ErrNoInstallCode
	case l.target.Code != "" && l.target.Code != b.Record.Code:
		return "", ErrInstallCodeMismatch
	}
	var reporting []truth
	for _, d := range l.disks {
		if d.listed && d.udevUnknown {
			return "", ErrUdevUnreadable // it may be the declared disk
		}
	}
	for _, d := range l.disks {
		if d.listed && !d.agree && slices.Contains(d.serials, serial) {
			return "", ErrSerialConflict // it may be the declared disk
		}
	}
	for _, d := range l.disks {
		if d.listed && d.agree && slices.Contains(d.serials, serial) {
			reporting = append(reporting, d)
		}
	}
	switch len(reporting) {
	case 0:
		return "", ErrSerialNotFound
	case 1:
	default:
		return "", ErrSerialAmbiguous
	}
	d := reporting[0]
	switch {
	case d.name != l.declared:
		return "", ErrWrongDisk
	case d.removable:
		return "", ErrRemovable
	case d.removableUnknown || d.mmcTypeUnknown:
		return "", ErrRemovableUnreadable
	case d.usb:
		return "", ErrUSB
	case d.pathUnknown:
		return "", ErrDevicePathUnreadable
	case d.ro:
		return "", ErrReadOnly
	case d.roUnknown:
		return "", ErrReadOnlyUnreadable
	}
	return d.name, nil
}

// TestPropertyRandomLayouts judges random layouts and compares each verdict
// with what the runbook's rules, applied in their documented order, say
// (verdict).
func TestPropertyRandomLayouts(t *testing.T) {
	const layouts = 10000
	wipes := 0
	refusals := map[error]int{}
	for i := range layouts {
		l := randomLayout(i)
		rl, err := Read(l.target.Disk, l.cfg)
		if err != nil {
			t.Fatalf("layout %d: Read: %v", i, err)
		}
		got, err := check(rl, l.target, l.boot)
		wantDisk, wantErr := l.verdict()
		if err == nil {
			wipes++
			if wantErr != nil {
				t.Fatalf("layout %d: Check chose %s; the rules say %v\n%+v", i, got.Name, wantErr, l)
			}
			if got.Name != wantDisk || got.Name != l.declared {
				t.Fatalf("layout %d: Check chose %s, not the declared disk %s", i, got.Name, l.declared)
			}
			continue
		}
		if wantErr == nil {
			t.Fatalf("layout %d: Check refused (%v); the rules say wipe %s", i, err, wantDisk)
		}
		if !errors.Is(err, wantErr) {
			t.Fatalf("layout %d: Check refused with %v; the rules say %v", i, err, wantErr)
		}
		if got.Name != "" {
			t.Fatalf("layout %d: a refusal returned disk %s", i, got.Name)
		}
		refusals[wantErr]++
	}
	// The layouts must reach every verdict, or the property says little.
	for _, e := range []error{ErrNoSerial, ErrNoInstallDisk, ErrBadInstallDisk, ErrNotAttested, ErrNoInstallCode,
		ErrInstallCodeMismatch, ErrUdevUnreadable, ErrSerialConflict, ErrSerialNotFound, ErrSerialAmbiguous, ErrWrongDisk,
		ErrRemovable, ErrRemovableUnreadable, ErrUSB, ErrDevicePathUnreadable, ErrReadOnly, ErrReadOnlyUnreadable} {
		if refusals[e] == 0 {
			t.Errorf("no layout was refused with %v", e)
		}
	}
	if wipes < layouts/20 {
		t.Errorf("only %d of %d layouts wipe", wipes, layouts)
	}
	t.Logf("%d layouts: %d wipes, refusals %v", layouts, wipes, refusals)
}
