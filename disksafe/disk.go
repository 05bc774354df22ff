package disksafe

import (
	"errors"
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

	// Serial is the disk's serial: what every place in Sources says, as
	// the first of them spells it. "" when no place reports a serial, or
	// when two places disagree (SerialsAgree is false): such a disk's
	// serial is unknown, and it reports no serial at all.
	Serial string
	// Serials holds every distinct spelling in Sources, in their order.
	// A disk reports a serial S when its places agree and S is one of
	// these, byte for byte. Two namespaces of one NVMe controller both
	// report the controller's serial, so that serial names neither alone.
	Serials []string
	// Sources holds each place the kernel or udev reports a serial for the
	// disk, with what it says there, in this order: device/serial (NVMe
	// controller or subsystem, MMC), serial (virtio-blk), device/vpd_pg80
	// (SCSI and SATA through libata: VPD page 0x80), udev's
	// ID_SERIAL_SHORT, udev's ID_SCSI_SERIAL. Each is trimmed of blanks
	// and NULs; a value that is not printable ASCII, or longer than 256
	// bytes, is left out. When udev's record holds ID_SCSI_SERIAL, scsi_id
	// wrote it, and its ID_SERIAL_SHORT is the identifier scsi_id chose
	// (from VPD page 0x83 when the disk has one, such as its NAA WWN): not
	// a serial, so not a source. A WWN is never a source.
	Sources []SerialSource
	// SerialsAgree is true when no two of Sources disagree (see
	// SerialSource), as when there is one or none; List sets it. A disk
	// whose places disagree reports no serial, and Check refuses to wipe
	// while one of its places says the declared serial
	// (ErrSerialConflict).
	SerialsAgree bool

	WWN   string // wwid, device/wwid, udev ID_WWN_WITH_EXTENSION or ID_WWN; informational
	Model string // device/model or udev ID_MODEL; informational

	// Transport is how the disk is attached, for people: "usb", "nvme",
	// "ata", "scsi", "virtio", "mmc", "loop", or "" when unknown.
	Transport string

	// Removable is the kernel's removable flag, or an MMC device of type
	// SD (an SD card, which the kernel does not flag).
	Removable bool
	// RemovableErr is why the removable flag is unknown: the attribute
	// (or an MMC device's type) cannot be read, or holds a value the
	// kernel never writes. nil when it was read. A disk whose flag is
	// unknown is not called removable; Check refuses to wipe it
	// (ErrRemovableUnreadable).
	RemovableErr error

	// USB is true when the disk's sysfs device path runs through a USB
	// bus (a parent is a USB root hub, usbN, or a USB device or interface,
	// such as 2-1 or 2-1:1.0), or udev says ID_BUS=usb or an ID_PATH
	// through usb.
	USB bool

	// ReadOnly is the kernel's ro flag.
	ReadOnly bool
	// ReadOnlyErr is why the ro flag is unknown: the attribute cannot be
	// read, or holds neither 0 nor 1. nil when it was read. Check refuses
	// to wipe such a disk (ErrReadOnlyUnreadable).
	ReadOnlyErr error

	// SysPath is the resolved sysfs device path, e.g.
	// /sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda;
	// "" when /sys/block/<name> is not a link.
	SysPath string
	// SysPathErr is why SysPath is unknown: /sys/block/<name> cannot be
	// read as a link into /sys. Then only udev can tell USB, so USB is
	// false unless udev says so, and Check refuses to wipe the disk
	// (ErrDevicePathUnreadable). nil when SysPath was read.
	SysPathErr error

	// UdevErr is why the disk's udev record cannot be read: its device
	// number is unknown, so the record cannot be found, or
	// /run/udev/data/b<dev> exists and cannot be read. nil when the record
	// was read or there is none (udev reports nothing for the disk). Then
	// what udev would say (a serial, the bus) is unknown, so the disk may
	// be any disk, and Check wipes nothing while it is listed
	// (ErrUdevUnreadable).
	UdevErr error

	// Multipath is the dm-multipath device (e.g. dm-0) that holds the disk
	// as one path to its logical unit, as /sys/block/<dm>/slaves lists it
	// for a device whose dm/uuid begins "mpath-"; "" when none does.
	Multipath string

	// BackingFile is a loop device's backing file; "" for other disks.
	BackingFile string
}

