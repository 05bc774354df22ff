package disksafe

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"
)

// fakeDisk describes one disk of a fake sysfs/udev tree.
type fakeDisk struct {
	name    string // kernel name
	dev     string // "major:minor"
	sectors int64  // size in 512-byte sectors
	// removable and ro are the flags' file contents; "" writes "0".
	removable, ro string
	// sysPath is the device's directory below /sys, e.g.
	// devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda;
	// "" places it at devices/virtual/block/<name>.
	sysPath string
	// files are more files, relative to the disk's directory. A name
	// beginning "device/" lands in the parent device's directory, which
	// the disk's "device" link names, as in sysfs.
	files map[string]string
	// udev is the disk's udev database record; "" writes none.
	udev string
	// parts are the disk's partitions.
	parts []fakePart
}

type fakePart struct {
	name        string
	dev         string
	start, size int64 // 512-byte sectors
}

// tree is a fake root file system: /sys, /run/udev/data, /dev, /proc.
type tree struct{ fs fstest.MapFS }

const testBootID = "6f1d3c52-8a0e-4c1b-9d7e-2b5a4f6e8c90"

func newTree() *tree {
	t := &tree{fs: fstest.MapFS{}}
	t.dir("sys/block")
	t.dir("sys/class/block")
	t.dir("run/udev/data")
	t.file("proc/sys/kernel/random/boot_id", testBootID+"\n")
	return t
}

func (t *tree) dir(p string) { t.fs[p] = &fstest.MapFile{Mode: fs.ModeDir | 0o755} }
func (t *tree) file(p, data string) *tree {
	t.fs[p] = &fstest.MapFile{Data: []byte(data), Mode: 0o444}
	return t
}

// rm removes paths from the tree.
func (t *tree) rm(paths ...string) *tree {
	for _, p := range paths {
		delete(t.fs, p)
	}
	return t
}

func (t *tree) link(p, target string) *tree {
	t.fs[p] = &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
	return t
}
func (t *tree) node(p string) { t.fs[p] = &fstest.MapFile{Mode: fs.ModeDevice | 0o660} }

