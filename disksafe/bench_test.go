package disksafe

import (
	"fmt"
	"io/fs"
	"testing"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
)

// bigMachine is a fake machine of n disks of every kind, each with its own
// serial; the declared disk is nvme-like disk number n*3/4.
func bigMachine(n int) (*disksafetest.Tree, Target) {
	tr := disksafetest.NewTree()
	var declared Target
	for i := range n {
		serial := fmt.Sprintf("SN%06d", i)
		var d disksafetest.Disk
		switch i % 4 {
		case 0:
			d = disksafetest.SATADisk(fmt.Sprintf("sd%s", letters(i)), fmt.Sprintf("8:%d", i*16), serial) // on port i+1, host i
		case 1:
			d = disksafetest.NVMeDisk(fmt.Sprintf("nvme%dn1", i), fmt.Sprintf("259:%d", i), serial)
			d.SysPath = fmt.Sprintf("devices/pci0000:00/0000:00:1d.0/0000:%02x:00.0/nvme/nvme%d/%s", i%256, i, d.Name)
		case 2:
			d = disksafetest.VirtioDisk(fmt.Sprintf("vd%s", letters(i)), fmt.Sprintf("254:%d", i*16), serial)
			d.SysPath = fmt.Sprintf("devices/pci0000:00/0000:00:%02x.0/virtio%d/block/%s", i%32, i, d.Name)
		case 3:
			d = disksafetest.USBDisk(fmt.Sprintf("sd%s", letters(i)), fmt.Sprintf("65:%d", i*16), serial)
			d.SysPath = fmt.Sprintf("devices/pci0000:00/0000:00:14.0/usb%d/%d-1/%d-1:1.0/host%d/target%d:0:0/%d:0:0:0/block/%s", i, i, i, i, i, i, d.Name)
		}
		tr.Add(d)
		if i == n*3/4+1 {
			declared = Target{Disk: "/dev/" + d.Name, Serial: serial, Code: testCode}
		}
	}
	return tr, declared
}

// letters names disk i as the kernel names sd disks: a..z, aa..zz, ...
func letters(i int) string {
	s := ""
	for i++; i > 0; i = (i - 1) / 26 {
		s = string(rune('a'+(i-1)%26)) + s
	}
	return s
}

func TestBigMachine(t *testing.T) {
	tr, tg := bigMachine(256)
	for _, root := range []fs.FS{tr.FS, newFastFS(tr.FS)} {
		cfg := &Config{Root: root}
		l, err := Read(tg.Disk, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Disks) != 256 {
			t.Fatalf("listed %d disks, want 256", len(l.Disks))
		}
		d, err := check(l, tg, goodBoot())
		if err != nil || "/dev/"+d.Name != tg.Disk {
			t.Fatalf("Check = %v, %v; want %s", d.Name, err, tg.Disk)
		}
		usb := 0
		for _, d := range l.Disks {
			if d.USB {
				usb++
			}
		}
		if usb != 64 {
			t.Errorf("%d USB disks, want 64", usb)
		}
	}
}

// BenchmarkJudge256 lists 256 disks from a fake tree in memory and judges
// them: the package's own cost of a judgement.
func BenchmarkJudge256(b *testing.B) {
	tr, tg := bigMachine(256)
	cfg := &Config{Root: newFastFS(tr.FS)}
	boot := goodBoot()
	cpu := startCPU()
	for b.Loop() {
		if _, _, err := Check(tg, boot, cfg); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}