// A SerialSource is one place a disk's serial is read from, and what it
// says there.
//
// Two places agree when they spell one serial alike as udev spells it:
// udev writes a run of blanks as one "_", and so every character it does
// not keep in a name (it keeps letters, digits and #+-.:=@_\), so the
// kernel's "WD WX12" and udev's "WD_WX12" are one serial. Case counts.
type SerialSource struct {
	// Where names the place for people: a sysfs file such as
	// /sys/block/sda/device/vpd_pg80, or udev's ID_SERIAL_SHORT.
	Where  string
	Serial string // the value, trimmed of blanks and NULs
}

// reports reports whether d reports serial: its places agree, and one of
// them spells it so.
func (d *Disk) reports(serial string) bool {
	return d.SerialsAgree && slices.Contains(d.Serials, serial)
}

// mayReport reports whether d's places disagree and one of them says
// serial: d may or may not be the disk that reports it.
func (d *Disk) mayReport(serial string) bool {
	return !d.SerialsAgree && slices.Contains(d.Serials, serial)
}

// disagreement returns two of d's places that disagree: the first that
// says serial (or d's first place when none does), and the first that
// disagrees with it. ok is false when d's places agree.
func (d *Disk) disagreement(serial string) (a, b SerialSource, ok bool) {
	if d.SerialsAgree || len(d.Sources) == 0 {
		return a, b, false
	}
	a = d.Sources[0]
	for _, s := range d.Sources {
		if s.Serial == serial {
			a = s
			break
		}
	}
	for _, s := range d.Sources {
		if !sameSerial(s.Serial, a.Serial) {
			return a, s, true
		}
	}
	return a, b, false
}

// sameSerial reports whether two places that say a and b agree: a and b are
// alike as udev spells them.
func sameSerial(a, b string) bool {
	if a == b {
		return true
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		ca, na := udevChar(a[i:])
		cb, nb := udevChar(b[j:])
		if na == 0 || nb == 0 || ca != cb {
			return false
		}
		i, j = i+na, j+nb
	}
	return true
}

// udevChar returns the first character of s as udev spells a serial, and
// how many bytes of s it stands for: a run of blanks is one "_", and a
// character udev does not keep is "_". n is 0 when s is empty.
func udevChar(s string) (c byte, n int) {
	if s == "" {
		return 0, 0
	}
	if s[0] == ' ' || s[0] == '\t' {
		n = 1
		for n < len(s) && (s[n] == ' ' || s[n] == '\t') {
			n++
		}
		return '_', n
	}
	c = s[0]
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("#+-.:=@_\\", c) >= 0:
		return c, 1
	}
	return '_', 1
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
// listed, with those fields zero (and, for the removable and ro flags and
// the device path, RemovableErr, ReadOnlyErr or SysPathErr saying why), so
// it still counts when Check asks how many disks report a serial. Each
// disk's Multipath names the dm-multipath device, among /sys/block's dm-N,
// that holds it as a path.
//
// List fails only when /sys/block cannot be read.
func List(cfg *Config) ([]Disk, error) {
	root := cfg.root()
	ents, err := fs.ReadDir(root, "sys/block")
	if err != nil {
		return nil, fmt.Errorf("disksafe: list disks: %w", err)
	}
	var disks []Disk
	var paths map[string]string // disk -> the dm-multipath device holding it
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, "dm-") {
			paths = multipathPaths(root, name, paths)
			continue
		}
		if !diskNames.MatchString(name) {
			continue
		}
		if d, ok := readDisk(root, name, cfg); ok {
			disks = append(disks, d)
		}
	}
	for i := range disks {
		disks[i].Multipath = paths[disks[i].Name]
	}
	return disks, nil
}

// multipathPaths adds to m (made when nil) the disks that the device-mapper
// device dm holds as its paths, when it is a dm-multipath device: its
// dm/uuid begins "mpath-", as multipathd names them.
func multipathPaths(root fs.FS, dm string, m map[string]string) map[string]string {
	uuid, err := readAttr(root, "sys/block/"+dm+"/dm/uuid")
	if err != nil || !strings.HasPrefix(uuid, "mpath-") {
		return m
	}
	slaves, err := fs.ReadDir(root, "sys/block/"+dm+"/slaves")
	if err != nil {
		return m
	}
	for _, e := range slaves {
		if m == nil {
			m = map[string]string{}
		}
		m[e.Name()] = dm
	}
	return m
}