// add puts d into the tree as sysfs, udev and devtmpfs show it.
func (t *tree) add(d fakeDisk) *tree {
	sp := d.sysPath
	if sp == "" {
		sp = "devices/virtual/block/" + d.name
	}
	dir := "sys/" + sp
	t.dir(dir)
	t.link("sys/block/"+d.name, "../"+sp)
	t.link("sys/class/block/"+d.name, "../../"+sp)
	t.node("dev/" + d.name)
	or0 := func(s string) string {
		if s == "" {
			return "0"
		}
		return s
	}
	t.file(dir+"/dev", d.dev+"\n")
	t.file(dir+"/size", itoa(d.sectors)+"\n")
	t.file(dir+"/removable", or0(d.removable)+"\n")
	t.file(dir+"/ro", or0(d.ro)+"\n")
	devDir := path.Dir(sp)
	if path.Base(devDir) == "block" {
		devDir = path.Dir(devDir)
	}
	hasDevice := false
	for name, data := range d.files {
		if rest, ok := strings.CutPrefix(name, "device/"); ok {
			t.file("sys/"+devDir+"/"+rest, data)
			hasDevice = true
			continue
		}
		t.file(dir+"/"+name, data)
	}
	if hasDevice {
		// The link is relative to the disk's directory, as in sysfs: "../"
		// per component up to the root.
		t.link(dir+"/device", strings.Repeat("../", strings.Count(dir, "/")+1)+"sys/"+devDir)
	}
	if d.udev != "" {
		t.file("run/udev/data/b"+d.dev, d.udev)
	}
	for _, p := range d.parts {
		pd := dir + "/" + p.name
		t.dir(pd)
		t.file(pd+"/partition", "1\n")
		t.file(pd+"/start", itoa(p.start)+"\n")
		t.file(pd+"/size", itoa(p.size)+"\n")
		t.file(pd+"/dev", p.dev+"\n")
		t.link("sys/class/block/"+p.name, "../../"+sp+"/"+p.name)
		t.node("dev/" + p.name)
	}
	return t
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// vpd80 is a SCSI VPD page 0x80 holding serial, as sysfs's vpd_pg80 does.
func vpd80(serial string) string {
	n := len(serial)
	return string([]byte{0x00, 0x80, byte(n >> 8), byte(n)}) + serial
}

// The disks of the tests, one per kind.

// sataDisk is a SATA SSD behind libata: its serial in vpd_pg80 and udev.
// Each SATA disk gets its own port, host and SCSI device by its minor.
func sataDisk(name, dev, serial string) fakeDisk {
	_, minor, _ := parseDev(dev)
	h := itoa(int64(minor / 16))
	return fakeDisk{
		name: name, dev: dev, sectors: 1953525168,
		sysPath: "devices/pci0000:00/0000:00:17.0/ata" + itoa(int64(minor/16+1)) + "/host" + h + "/target" + h + ":0:0/" + h + ":0:0:0/block/" + name,
		files: map[string]string{
			"device/vpd_pg80": vpd80("      " + serial),
			"device/model":    "Samsung SSD 870 \n",
			"device/wwid":     "naa.5002538e40a1b2c3\n",
		},
		udev: "S:disk/by-id/ata-Samsung_SSD_870_EVO_1TB_" + serial + "\n" +
			"E:ID_BUS=ata\nE:ID_MODEL=Samsung_SSD_870_EVO_1TB\n" +
			"E:ID_SERIAL=Samsung_SSD_870_EVO_1TB_" + serial + "\nE:ID_SERIAL_SHORT=" + serial + "\n" +
			"E:ID_WWN=0x5002538e40a1b2c3\n",
	}
}

// nvmeDisk is an NVMe namespace: its serial on the controller, padded, and
// its own EUI-64 by its minor.
func nvmeDisk(name, dev, serial string) fakeDisk {
	_, minor, _ := parseDev(dev)
	return fakeDisk{
		name: name, dev: dev, sectors: 1000215216,
		sysPath: "devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/" + name,
		files: map[string]string{
			"device/serial": serial + "       \n",
			"device/model":  "Samsung SSD 980 1TB                     \n",
			"wwid":          fmt.Sprintf("eui.002538b231b2%04x\n", 0xc3d4+minor),
		},
		udev: "E:ID_SERIAL_SHORT=" + serial + "\nE:ID_MODEL=Samsung SSD 980 1TB\n",
	}
}

// virtioDisk is a virtio-blk disk: its serial in the disk's own "serial".
func virtioDisk(name, dev, serial string) fakeDisk {
	return fakeDisk{
		name: name, dev: dev, sectors: 41943040,
		sysPath: "devices/pci0000:00/0000:00:05.0/virtio2/block/" + name,
		files:   map[string]string{"serial": serial},
		udev:    "E:ID_SERIAL=" + serial + "\n",
	}
}

// usbStick is a USB flash drive: removable, under a USB root hub.
func usbStick(name, dev, serial string) fakeDisk {
	return fakeDisk{
		name: name, dev: dev, sectors: 60437492, removable: "1",
		sysPath: "devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/" + name,
		files:   map[string]string{"device/model": "Ultra Fit\n"},
		udev:    "E:ID_BUS=usb\nE:ID_SERIAL_SHORT=" + serial + "\nE:ID_USB_DRIVER=usb-storage\n",
	}
}

// usbDisk is a USB hard disk the kernel does not call removable; only its
// device path tells USB (udev holds just the serial).
func usbDisk(name, dev, serial string) fakeDisk {
	return fakeDisk{
		name: name, dev: dev, sectors: 3907029168,
		sysPath: "devices/pci0000:00/0000:00:14.0/usb3/3-2/3-2:1.0/host7/target7:0:0/7:0:0:0/block/" + name,
		files:   map[string]string{"device/vpd_pg80": vpd80(serial)},
		udev:    "E:ID_SERIAL_SHORT=" + serial + "\n",
	}
}

// sdReader is an SD card in a USB card reader: removable, on USB.
func sdReader(name, dev, serial string) fakeDisk {
	return fakeDisk{
		name: name, dev: dev, sectors: 31116288, removable: "1",
		sysPath: "devices/pci0000:00/0000:00:14.0/usb1/1-4/1-4:1.0/host8/target8:0:0/8:0:0:0/block/" + name,
		files:   map[string]string{"device/model": "SD/MMC Reader\n"},
		udev:    "E:ID_BUS=usb\nE:ID_SERIAL_SHORT=" + serial + "\nE:ID_DRIVE_FLASH_SD=1\n",
	}
}

// sdCard is an SD card in a PCI SD host: not flagged removable by the
// kernel, but MMC type SD.
func sdCard(name, dev, serial string) fakeDisk {
	return fakeDisk{
		name: name, dev: dev, sectors: 62333952,
		sysPath: "devices/pci0000:00/0000:00:1a.0/mmc_host/mmc0/mmc0:aaaa/block/" + name,
		files: map[string]string{
			"device/type":   "SD\n",
			"device/serial": serial + "\n",
			"device/name":   "SC64G\n",
		},
	}
}

// emmc is a soldered eMMC: MMC type MMC, not removable.
func emmc(name, dev, serial string) fakeDisk {
	return fakeDisk{
		name: name, dev: dev, sectors: 61071360,
		sysPath: "devices/platform/fe330000.mmc/mmc_host/mmc1/mmc1:0001/block/" + name,
		files: map[string]string{
			"device/type":   "MMC\n",
			"device/serial": serial + "\n",
		},
	}
}

// loopDisk is a file-backed loop device with its serial in a udev record.
func loopDisk(name, dev, serial string) fakeDisk {
	return fakeDisk{
		name: name, dev: dev, sectors: 131072,
		files: map[string]string{"loop/backing_file": "/tmp/" + name + ".img\n"},
		udev:  "E:ID_SERIAL_SHORT=" + serial + "\n",
	}
}

// fastFS is a MapFS whose missing files are missing at once: MapFS looks
// for a directory of that name through the whole map first, which makes a
// fake machine of many disks slower than the package's own work. It
// follows symbolic links itself, as the kernel does: at most 40 of them,
// then ELOOP (MapFS follows a cycle of links forever, so a fuzzed link must
// not reach it), an absolute target from the root, and none above the root.
type fastFS struct {
	m    fstest.MapFS // its own methods never run, so never follow a link
	dirs map[string]bool

	mu   sync.Mutex
	memo map[string]resolution // directory -> its resolution
}

type resolution struct {
	name string
	err  error
}

func newFastFS(m fstest.MapFS) *fastFS {
	f := &fastFS{m: m, dirs: map[string]bool{".": true}, memo: map[string]resolution{}}
	for name, file := range m {
		if file.Mode.IsDir() {
			f.dirs[name] = true
		}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			f.dirs[d] = true
		}
	}
	return f
}

