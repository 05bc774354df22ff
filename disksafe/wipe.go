package disksafe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Wiped is a finished wipe. It is a value.
type Wiped struct {
	Disk   string // install_disk as declared
	Name   string // its kernel name
	Serial string // the serial it reports
}

// String returns the runbook's line, "wipe: <disk> reports the serial <serial>".
func (w Wiped) String() string { return "wipe: " + w.Disk + " reports the serial " + w.Serial }

// WipeRecordFile is the name of wipe-disk's record in the state directory
// (DefaultStateDir unless told otherwise).
const WipeRecordFile = "fleet-wipe-disk.json"

// WipeRecord is wipe-disk's record of its wipe, which CheckWiped reads: the file
// WipeRecordFile, a JSON object
//
//	{"boot_id": "...", "install_disk": "/dev/sda", "name": "sda",
//	 "install_disk_serial": "...", "wiped": true, "time": "..."}
//
// Wipe writes it with "wiped": false once the disk is open and proven, just
// before the first write, and with "wiped": true when the wipe is flushed.
// A WipeRecord is a value.
type WipeRecord struct {
	BootID string    `json:"boot_id"`
	Disk   string    `json:"install_disk"`
	Name   string    `json:"name"`
	Serial string    `json:"install_disk_serial"`
	Wiped  bool      `json:"wiped"`
	Time   time.Time `json:"time,omitzero"`
}

// ReadWipeRecord reads dir/WipeRecordFile ("" dir: DefaultStateDir). When
// there is none, errors.Is(err, fs.ErrNotExist).
func ReadWipeRecord(dir string) (WipeRecord, error) {
	if dir == "" {
		dir = DefaultStateDir
	}
	var r WipeRecord
	if err := readJSON(filepath.Join(dir, WipeRecordFile), &r); err != nil {
		return WipeRecord{}, err
	}
	return r, nil
}

// Wipe wipes the disk t declares, once it has proven that disk is the one to
// wipe, and returns the runbook's success line as a Wiped. In order:
//
//  1. It judges (Check); a refusal ends it.
//  2. It opens DevDir/<kernel name> exclusively (O_EXCL): a disk that is
//     mounted, or whose partition is, or that RAID, LVM, swap or another
//     program holds, is refused (ErrInUse). What it opened must be a block
//     device with the judged device number and size (ErrChanged), and a
//     second judgement, with the device open, must choose it again, by
//     the same kernel name and device number (ErrChanged).
//  3. It records this boot's ID in StateDir (WipeRecord) for the install
//     action's guard (CheckWiped); a failure ends it with ErrRecord,
//     nothing wiped.
//  4. It erases every signature that names a partition table, a file
//     system, RAID, LVM, LUKS, ZFS or bcache on the disk and on each
//     partition it finds (in the MBR, both GPTs and sysfs), flushes, asks
//     the kernel to reread the partition table, and records the wipe as
//     finished. A failure here is ErrWipeFailed: the disk may be partly
//     wiped.
//
// Every error it returns begins "wipe: ": its refusals are *Refusal with Op
// "wipe". The context stops the wipe between writes. Wipe needs root
// (CAP_SYS_ADMIN for the exclusive open and the ioctls). It is implemented
// on Linux only; elsewhere it returns ErrUnsupported after the judgement,
// with nothing wiped.
func Wipe(ctx context.Context, t Target, b Boot, cfg *Config) (Wiped, error) {
	log := cfg.logger()
	judge := func() (Disk, error) {
		_, d, err := Check(t, b, cfg)
		if r, ok := err.(*Refusal); ok {
			r.Op = "wipe"
		}
		return d, err
	}
	d, err := judge()
	if err != nil {
		return Wiped{}, err
	}
	serial := strings.TrimSpace(t.Serial)
	if err := ctx.Err(); err != nil {
		return Wiped{}, fmt.Errorf("wipe: %s: %w; nothing wiped", t.Disk, err)
	}

	devPath := filepath.Join(cfg.devDir(), d.Name)
	dev, err := openDevice(devPath, d)
	if err != nil {
		return Wiped{}, openRefusal(t, d, serial, err)
	}
	closed := false
	defer func() {
		if !closed {
			dev.Close()
		}
	}()
	again, err := judge()
	if err != nil {
		return Wiped{}, err
	}
	if again.Name != d.Name || again.Dev != d.Dev {
		return Wiped{}, &Refusal{Op: "wipe", Err: ErrChanged, Disk: t.Disk, Name: d.Name, Serial: serial,
			Cause: fmt.Errorf("it was %s (%s) and is now %s (%s)", d.Name, d.Dev, again.Name, again.Dev)}
	}
	parts := sysPartitions(cfg.root(), d.Name)

	rec := WipeRecord{BootID: b.ID, Disk: t.Disk, Name: d.Name, Serial: serial, Time: time.Now().UTC()}
	if err := writeJSON(cfg.stateDir(), WipeRecordFile, rec); err != nil {
		return Wiped{}, &Refusal{Op: "wipe", Err: ErrRecord, Disk: t.Disk, Name: d.Name, Serial: serial, Cause: err}
	}
	log.Info("disksafe: wiping", "disk", t.Disk, "name", d.Name, "dev", d.Dev, "serial", serial, "size", d.Size)

	failed := func(err error) (Wiped, error) {
		return Wiped{}, &Refusal{Op: "wipe", Err: ErrWipeFailed, Disk: t.Disk, Name: d.Name, Serial: serial, Cause: err}
	}
	if err := erase(ctx, dev, parts, log); err != nil {
		return failed(err)
	}
	closed = true
	if err := dev.Close(); err != nil {
		return failed(fmt.Errorf("close: %w", err))
	}
	rec.Wiped = true
	rec.Time = time.Now().UTC()
	if err := writeJSON(cfg.stateDir(), WipeRecordFile, rec); err != nil {
		return failed(fmt.Errorf("wiped, but the record of the wipe failed: %w", err))
	}
	return Wiped{Disk: t.Disk, Name: d.Name, Serial: serial}, nil
}

