package disksafetest

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"testing/fstest"
)

// Disk describes one disk of a Tree.
type Disk struct {
	Name    string // kernel name
	Dev     string // "major:minor"
	Sectors int64  // size in 512-byte sectors
	// Removable and RO are the flags' file contents; "" writes "0".
	Removable, RO string
	// SysPath is the device's directory below /sys, e.g.
	// devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda;
	// "" places it at devices/virtual/block/<name>.
	SysPath string
	// Files are more files, relative to the disk's directory. A name
	// beginning "device/" lands in the parent device's directory, which
	// the disk's "device" link names, as in sysfs.
	Files map[string]string
	// Udev is the disk's udev database record; "" writes none.
	Udev string
	// Parts are the disk's partitions.
	Parts []Part
}

// Part is a partition of a Disk.
type Part struct {
	Name        string
	Dev         string
	Start, Size int64 // 512-byte sectors
}

// Tree is a fake root file system: /sys, /run/udev/data, /dev, /proc.
type Tree struct{ FS fstest.MapFS }

// BootID is the boot ID of every Tree.
const BootID = "6f1d3c52-8a0e-4c1b-9d7e-2b5a4f6e8c90"

// NewTree returns a Tree of disks, each put in by Add.
func NewTree(disks ...Disk) *Tree {
	t := &Tree{FS: fstest.MapFS{}}
	t.Dir("sys/block")
	t.Dir("sys/class/block")
	t.Dir("run/udev/data")
	t.File("proc/sys/kernel/random/boot_id", BootID+"\n")
	for _, d := range disks {
		t.Add(d)
	}
	return t
}

// Dir, File, Link and Node put a directory, a file holding data, a
// symbolic link to target and a device node at p.
func (t *Tree) Dir(p string) { t.FS[p] = &fstest.MapFile{Mode: fs.ModeDir | 0o755} }
func (t *Tree) File(p, data string) *Tree {
	t.FS[p] = &fstest.MapFile{Data: []byte(data), Mode: 0o444}
	return t
}
func (t *Tree) Link(p, target string) *Tree {
	t.FS[p] = &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
	return t
}
func (t *Tree) Node(p string) { t.FS[p] = &fstest.MapFile{Mode: fs.ModeDevice | 0o660} }

// Rm removes paths from the tree.
func (t *Tree) Rm(paths ...string) *Tree {
	for _, p := range paths {
		delete(t.FS, p)
	}
	return t
}

// Add puts d into the tree as sysfs, udev and devtmpfs show it.
func (t *Tree) Add(d Disk) *Tree {
	sp := d.SysPath
	if sp == "" {
		sp = "devices/virtual/block/" + d.Name
	}
	dir := "sys/" + sp
	t.Dir(dir)
	t.Link("sys/block/"+d.Name, "../"+sp)
	t.Link("sys/class/block/"+d.Name, "../../"+sp)
	t.Node("dev/" + d.Name)
	or0 := func(s string) string {
		if s == "" {
			return "0"
		}
		return s
	}
	t.File(dir+"/dev", d.Dev+"\n")
	t.File(dir+"/size", itoa(d.Sectors)+"\n")
	t.File(dir+"/removable", or0(d.Removable)+"\n")
	t.File(dir+"/ro", or0(d.RO)+"\n")
	devDir := path.Dir(sp)
	if path.Base(devDir) == "block" {
		devDir = path.Dir(devDir)
	}
	hasDevice := false
	for name, data := range d.Files {
		if rest, ok := strings.CutPrefix(name, "device/"); ok {
			t.File("sys/"+devDir+"/"+rest, data)
			hasDevice = true
			continue
		}
		t.File(dir+"/"+name, data)
	}
	if hasDevice {
		// The link is relative to the disk's directory, as in sysfs: "../"
		// per component up to the root.
		t.Link(dir+"/device", strings.Repeat("../", strings.Count(dir, "/")+1)+"sys/"+devDir)
	}
	if d.Udev != "" {
		t.File("run/udev/data/b"+d.Dev, d.Udev)
	}
	for _, p := range d.Parts {
		pd := dir + "/" + p.Name
		t.Dir(pd)
		t.File(pd+"/partition", "1\n")
		t.File(pd+"/start", itoa(p.Start)+"\n")
		t.File(pd+"/size", itoa(p.Size)+"\n")
		t.File(pd+"/dev", p.Dev+"\n")
		t.Link("sys/class/block/"+p.Name, "../../"+sp+"/"+p.Name)
		t.Node("dev/" + p.Name)
	}
	return t
}