// readDisk describes /sys/block/<name>. ok is false for a device that is not
// listed: a hidden NVMe path, or a loop device that is unused or not asked
// for.
func readDisk(root fs.FS, name string, cfg *Config) (d Disk, ok bool) {
	s, ok := readSys(root, name, cfg.loop())
	if !ok {
		return Disk{Name: name}, false
	}
	d = describe(s)
	if s.devErr == nil && d.Dev == "" {
		cfg.logger().Debug("disksafe: unexpected device number", "disk", name, "dev", s.dev)
	}
	return d, true
}

// sysDisk is what sysfs and the udev database hold for one disk, read and
// not yet judged: describe makes a Disk of it without I/O. A file that
// cannot be read holds nil or ""; the fields whose errors count keep them.
type sysDisk struct {
	name        string
	dir         string // sys/block/<name>
	backingFile string // loop/backing_file; "" for other disks

	dev       string // dev, trimmed
	devErr    error
	size      string // size, trimmed
	removable string // removable, trimmed
	remErr    error
	ro        string // ro, trimmed
	roErr     error
	mmcType   string // device/type, trimmed; read for mmcblk disks only
	mmcErr    error

	deviceSerial string // device/serial
	serial       string // serial
	vpd80        []byte // device/vpd_pg80
	wwid         string // wwid
	deviceWWID   string // device/wwid; read only when wwid holds no value
	model        string // device/model

	link    string // the /sys/block/<name> link
	linkErr error

	udev    []byte // /run/udev/data/b<dev>; read only when dev parses
	udevErr error
}

// readSys reads what describe needs of /sys/block/<name> and its udev
// record. ok is false for a device that is not listed: a hidden NVMe path,
// or a loop device when loop is false or it has no backing file.
func readSys(root fs.FS, name string, loop bool) (s sysDisk, ok bool) {
	dir := "sys/block/" + name
	s.name, s.dir = name, dir
	// A hidden NVMe namespace is one path of a multipath namespace.
	if strings.HasPrefix(name, "nvme") && attrIs(root, dir+"/hidden", "1") {
		return s, false
	}
	if strings.HasPrefix(name, "loop") {
		if !loop {
			return s, false
		}
		bf, err := readAttr(root, dir+"/loop/backing_file")
		if err != nil || bf == "" {
			return s, false
		}
		s.backingFile = bf
	}
	s.dev, s.devErr = readAttr(root, dir+"/dev")
	s.size, _ = readAttr(root, dir+"/size")
	s.removable, s.remErr = readAttr(root, dir+"/removable")
	s.ro, s.roErr = readAttr(root, dir+"/ro")
	if strings.HasPrefix(name, "mmcblk") {
		s.mmcType, s.mmcErr = readAttr(root, dir+"/device/type")
	}
	s.deviceSerial = readString(root, dir+"/device/serial")
	s.serial = readString(root, dir+"/serial")
	s.vpd80, _ = readFile(root, dir+"/device/vpd_pg80")
	s.wwid = readString(root, dir+"/wwid")
	if _, ok := cleanValue(s.wwid); !ok {
		s.deviceWWID = readString(root, dir+"/device/wwid")
	}
	s.model = readString(root, dir+"/device/model")
	s.link, s.linkErr = fs.ReadLink(root, dir)
	if maj, min, ok := parseDev(s.dev); ok {
		s.udev, s.udevErr = readFile(root, udevRecord(maj, min))
	}
	return s, true
}

// udevRecord is the path of the udev record of block device maj:min.
func udevRecord(maj, min uint32) string {
	b := make([]byte, 0, 40)
	b = append(b, "run/udev/data/b"...)
	b = strconv.AppendUint(b, uint64(maj), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(min), 10)
	return string(b)
}