// openRefusal turns an openDevice error into the Refusal Wipe returns.
func openRefusal(t Target, d Disk, serial string, err error) error {
	r := &Refusal{Op: "wipe", Err: ErrOpen, Disk: t.Disk, Name: d.Name, Serial: serial, Cause: err}
	switch {
	case errors.Is(err, errDeviceBusy):
		r.Err = ErrInUse
	case errors.Is(err, errDeviceChanged):
		r.Err = ErrChanged
	case errors.Is(err, ErrUnsupported):
		return fmt.Errorf("wipe: %w; nothing wiped", ErrUnsupported)
	}
	return r
}

// The causes openDevice wraps.
var (
	errDeviceBusy    = errors.New("the kernel refused an exclusive open: it, or one of its partitions, is mounted, or held by RAID, LVM, swap or another program")
	errDeviceChanged = errors.New("not the judged device")
)

// device is an open disk: what erase needs of it.
type device interface {
	io.ReaderAt
	io.WriterAt
	Size() int64       // bytes
	SectorSize() int64 // the logical block size
	// Discard discards [off, off+n); errors.ErrUnsupported when the device
	// cannot.
	Discard(off, n int64) error
	Sync() error
	// Reread asks the kernel to reread the partition table.
	Reread() error
	Close() error
}

// extent is a byte range of a disk.
type extent struct{ off, n int64 }

func (e extent) end() int64 { return e.off + e.n }

// What erase zeroes, and why that is enough: the first and last eraseEdge
// bytes of the disk and of each partition, and the btrfs superblock mirrors
// at 64 MiB and 256 GiB of each. That erases the protective MBR, the
// primary GPT (LBA 1-33) and the backup GPT (the last 33 sectors), and the
// signatures of ext2/3/4 (at 1 KiB), xfs (0), btrfs (64 KiB), vfat (0),
// swap (page size - 10), iso9660 (32 KiB), LUKS (0, and LUKS2's secondary
// header at 16 KiB to 4 MiB), md RAID 0.90 (end - 64 KiB, aligned), 1.0
// (end - 8 KiB), 1.1 (0) and 1.2 (4 KiB), LVM (its label in sectors 0-3),
// ZFS (labels in the first and last 512 KiB) and bcache (4 KiB). The
// partitions are the kernel's (sysfs) and those the disk's MBR and primary
// and backup GPTs name, read before the first write.
const (
	// eraseEdge is how much is zeroed at the start and at the end of the
	// disk and of each partition: past the largest LUKS2 secondary header
	// (at 4 MiB) and every other signature above.
	eraseEdge = 8 << 20
	// btrfsMirror is the size zeroed at each btrfs superblock mirror.
	btrfsMirror = 64 << 10
	// maxPartitions bounds the partitions erase considers per source.
	maxPartitions = 256
)

// btrfsMirrors are the offsets of btrfs's superblock copies past the
// primary (64 KiB, inside the first edge).
var btrfsMirrors = []int64{64 << 20, 256 << 30}