// Multipath adds a dm-multipath device holding paths, as multipathd names
// one: dm/uuid "mpath-<wwid>", and each path in its slaves.
func (t *Tree) Multipath(dm, wwid string, paths ...string) *Tree {
	files := map[string]string{"dm/uuid": "mpath-" + wwid + "\n"}
	for _, p := range paths {
		files["slaves/"+p] = ""
	}
	return t.Add(Disk{Name: dm, Dev: "253:0", Sectors: 100, Files: files})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// minorOf is the minor number of dev, "major:minor".
func minorOf(dev string) int {
	_, m, _ := strings.Cut(dev, ":")
	n, _ := strconv.Atoi(m)
	return n
}

// VPD80 is a SCSI VPD page 0x80 holding serial, as sysfs's vpd_pg80 does.
func VPD80(serial string) string {
	n := len(serial)
	return string([]byte{0x00, 0x80, byte(n >> 8), byte(n)}) + serial
}

// The disks of the tests, one per kind, each named name, its device number
// dev ("major:minor"), reporting serial.

// SATADisk is a SATA SSD behind libata: its serial in vpd_pg80 and udev.
// Each SATA disk gets its own port, host and SCSI device by its minor.
func SATADisk(name, dev, serial string) Disk {
	minor := minorOf(dev)
	h := itoa(int64(minor / 16))
	return Disk{
		Name: name, Dev: dev, Sectors: 1953525168,
		SysPath: "devices/pci0000:00/0000:00:17.0/ata" + itoa(int64(minor/16+1)) + "/host" + h + "/target" + h + ":0:0/" + h + ":0:0:0/block/" + name,
		Files: map[string]string{
			"device/vpd_pg80": VPD80("      " + serial),
			"device/model":    "Samsung SSD 870 \n",
			"device/wwid":     "naa.5002538e40a1b2c3\n",
		},
		Udev: "S:disk/by-id/ata-Samsung_SSD_870_EVO_1TB_" + serial + "\n" +
			"E:ID_BUS=ata\nE:ID_MODEL=Samsung_SSD_870_EVO_1TB\n" +
			"E:ID_SERIAL=Samsung_SSD_870_EVO_1TB_" + serial + "\nE:ID_SERIAL_SHORT=" + serial + "\n" +
			"E:ID_WWN=0x5002538e40a1b2c3\n",
	}
}

// NVMeDisk is an NVMe namespace: its serial on the controller, padded, and
// its own EUI-64 by its minor.
func NVMeDisk(name, dev, serial string) Disk {
	minor := minorOf(dev)
	return Disk{
		Name: name, Dev: dev, Sectors: 1000215216,
		SysPath: "devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/" + name,
		Files: map[string]string{
			"device/serial": serial + "       \n",
			"device/model":  "Samsung SSD 980 1TB                     \n",
			"wwid":          fmt.Sprintf("eui.002538b231b2%04x\n", 0xc3d4+minor),
		},
		Udev: "E:ID_SERIAL_SHORT=" + serial + "\nE:ID_MODEL=Samsung SSD 980 1TB\n",
	}
}

// VirtioDisk is a virtio-blk disk: its serial in the disk's own "serial".
func VirtioDisk(name, dev, serial string) Disk {
	return Disk{
		Name: name, Dev: dev, Sectors: 41943040,
		SysPath: "devices/pci0000:00/0000:00:05.0/virtio2/block/" + name,
		Files:   map[string]string{"serial": serial},
		Udev:    "E:ID_SERIAL=" + serial + "\n",
	}
}

// USBStick is a USB flash drive: removable, under a USB root hub.
func USBStick(name, dev, serial string) Disk {
	return Disk{
		Name: name, Dev: dev, Sectors: 60437492, Removable: "1",
		SysPath: "devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/" + name,
		Files:   map[string]string{"device/model": "Ultra Fit\n"},
		Udev:    "E:ID_BUS=usb\nE:ID_SERIAL_SHORT=" + serial + "\nE:ID_USB_DRIVER=usb-storage\n",
	}
}

// USBDisk is a USB hard disk the kernel does not call removable; only its
// device path tells USB (udev holds just the serial).
func USBDisk(name, dev, serial string) Disk {
	return Disk{
		Name: name, Dev: dev, Sectors: 3907029168,
		SysPath: "devices/pci0000:00/0000:00:14.0/usb3/3-2/3-2:1.0/host7/target7:0:0/7:0:0:0/block/" + name,
		Files:   map[string]string{"device/vpd_pg80": VPD80(serial)},
		Udev:    "E:ID_SERIAL_SHORT=" + serial + "\n",
	}
}

// SDReader is an SD card in a USB card reader: removable, on USB.
func SDReader(name, dev, serial string) Disk {
	return Disk{
		Name: name, Dev: dev, Sectors: 31116288, Removable: "1",
		SysPath: "devices/pci0000:00/0000:00:14.0/usb1/1-4/1-4:1.0/host8/target8:0:0/8:0:0:0/block/" + name,
		Files:   map[string]string{"device/model": "SD/MMC Reader\n"},
		Udev:    "E:ID_BUS=usb\nE:ID_SERIAL_SHORT=" + serial + "\nE:ID_DRIVE_FLASH_SD=1\n",
	}
}

// SDCard is an SD card in a PCI SD host: not flagged removable by the
// kernel, but MMC type SD.
func SDCard(name, dev, serial string) Disk {
	return Disk{
		Name: name, Dev: dev, Sectors: 62333952,
		SysPath: "devices/pci0000:00/0000:00:1a.0/mmc_host/mmc0/mmc0:aaaa/block/" + name,
		Files: map[string]string{
			"device/type":   "SD\n",
			"device/serial": serial + "\n",
			"device/name":   "SC64G\n",
		},
	}
}

// EMMC is a soldered eMMC: MMC type MMC, not removable.
func EMMC(name, dev, serial string) Disk {
	return Disk{
		Name: name, Dev: dev, Sectors: 61071360,
		SysPath: "devices/platform/fe330000.mmc/mmc_host/mmc1/mmc1:0001/block/" + name,
		Files: map[string]string{
			"device/type":   "MMC\n",
			"device/serial": serial + "\n",
		},
	}
}

// LoopDisk is a file-backed loop device with its serial in a udev record.
func LoopDisk(name, dev, serial string) Disk {
	return Disk{
		Name: name, Dev: dev, Sectors: 131072,
		Files: map[string]string{"loop/backing_file": "/tmp/" + name + ".img\n"},
		Udev:  "E:ID_SERIAL_SHORT=" + serial + "\n",
	}
}