// describe makes the Disk that s holds. It does no I/O.
func describe(s sysDisk) Disk {
	dir := s.dir
	d := Disk{Name: s.name, BackingFile: s.backingFile}
	d.Dev, d.UdevErr = devNumber(dir, s.dev, s.devErr)
	d.Size = sizeBytes(s.size)
	d.Removable, d.RemovableErr = flag(dir, "removable", s.removable, s.remErr)
	if strings.HasPrefix(s.name, "mmcblk") {
		d.Removable, d.RemovableErr = mmcRemovable(dir, s.mmcType, s.mmcErr, d.Removable, d.RemovableErr)
	}
	d.ReadOnly, d.ReadOnlyErr = flag(dir, "ro", s.ro, s.roErr)

	var udev map[string]string
	switch {
	case d.Dev == "":
	case s.udevErr == nil:
		udev = parseUdev(s.udev)
	case !errors.Is(s.udevErr, fs.ErrNotExist):
		d.UdevErr = attrError("run/udev/data/b"+d.Dev, s.udevErr)
	}

	d.Sources = serialSources(dir, s.deviceSerial, s.serial, s.vpd80, udev)
	d.Serial, d.Serials, d.SerialsAgree = serials(d.Sources)
	d.WWN = firstClean(s.wwid, s.deviceWWID, udev["ID_WWN_WITH_EXTENSION"], udev["ID_WWN"])
	d.Model = firstClean(s.model, udev["ID_MODEL"])
	d.SysPath, d.SysPathErr = sysPath(dir, s.link, s.linkErr)
	d.USB, d.Transport = transport(s.name, d.SysPath, udev)
	return d
}

// devNumber returns the device number "major:minor" that the dev attribute
// of dir holds (v, or err when it could not be read), or why it is unknown.
func devNumber(dir, v string, err error) (string, error) {
	if err != nil {
		return "", fmt.Errorf("its device number is unknown: %w", attrError(dir+"/dev", err))
	}
	maj, min, ok := parseDev(v)
	if !ok {
		return "", fmt.Errorf("its device number is unknown: /%s/dev holds %s, not major:minor", dir, quoteValue(v))
	}
	return strconv.FormatUint(uint64(maj), 10) + ":" + strconv.FormatUint(uint64(min), 10), nil
}

// sizeBytes returns the size in bytes of a size attribute, which counts
// 512-byte sectors; 0 for anything that is not such a count.
func sizeBytes(v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<63-1)/512 {
		return 0
	}
	return n * 512
}

// flag reads the sysfs flag attribute dir/attr, which holds v (or err when
// it could not be read); the kernel writes 0 or 1. A flag that cannot be
// read, or holds anything else, is unknown: set is false and err says why,
// naming the file.
func flag(dir, attr, v string, err error) (set bool, _ error) {
	switch {
	case err != nil:
		return false, attrError(dir+"/"+attr, err)
	case v == "1":
		return true, nil
	case v == "0":
		return false, nil
	}
	return false, fmt.Errorf("/%s/%s holds %s, not 0 or 1", dir, attr, quoteValue(v))
}

// mmcRemovable returns the removable flag of the MMC disk of dir given its
// kernel flag (removable, remErr) and its MMC type, which dir/device/type
// holds (v, or err when it could not be read). The kernel does not flag an
// SD card removable; its type says what it is: MMC (soldered eMMC), SD, or
// SD combo. The first reason the flag is unknown is kept.
func mmcRemovable(dir, v string, err error, removable bool, remErr error) (bool, error) {
	switch {
	case err != nil:
		if remErr == nil {
			remErr = attrError(dir+"/device/type", err)
		}
	case v == "SD" || v == "SD combo":
		removable = true
	case v != "MMC" && remErr == nil:
		remErr = fmt.Errorf("/%s/device/type holds %s, not MMC or SD", dir, quoteValue(v))
	}
	return removable, remErr
}

