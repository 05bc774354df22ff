package disksafe

import (
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Disk is one whole block device as sysfs and the udev database describe it.
// A Disk is a value read at one moment; it does not follow the device.
type Disk struct {
	Name string // kernel name, e.g. sda, nvme0n1, vda, mmcblk0, loop3
	Dev  string // device number "major:minor" from sysfs; "" when unreadable

	// Size in bytes (sysfs "size" counts 512-byte sectors); 0 when
	// unreadable or when the device holds no medium.
	Size int64

	// Serial is the first serial found, in the order of Serials.
	Serial string
	// Serials holds every distinct serial the kernel or udev reports for
	// the disk, in this order: device/serial (NVMe controller or
	// subsystem, MMC), serial (virtio-blk), device/vpd_pg80 (SCSI and SATA
	// through libata: VPD page 0x80), udev ID_SERIAL_SHORT, udev
	// ID_SCSI_SERIAL. Each is trimmed of blanks and NULs; a value that is
	// not printable ASCII, or longer than 256 bytes, is left out. A disk
	// reports a serial S when S is one of them, byte for byte. Two
	// namespaces of one NVMe controller both report the controller's
	// serial, so that serial names neither alone.
	Serials []string

	WWN   string // wwid, device/wwid, udev ID_WWN_WITH_EXTENSION or ID_WWN; informational
	Model string // device/model or udev ID_MODEL; informational

	// Transport is how the disk is attached, for people: "usb", "nvme",
	// "ata", "scsi", "virtio", "mmc", "loop", or "" when unknown.
	Transport string

	// Removable is the kernel's removable flag, or an MMC device of type
	// SD (an SD card, which the kernel does not flag). An unreadable or
	// unexpected flag counts as removable.
	Removable bool

	// USB is true when the disk's sysfs device path runs through a USB
	// bus (a parent is a USB root hub, usbN, or a USB device or interface,
	// such as 2-1 or 2-1:1.0), or udev says ID_BUS=usb or an ID_PATH
	// through usb.
	USB bool

	// ReadOnly is the kernel's ro flag. An unreadable or unexpected flag
	// counts as read-only.
	ReadOnly bool

	// SysPath is the resolved sysfs device path, e.g.
	// /sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda;
	// "" when /sys/block/<name> is not a link.
	SysPath string

	// BackingFile is a loop device's backing file; "" for other disks.
	BackingFile string
}

// reports reports whether d reports serial.
func (d *Disk) reports(serial string) bool {
	for _, s := range d.Serials {
		if s == serial {
			return true
		}
	}
	return false
}

// diskNames are the kernel names List considers disks: SCSI/SATA/SAS/USB
// (sd), virtio (vd), Xen (xvd), IDE (hd), NVMe namespaces (nvmeXnY, not the
// controller paths nvmeXcYnZ), MMC/SD (mmcblkN, not its boot and RPMB areas)
// and loop devices. Everything else (ram, zram, dm, md, sr, nbd, rbd,
// drbd, ...) is never listed, so never wiped.
var diskNames = regexp.MustCompile(`^(sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+|nvme[0-9]+n[0-9]+|mmcblk[0-9]+|loop[0-9]+)$`)

// maxAttr bounds what is read of one sysfs attribute or udev record.
const maxAttr = 64 << 10

// List returns the machine's whole disks from cfg's Root: each entry of
// /sys/block whose kernel name is a disk's (see below), described from
// sysfs and the udev database (/run/udev/data/b<major>:<minor>).
//
// Listed: sd*, vd*, xvd*, hd*, nvme<N>n<M>, mmcblk<N>, and, only when
// cfg.Loop is set, loop devices that have a backing file. Never listed:
// partitions (they are not in /sys/block), ram, zram, dm, md, sr, nbd and
// any other kind, NVMe multipath controller paths (hidden), and MMC boot
// and RPMB areas. A disk whose attributes cannot all be read is still
// listed, with those fields zero (or, for removable and ro, set), so it
// still counts when Check asks how many disks report a serial.
//
// List fails only when /sys/block cannot be read.
func List(cfg *Config) ([]Disk, error) {
	root := cfg.root()
	ents, err := fs.ReadDir(root, "sys/block")
	if err != nil {
		return nil, fmt.Errorf("disksafe: list disks: %w", err)
	}
	var disks []Disk
	for _, e := range ents {
		name := e.Name()
		if !diskNames.MatchString(name) {
			continue
		}
		if d, ok := readDisk(root, name, cfg); ok {
			disks = append(disks, d)
		}
	}
	return disks, nil
}

// readDisk describes /sys/block/<name>. ok is false for a device that is not
// listed: a hidden NVMe path, or a loop device that is unused or not asked
// for.
func readDisk(root fs.FS, name string, cfg *Config) (d Disk, ok bool) {
	log := cfg.logger()
	dir := "sys/block/" + name
	d.Name = name

	// A hidden NVMe namespace is one path of a multipath namespace.
	if strings.HasPrefix(name, "nvme") && attrIs(root, dir+"/hidden", "1") {
		return d, false
	}
	if strings.HasPrefix(name, "loop") {
		if !cfg.loop() {
			return d, false
		}
		bf, err := readAttr(root, dir+"/loop/backing_file")
		if err != nil || bf == "" {
			return d, false
		}
		d.BackingFile = bf
		d.Transport = "loop"
	}

	if v, err := readAttr(root, dir+"/dev"); err == nil {
		if maj, min, ok := parseDev(v); ok {
			d.Dev = strconv.FormatUint(uint64(maj), 10) + ":" + strconv.FormatUint(uint64(min), 10)
		} else {
			log.Debug("disksafe: unexpected device number", "disk", name, "dev", v)
		}
	}
	if v, err := readAttr(root, dir+"/size"); err == nil {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 && n <= (1<<63-1)/512 {
			d.Size = n * 512
		}
	}
	d.Removable = !attrIs(root, dir+"/removable", "0")
	d.ReadOnly = !attrIs(root, dir+"/ro", "0")
	if strings.HasPrefix(name, "mmcblk") && attrIs(root, dir+"/device/type", "SD") {
		d.Removable = true
	}

	var udev map[string]string
	if d.Dev != "" {
		if b, err := readFile(root, "run/udev/data/b"+d.Dev); err == nil {
			udev = parseUdev(b)
		}
	}

	// Serials, in the documented order.
	addSerial := func(s string, ok bool) {
		if ok && s != "" && !slices.Contains(d.Serials, s) {
			d.Serials = append(d.Serials, s)
		}
	}
	for _, f := range []string{dir + "/device/serial", dir + "/serial"} {
		if b, err := readFile(root, f); err == nil {
			addSerial(cleanValue(b))
		}
	}
	if b, err := readFile(root, dir+"/device/vpd_pg80"); err == nil {
		addSerial(parseVPD80(b))
	}
	addSerial(cleanValue([]byte(udev["ID_SERIAL_SHORT"])))
	addSerial(cleanValue([]byte(udev["ID_SCSI_SERIAL"])))
	if len(d.Serials) > 0 {
		d.Serial = d.Serials[0]
	}

	for _, f := range []string{dir + "/wwid", dir + "/device/wwid"} {
		if d.WWN == "" {
			if b, err := readFile(root, f); err == nil {
				d.WWN, _ = cleanValue(b)
			}
		}
	}
	for _, k := range []string{"ID_WWN_WITH_EXTENSION", "ID_WWN"} {
		if d.WWN == "" {
			d.WWN, _ = cleanValue([]byte(udev[k]))
		}
	}
	if b, err := readFile(root, dir+"/device/model"); err == nil {
		d.Model, _ = cleanValue(b)
	}
	if d.Model == "" {
		d.Model, _ = cleanValue([]byte(udev["ID_MODEL"]))
	}

	// The device path, and USB.
	if link, err := fs.ReadLink(root, dir); err == nil {
		p := strings.TrimPrefix(link, "/")
		if !path.IsAbs(link) {
			p = path.Join("sys/block", link)
		}
		if strings.HasPrefix(p, "sys/") {
			d.SysPath = "/" + p
			usb, transport := devicePath(p)
			d.USB = usb
			if d.Transport == "" {
				d.Transport = transport
			}
		}
	}
	bus := udev["ID_BUS"]
	if bus == "usb" || strings.Contains(udev["ID_PATH"], "-usb-") {
		d.USB = true
	}
	switch {
	case d.USB:
		d.Transport = "usb"
	case d.Transport == "" && bus != "":
		t, _ := cleanValue([]byte(bus))
		d.Transport = t
	case d.Transport == "" && strings.HasPrefix(name, "nvme"):
		d.Transport = "nvme"
	}
	return d, true
}

// devicePath reads a sysfs device path: whether it runs through a USB bus,
// and how the disk is attached, for people. A path runs through USB when a
// component is a USB root hub (usb1) or a USB device or interface (2-1,
// 2-1.4, 2-1.4:1.0): the USB core names them so, and only below a USB host
// controller.
func devicePath(p string) (usb bool, transport string) {
	for c := range strings.SplitSeq(p, "/") {
		switch {
		case numbered(c, "usb") || usbPort(c):
			usb = true
		case numbered(c, "ata"):
			transport = "ata"
		case numbered(c, "virtio"):
			transport = "virtio"
		case numbered(c, "mmc"):
			transport = "mmc"
		case strings.HasPrefix(c, "nvme"):
			transport = "nvme"
		case transport == "" && numbered(c, "host"):
			transport = "scsi"
		}
	}
	if usb {
		transport = "usb"
	}
	return usb, transport
}

// numbered reports whether c is prefix followed by one or more digits.
func numbered(c, prefix string) bool {
	rest, ok := strings.CutPrefix(c, prefix)
	return ok && digits(rest) == len(rest) && rest != ""
}

// digits returns how many ASCII digits s begins with.
func digits(s string) int {
	n := 0
	for n < len(s) && '0' <= s[n] && s[n] <= '9' {
		n++
	}
	return n
}

// usbPort reports whether c names a USB device or interface:
// <bus>-<port>[.<port>...][:<config>.<interface>].
func usbPort(c string) bool {
	n := digits(c)
	if n == 0 || n == len(c) || c[n] != '-' {
		return false
	}
	c = c[n+1:]
	for {
		n = digits(c)
		if n == 0 {
			return false
		}
		c = c[n:]
		if c == "" {
			return true
		}
		if c[0] == ':' {
			cfg, iface, ok := strings.Cut(c[1:], ".")
			return ok && cfg != "" && iface != "" && digits(cfg) == len(cfg) && digits(iface) == len(iface)
		}
		if c[0] != '.' {
			return false
		}
		c = c[1:]
	}
}

// Layout is what Read saw: the machine's disks and the kernel name the
// declared install_disk resolves to. It is a value.
type Layout struct {
	Disks []Disk

	// InstallDisk is the install_disk path Read resolved, as written.
	InstallDisk string
	// InstallDiskName is the kernel name InstallDisk resolves to (a disk's,
	// or a partition's such as sda1); "" when it resolves to no block
	// device.
	InstallDiskName string
}

// Read lists the disks (List) and resolves installDisk (Resolve).
func Read(installDisk string, cfg *Config) (Layout, error) {
	disks, err := List(cfg)
	if err != nil {
		return Layout{}, err
	}
	l := Layout{Disks: disks, InstallDisk: installDisk}
	if installDisk != "" {
		l.InstallDiskName = Resolve(installDisk, cfg)
	}
	return l, nil
}

// Resolve returns the kernel name of the block device at p, an absolute path
// under /dev such as /dev/sda or /dev/disk/by-id/nvme-X: it follows
// symbolic links (at most 40) through cfg's Root, and names the final
// /dev/<name> when it is a block device and /sys/class/block/<name> exists.
// It returns "" for a path that resolves to nothing of the kind.
func Resolve(p string, cfg *Config) string {
	root := cfg.root()
	if !underDev(p) {
		return ""
	}
	p = path.Clean(p)
	for range 40 {
		fi, err := fs.Lstat(root, p[1:])
		if err != nil {
			return ""
		}
		if fi.Mode().Type() != fs.ModeSymlink {
			if fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0 {
				return ""
			}
			if path.Dir(p) != "/dev" {
				return ""
			}
			name := path.Base(p)
			if _, err := fs.Stat(root, "sys/class/block/"+name); err != nil {
				return ""
			}
			return name
		}
		link, err := fs.ReadLink(root, p[1:])
		if err != nil {
			return ""
		}
		if path.IsAbs(link) {
			p = path.Clean(link)
		} else {
			p = path.Join(path.Dir(p), link)
		}
		if p == "/" {
			return ""
		}
	}
	return ""
}

// underDev reports whether p is an absolute path below /dev.
func underDev(p string) bool {
	return path.IsAbs(p) && strings.HasPrefix(path.Clean(p), "/dev/")
}

// readFile reads a small file of root: at most maxAttr bytes.
func readFile(root fs.FS, name string) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Most attributes are a few bytes: start small, and grow to maxAttr.
	b := make([]byte, 0, 64)
	for {
		if len(b) > maxAttr {
			return nil, fmt.Errorf("disksafe: %s is larger than %d bytes", name, maxAttr)
		}
		if len(b) == cap(b) {
			b = slices.Grow(b, min(cap(b), maxAttr+1-len(b)))
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case err == io.EOF && len(b) <= maxAttr:
			return b, nil
		case err != nil && err != io.EOF:
			return nil, err
		}
	}
}

