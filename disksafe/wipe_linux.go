package disksafe

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// blockDevice is a disk opened exclusively.
type blockDevice struct {
	f          *os.File
	size, sect int64
}

// openDevice opens the block device at p for reading and writing with
// O_EXCL, and proves it is the judged disk d: a block device whose device
// number is d.Dev and whose size is d.Size. An exclusive open the kernel
// refuses (EBUSY) is errDeviceBusy; a device that is not d is
// errDeviceChanged.
func openDevice(p string, d Disk) (device, error) {
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			return nil, errDeviceBusy
		}
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return nil, fmt.Errorf("%w: %s is not a block device", errDeviceChanged, p)
	}
	dev := strconv.FormatUint(uint64(unix.Major(st.Rdev)), 10) + ":" + strconv.FormatUint(uint64(unix.Minor(st.Rdev)), 10)
	if dev != d.Dev {
		return nil, fmt.Errorf("%w: %s is device %s, and sysfs gave %s for %s", errDeviceChanged, p, dev, d.Dev, d.Name)
	}
	var size uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size))); e != 0 {
		return nil, &os.PathError{Op: "BLKGETSIZE64", Path: p, Err: e}
	}
	if size > 1<<62 || int64(size) != d.Size {
		return nil, fmt.Errorf("%w: %s holds %d bytes, and sysfs gave %d", errDeviceChanged, p, size, d.Size)
	}
	sect, err := unix.IoctlGetInt(fd, unix.BLKSSZGET)
	if err != nil {
		return nil, &os.PathError{Op: "BLKSSZGET", Path: p, Err: err}
	}
	// Clear O_NONBLOCK, which only kept the open itself from waiting.
	if err := unix.SetNonblock(fd, false); err != nil {
		return nil, &os.PathError{Op: "fcntl", Path: p, Err: err}
	}
	ok = true
	return &blockDevice{f: os.NewFile(uintptr(fd), p), size: int64(size), sect: int64(sect)}, nil
}

func (b *blockDevice) ReadAt(p []byte, off int64) (int, error)  { return b.f.ReadAt(p, off) }
func (b *blockDevice) WriteAt(p []byte, off int64) (int, error) { return b.f.WriteAt(p, off) }
func (b *blockDevice) Size() int64                              { return b.size }
func (b *blockDevice) SectorSize() int64                        { return b.sect }
func (b *blockDevice) Sync() error                              { return b.f.Sync() }
func (b *blockDevice) Close() error                             { return b.f.Close() }

func (b *blockDevice) Discard(off, n int64) error {
	rng := [2]uint64{uint64(off), uint64(n)}
	sc, err := b.f.SyscallConn()
	if err != nil {
		return err
	}
	var e unix.Errno
	if err := sc.Control(func(fd uintptr) {
		_, _, e = unix.Syscall(unix.SYS_IOCTL, fd, unix.BLKDISCARD, uintptr(unsafe.Pointer(&rng)))
	}); err != nil {
		return err
	}
	switch e {
	case 0:
		return nil
	case unix.EOPNOTSUPP, unix.ENOTTY:
		return fmt.Errorf("BLKDISCARD: %w (%w)", errors.ErrUnsupported, e)
	}
	return fmt.Errorf("BLKDISCARD: %w", e)
}

func (b *blockDevice) Reread() error {
	sc, err := b.f.SyscallConn()
	if err != nil {
		return err
	}
	var e unix.Errno
	if err := sc.Control(func(fd uintptr) {
		_, _, e = unix.Syscall(unix.SYS_IOCTL, fd, unix.BLKRRPART, 0)
	}); err != nil {
		return err
	}
	if e != 0 {
		return fmt.Errorf("BLKRRPART: %w", e)
	}
	return nil
}