// resolve follows the symbolic links among the components of name. The
// resolution of each directory is remembered, as a kernel's dentry cache
// does.
func (f *fastFS) resolve(name string, depth int) (string, error) {
	switch {
	case depth > 40:
		return "", syscall.ELOOP
	case !fs.ValidPath(name):
		return "", fs.ErrNotExist
	case name == ".":
		return name, nil
	}
	dir, base := path.Dir(name), path.Base(name)
	rdir, err := f.resolveDir(dir, depth)
	if err != nil {
		return "", err
	}
	full := base
	if rdir != "." {
		full = rdir + "/" + base
	}
	if file := f.m[full]; file != nil && file.Mode.Type() == fs.ModeSymlink {
		target := string(file.Data)
		if path.IsAbs(target) {
			rdir = "."
		}
		return f.resolve(path.Join(rdir, target), depth+1)
	}
	return full, nil
}

func (f *fastFS) resolveDir(dir string, depth int) (string, error) {
	f.mu.Lock()
	r, ok := f.memo[dir]
	f.mu.Unlock()
	if ok {
		return r.name, r.err
	}
	r.name, r.err = f.resolve(dir, depth+1)
	f.mu.Lock()
	f.memo[dir] = r
	f.mu.Unlock()
	return r.name, r.err
}