// readAttr reads a sysfs attribute as one trimmed line.
func readAttr(root fs.FS, name string) (string, error) {
	b, err := readFile(root, name)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// attrIs reports whether the attribute reads exactly want.
func attrIs(root fs.FS, name, want string) bool {
	v, err := readAttr(root, name)
	return err == nil && v == want
}

// cleanValue trims blanks and NULs from both ends of b and returns it when
// it is printable ASCII of at most 256 bytes.
func cleanValue(b []byte) (string, bool) {
	s := strings.Trim(string(b), " \t\r\n\x00")
	if s == "" || len(s) > 256 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return "", false
		}
	}
	return s, true
}

// parseVPD80 returns the serial in a SCSI VPD page 0x80 (Unit Serial Number)
// as sysfs's device/vpd_pg80 holds it: byte 1 is the page code 0x80, bytes
// 2-3 the big-endian length of the serial that follows the 4-byte header.
func parseVPD80(b []byte) (string, bool) {
	if len(b) < 4 || b[1] != 0x80 {
		return "", false
	}
	n := int(b[2])<<8 | int(b[3])
	body := b[4:]
	if n < len(body) {
		body = body[:n]
	}
	return cleanValue(body)
}

// parseUdev returns the properties (E: lines) of a udev database record.
func parseUdev(b []byte) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\r\n")
		kv, ok := strings.CutPrefix(line, "E:")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if _, dup := m[k]; !dup {
			m[k] = v
		}
	}
	return m
}

// parseDev parses a sysfs dev attribute, "major:minor".
func parseDev(s string) (major, minor uint32, ok bool) {
	a, b, found := strings.Cut(s, ":")
	if !found {
		return 0, 0, false
	}
	ma, err1 := strconv.ParseUint(a, 10, 32)
	mi, err2 := strconv.ParseUint(b, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uint32(ma), uint32(mi), true
}
