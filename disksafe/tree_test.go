package disksafe

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"
)

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