// eraseRegions returns the sorted, merged byte ranges erase zeroes on a disk
// of size bytes with the given partitions: the first and last eraseEdge
// bytes of the disk and of each partition, and the btrfs mirrors of each,
// all clipped to the disk.
func eraseRegions(size int64, parts []extent) []extent {
	if size <= 0 {
		return nil
	}
	var rs []extent
	add := func(off, n int64) {
		if off < 0 {
			n += off
			off = 0
		}
		if off >= size || n <= 0 {
			return
		}
		if n > size-off {
			n = size - off
		}
		rs = append(rs, extent{off, n})
	}
	whole := append([]extent{{0, size}}, parts...)
	for _, e := range whole {
		if e.off < 0 || e.n <= 0 || e.off >= size {
			continue
		}
		if e.n > size-e.off {
			e.n = size - e.off
		}
		edge := min(int64(eraseEdge), e.n)
		add(e.off, edge)
		add(e.end()-edge, edge)
		for _, m := range btrfsMirrors {
			if m+btrfsMirror <= e.n {
				add(e.off+m, btrfsMirror)
			}
		}
	}
	slices.SortFunc(rs, func(a, b extent) int {
		switch {
		case a.off < b.off:
			return -1
		case a.off > b.off:
			return 1
		}
		return 0
	})
	var merged []extent
	for _, r := range rs {
		if k := len(merged) - 1; k >= 0 && r.off <= merged[k].end() {
			if r.end() > merged[k].end() {
				merged[k].n = r.end() - merged[k].off
			}
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// erase discards dev where it can, zeroes every signature region, flushes,
// and asks the kernel to reread the partition table. sysParts is the
// kernel's view of the partitions; erase adds what the disk's own tables
// say, read before the first write.
func erase(ctx context.Context, dev device, sysParts []extent, log interface {
	Debug(string, ...any)
	Warn(string, ...any)
}) error {
	size := dev.Size()
	if size <= 0 {
		return errors.New("the device reports no size")
	}
	ss := dev.SectorSize()
	parts := append(slices.Clone(sysParts), partitionTables(dev, size, ss)...)
	regions := eraseRegions(size, parts)

	// Discard first: after a discard a device may read back zeros, the
	// old data or anything else, so the zeros written after it are what
	// any later reader of the signature regions sees.
	// The one discard call, which a large SSD may take seconds to finish,
	// runs to its end whatever ctx says.
	switch err := dev.Discard(0, size); {
	case err == nil:
		log.Debug("disksafe: discarded the whole disk", "bytes", size)
	case errors.Is(err, errors.ErrUnsupported):
		log.Debug("disksafe: the disk does not support discard")
	default:
		log.Warn("disksafe: discard failed; zeroing the signatures regardless", "err", err)
	}

	zero := make([]byte, 1<<20)
	for _, r := range regions {
		for off := r.off; off < r.end(); {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("stopped at byte %d: %w", off, err)
			}
			n := min(int64(len(zero)), r.end()-off)
			if _, err := dev.WriteAt(zero[:n], off); err != nil {
				return fmt.Errorf("write at byte %d: %w", off, err)
			}
			off += n
		}
	}
	if err := dev.Sync(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if err := dev.Reread(); err != nil {
		log.Debug("disksafe: the kernel did not reread the partition table", "err", err)
	}
	return nil
}

// sysPartitions returns the kernel's partitions of disk name, from
// /sys/block/<name>/<partition>/{start,size} (512-byte sectors).
func sysPartitions(root fs.FS, name string) []extent {
	dir := "sys/block/" + name
	ents, err := fs.ReadDir(root, dir)
	if err != nil {
		return nil
	}
	var parts []extent
	for _, e := range ents {
		if len(parts) >= maxPartitions {
			break
		}
		p := dir + "/" + e.Name()
		if _, err := fs.Stat(root, p+"/partition"); err != nil {
			continue
		}
		start, err1 := readSectors(root, p+"/start")
		n, err2 := readSectors(root, p+"/size")
		if err1 != nil || err2 != nil || n <= 0 {
			continue
		}
		parts = append(parts, extent{start, n})
	}
	return parts
}

// readSectors reads a count of 512-byte sectors and returns it in bytes.
func readSectors(root fs.FS, name string) (int64, error) {
	v, err := readAttr(root, name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<63-1)/512 {
		return 0, fmt.Errorf("disksafe: %s: not a sector count", name)
	}
	return n * 512, nil
}
