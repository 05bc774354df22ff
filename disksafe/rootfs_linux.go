package disksafe

import (
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// rawDirFS is os.DirFS(dir) with lighter files: Open reads a file with
// plain open, read and close system calls, where an *os.File also asks
// the poller about each sysfs attribute. Listing 256 disks opens thousands
// of them.
type rawDirFS string

func newRootFS(dir string) fs.FS { return rawDirFS(dir) }

func (d rawDirFS) join(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return string(d), nil
	}
	if d == "/" {
		return "/" + name, nil
	}
	return string(d) + "/" + name, nil
}

// Open opens name for reading.
func (d rawDirFS) Open(name string) (fs.File, error) {
	p, err := d.join("open", name)
	if err != nil {
		return nil, err
	}
	var fd int
	for {
		fd, err = unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &rawFile{fd: fd, path: p}, nil
}

func (d rawDirFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := d.join("readdir", name)
	if err != nil {
		return nil, err
	}
	return os.ReadDir(p)
}

func (d rawDirFS) ReadLink(name string) (string, error) {
	p, err := d.join("readlink", name)
	if err != nil {
		return "", err
	}
	return os.Readlink(p)
}

func (d rawDirFS) Lstat(name string) (fs.FileInfo, error) {
	p, err := d.join("lstat", name)
	if err != nil {
		return nil, err
	}
	return os.Lstat(p)
}

func (d rawDirFS) Stat(name string) (fs.FileInfo, error) {
	p, err := d.join("stat", name)
	if err != nil {
		return nil, err
	}
	return os.Stat(p)
}

// rawFile is an open file of a rawDirFS. It is not safe for concurrent use.
type rawFile struct {
	fd   int
	path string
	dir  []fs.DirEntry // what ReadDir has yet to return; nil before it is read
	read bool          // the directory has been read
}

// ReadDir reads a directory, as fs.ReadDirFile says.
func (f *rawFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if f.fd < 0 {
		return nil, fs.ErrClosed
	}
	if !f.read {
		ents, err := os.ReadDir(f.path)
		if err != nil {
			return nil, err
		}
		f.dir, f.read = ents, true
	}
	if n <= 0 {
		ents := f.dir
		f.dir = nil
		return ents, nil
	}
	if len(f.dir) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(f.dir))
	ents := f.dir[:n]
	f.dir = f.dir[n:]
	return ents, nil
}

func (f *rawFile) Read(b []byte) (int, error) {
	if f.fd < 0 {
		return 0, fs.ErrClosed
	}
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(f.fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, &fs.PathError{Op: "read", Path: f.path, Err: err}
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f *rawFile) Close() error {
	if f.fd < 0 {
		return fs.ErrClosed
	}
	err := unix.Close(f.fd)
	f.fd = -1
	return err
}

func (f *rawFile) Stat() (fs.FileInfo, error) {
	if f.fd < 0 {
		return nil, fs.ErrClosed
	}
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: f.path, Err: err}
	}
	return rawInfo{name: pathBase(f.path), st: st}, nil
}

type rawInfo struct {
	name string
	st   unix.Stat_t
}

func (i rawInfo) Name() string       { return i.name }
func (i rawInfo) Size() int64        { return i.st.Size }
func (i rawInfo) ModTime() time.Time { return time.Unix(i.st.Mtim.Unix()) }
func (i rawInfo) IsDir() bool        { return i.st.Mode&unix.S_IFMT == unix.S_IFDIR }

func (i rawInfo) Mode() fs.FileMode {
	m := fs.FileMode(i.st.Mode & 0o777)
	switch i.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	}
	return m
}
func (i rawInfo) Sys() any { return &i.st }

func pathBase(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}