// resolveParent resolves name's directory, and names the entry there
// without following it.
func (f *fastFS) resolveParent(op, name string) (string, error) {
	dir, err := f.resolve(path.Dir(name), 0)
	p := path.Join(dir, path.Base(name))
	if err == nil && f.m[p] == nil && !f.dirs[p] {
		err = fs.ErrNotExist
	}
	if err != nil {
		return "", &fs.PathError{Op: op, Path: name, Err: err}
	}
	return p, nil
}

func (f *fastFS) Open(name string) (fs.File, error) {
	real, err := f.resolve(name, 0)
	if err == nil {
		if file := f.m[real]; file != nil && !file.Mode.IsDir() {
			return &memFile{name: path.Base(name), f: file}, nil
		}
		if f.dirs[real] {
			return f.m.Open(real)
		}
		err = fs.ErrNotExist
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: err}
}

func (f *fastFS) Lstat(name string) (fs.FileInfo, error) {
	p, err := f.resolveParent("lstat", name)
	if err != nil {
		return nil, err
	}
	return f.m.Lstat(p)
}

func (f *fastFS) ReadLink(name string) (string, error) {
	p, err := f.resolveParent("readlink", name)
	if err != nil {
		return "", err
	}
	return f.m.ReadLink(p)
}

func (f *fastFS) Stat(name string) (fs.FileInfo, error) {
	real, err := f.resolve(name, 0)
	if err == nil && f.m[real] == nil && !f.dirs[real] {
		err = fs.ErrNotExist
	}
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return f.m.Stat(real)
}

// memFile is an open regular file of a fastFS.
type memFile struct {
	name string
	f    *fstest.MapFile
	off  int
}

func (m *memFile) Stat() (fs.FileInfo, error) { return memInfo{m.name, m.f}, nil }
func (m *memFile) Close() error               { return nil }
func (m *memFile) Read(b []byte) (int, error) {
	if m.off >= len(m.f.Data) {
		return 0, io.EOF
	}
	n := copy(b, m.f.Data[m.off:])
	m.off += n
	return n, nil
}

type memInfo struct {
	name string
	f    *fstest.MapFile
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return int64(len(i.f.Data)) }
func (i memInfo) Mode() fs.FileMode  { return i.f.Mode }
func (i memInfo) ModTime() time.Time { return i.f.ModTime }
func (i memInfo) IsDir() bool        { return i.f.Mode.IsDir() }
func (i memInfo) Sys() any           { return i.f.Sys }

func TestFastFSLinks(t *testing.T) {
	b := newFastFS(fstest.MapFS{
		"a/self":  &fstest.MapFile{Data: []byte("self"), Mode: fs.ModeSymlink},
		"a/up":    &fstest.MapFile{Data: []byte("../b"), Mode: fs.ModeSymlink},
		"a/abs":   &fstest.MapFile{Data: []byte("/b/f"), Mode: fs.ModeSymlink},
		"a/out":   &fstest.MapFile{Data: []byte("../../x"), Mode: fs.ModeSymlink},
		"b/f":     &fstest.MapFile{Data: []byte("data")},
		"c/loop1": &fstest.MapFile{Data: []byte("loop2"), Mode: fs.ModeSymlink},
		"c/loop2": &fstest.MapFile{Data: []byte("loop1"), Mode: fs.ModeSymlink},
	})
	for _, name := range []string{"a/self", "c/loop1", "a/self/x"} {
		if _, err := b.Open(name); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("Open(%s) = %v, want ELOOP", name, err)
		}
	}
	if data, err := fs.ReadFile(b, "a/up/f"); err != nil || string(data) != "data" {
		t.Errorf("a/up/f = %q, %v", data, err)
	}
	if data, err := fs.ReadFile(b, "a/abs"); err != nil || string(data) != "data" {
		t.Errorf("a/abs = %q, %v", data, err)
	}
	if _, err := b.Open("a/out"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a/out = %v", err)
	}
	if l, err := fs.ReadLink(b, "a/self"); err != nil || l != "self" {
		t.Errorf("ReadLink(a/self) = %q, %v", l, err)
	}
}
