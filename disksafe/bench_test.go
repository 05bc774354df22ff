package disksafe

import (
	"fmt"
	"io"
	"io/fs"
	"path"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

// fastFS is a MapFS whose missing files are missing at once: MapFS looks
// for a directory of that name through the whole map first, which makes a
// fake machine of many disks slower than the package's own work.
type fastFS struct {
	fstest.MapFS
	dirs map[string]bool

	mu   sync.Mutex
	memo map[string]string // directory -> its resolution; "" none
}

func newFastFS(m fstest.MapFS) *fastFS {
	f := &fastFS{MapFS: m, dirs: map[string]bool{".": true}, memo: map[string]string{}}
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
func (f *fastFS) resolve(name string, depth int) (string, bool) {
	if depth > 40 || !fs.ValidPath(name) {
		return "", false
	}
	if name == "." {
		return name, true
	}
	dir, base := path.Dir(name), path.Base(name)
	rdir, ok := f.resolveDir(dir, depth)
	if !ok {
		return "", false
	}
	full := base
	if rdir != "." {
		full = rdir + "/" + base
	}
	if file := f.MapFS[full]; file != nil && file.Mode.Type() == fs.ModeSymlink {
		target := string(file.Data)
		if path.IsAbs(target) {
			return "", false
		}
		return f.resolve(path.Join(rdir, target), depth+1)
	}
	return full, true
}

func (f *fastFS) resolveDir(dir string, depth int) (string, bool) {
	f.mu.Lock()
	r, ok := f.memo[dir]
	f.mu.Unlock()
	if ok {
		return r, r != ""
	}
	r, found := f.resolve(dir, depth+1)
	if !found {
		r = ""
	}
	f.mu.Lock()
	f.memo[dir] = r
	f.mu.Unlock()
	return r, found
}

func (f *fastFS) exists(name string) bool {
	real, ok := f.resolve(name, 0)
	return ok && (f.MapFS[real] != nil || f.dirs[real])
}

func (f *fastFS) Open(name string) (fs.File, error) {
	real, ok := f.resolve(name, 0)
	if ok {
		if file := f.MapFS[real]; file != nil && !file.Mode.IsDir() {
			return &memFile{name: path.Base(name), f: file}, nil
		}
	}
	if !ok || !f.dirs[real] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return f.MapFS.Open(real)
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

func (f *fastFS) Lstat(name string) (fs.FileInfo, error) {
	dir, ok := f.resolve(path.Dir(name), 0)
	if !ok || (f.MapFS[path.Join(dir, path.Base(name))] == nil && !f.dirs[path.Join(dir, path.Base(name))]) {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
	}
	return f.MapFS.Lstat(name)
}

func (f *fastFS) ReadLink(name string) (string, error) {
	if _, err := f.Lstat(name); err != nil {
		return "", err
	}
	return f.MapFS.ReadLink(name)
}

func (f *fastFS) Stat(name string) (fs.FileInfo, error) {
	if !f.exists(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return f.MapFS.Stat(name)
}

// bigMachine is a fake machine of n disks of every kind, each with its own
// serial; the declared disk is nvme-like disk number n*3/4.
func bigMachine(n int) (*tree, Target) {
	tr := newTree()
	var declared Target
	for i := range n {
		serial := fmt.Sprintf("SN%06d", i)
		var d fakeDisk
		switch i % 4 {
		case 0:
			d = sataDisk(fmt.Sprintf("sd%s", letters(i)), fmt.Sprintf("8:%d", i*16), serial)
			d.sysPath = fmt.Sprintf("devices/pci0000:00/0000:00:17.0/ata%d/host%d/target%d:0:0/%d:0:0:0/block/%s", i+1, i, i, i, d.name)
		case 1:
			d = nvmeDisk(fmt.Sprintf("nvme%dn1", i), fmt.Sprintf("259:%d", i), serial)
			d.sysPath = fmt.Sprintf("devices/pci0000:00/0000:00:1d.0/0000:%02x:00.0/nvme/nvme%d/%s", i%256, i, d.name)
		case 2:
			d = virtioDisk(fmt.Sprintf("vd%s", letters(i)), fmt.Sprintf("254:%d", i*16), serial)
			d.sysPath = fmt.Sprintf("devices/pci0000:00/0000:00:%02x.0/virtio%d/block/%s", i%32, i, d.name)
		case 3:
			d = usbDisk(fmt.Sprintf("sd%s", letters(i)), fmt.Sprintf("65:%d", i*16), serial)
			d.sysPath = fmt.Sprintf("devices/pci0000:00/0000:00:14.0/usb%d/%d-1/%d-1:1.0/host%d/target%d:0:0/%d:0:0:0/block/%s", i, i, i, i, i, i, d.name)
		}
		tr.add(d)
		if i == n*3/4+1 {
			declared = Target{Disk: "/dev/" + d.name, Serial: serial, Code: testCode}
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
	for _, root := range []fs.FS{tr.fs, newFastFS(tr.fs)} {
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
	cfg := &Config{Root: newFastFS(tr.fs)}
	boot := goodBoot()
	cpu := startCPU()
	for b.Loop() {
		if _, _, err := Check(tg, boot, cfg); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}