// serialSources returns the places that report a serial for the disk of
// dir, in the order Disk.Sources documents: device/serial, serial and
// device/vpd_pg80 as read ("" or nil when unreadable), then udev's
// properties.
func serialSources(dir, deviceSerial, serial string, vpd80 []byte, udev map[string]string) []SerialSource {
	var sources []SerialSource
	if v, ok := cleanValue(deviceSerial); ok {
		sources = append(sources, SerialSource{"/" + dir + "/device/serial", v})
	}
	if v, ok := cleanValue(serial); ok {
		sources = append(sources, SerialSource{"/" + dir + "/serial", v})
	}
	if v, ok := parseVPD80(vpd80); ok {
		sources = append(sources, SerialSource{"/" + dir + "/device/vpd_pg80", v})
	}
	// With ID_SCSI_SERIAL, ID_SERIAL_SHORT is scsi_id's identifier, not
	// a serial.
	if _, scsiID := udev["ID_SCSI_SERIAL"]; !scsiID {
		if v, ok := cleanValue(udev["ID_SERIAL_SHORT"]); ok {
			sources = append(sources, SerialSource{"udev's ID_SERIAL_SHORT", v})
		}
	}
	if v, ok := cleanValue(udev["ID_SCSI_SERIAL"]); ok {
		sources = append(sources, SerialSource{"udev's ID_SCSI_SERIAL", v})
	}
	return sources
}

// serials returns what sources say together: every distinct spelling in
// their order, whether they agree (no two disagree, as when there is one
// or none), and, when they agree, the serial as the first spells it.
func serials(sources []SerialSource) (serial string, all []string, agree bool) {
	agree = true
	for _, s := range sources {
		if !slices.Contains(all, s.Serial) {
			all = append(all, s.Serial)
		}
		if !sameSerial(s.Serial, sources[0].Serial) {
			agree = false
		}
	}
	if agree && len(sources) > 0 {
		serial = sources[0].Serial
	}
	return serial, all, agree
}

// firstClean returns the first of values that cleanValue keeps, or "".
func firstClean(values ...string) string {
	for _, v := range values {
		if s, ok := cleanValue(v); ok {
			return s
		}
	}
	return ""
}

// sysPath returns the sysfs device path that dir (sys/block/<name>) links
// to (link, or err when it is not a readable link), or why it is unknown.
func sysPath(dir, link string, err error) (string, error) {
	if err != nil {
		return "", attrError(dir, err)
	}
	p := strings.TrimPrefix(link, "/")
	if !path.IsAbs(link) {
		p = path.Join("sys/block", link)
	}
	if !strings.HasPrefix(p, "sys/") {
		return "", fmt.Errorf("/%s links to %s, outside /sys", dir, quoteValue(link))
	}
	return "/" + p, nil
}

// transport returns whether the disk name is on USB and how it is attached,
// from its sysfs device path (see devicePath; "" when unknown) and its udev
// properties: a loop device is "loop", USB wins over all, and udev's ID_BUS
// or the kernel name (nvme) tell what the path does not.
func transport(name, sysPath string, udev map[string]string) (usb bool, t string) {
	if sysPath != "" {
		usb, t = devicePath(sysPath)
	}
	if strings.HasPrefix(name, "loop") {
		t = "loop"
	}
	bus := udev["ID_BUS"]
	if bus == "usb" || strings.Contains(udev["ID_PATH"], "-usb-") {
		usb = true
	}
	switch {
	case usb:
		t = "usb"
	case t == "" && bus != "":
		t, _ = cleanValue(bus)
	case t == "" && strings.HasPrefix(name, "nvme"):
		t = "nvme"
	}
	return usb, t
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

// readString reads a small file of root as a string; "" when it cannot be
// read.
func readString(root fs.FS, name string) string {
	b, _ := readFile(root, name)
	return string(b)
}

// readAttr reads a sysfs attribute as one trimmed line.
func readAttr(root fs.FS, name string) (string, error) {
	b, err := readFile(root, name)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// attrError is the error of a failed read of name (a path below root):
// the file, as the machine names it, and why.
func attrError(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("/%s: %w", name, err)
}

// quoteValue quotes an attribute's value for an error, cut to 32 bytes.
func quoteValue(v string) string {
	if len(v) > 32 {
		return strconv.Quote(v[:32]) + "..."
	}
	return strconv.Quote(v)
}

// attrIs reports whether the attribute reads exactly want.
func attrIs(root fs.FS, name, want string) bool {
	v, err := readAttr(root, name)
	return err == nil && v == want
}

// cleanValue trims blanks and NULs from both ends of b and returns it when
// it is printable ASCII of at most 256 bytes.
func cleanValue[T string | []byte](b T) (string, bool) {
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
