package disksafe

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestRawDirFS(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "b", "f"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a", "g"), nil, 0o644)
	os.Symlink("b/f", filepath.Join(dir, "a", "link"))
	os.Symlink("a/b", filepath.Join(dir, "dirlink"))
	fsys := rawDirFS(dir)
	if err := fstest.TestFS(fsys, "a/b/f", "a/g", "a/link", "dirlink"); err != nil {
		t.Fatal(err)
	}
	if got, err := fs.ReadLink(fsys, "a/link"); err != nil || got != "b/f" {
		t.Errorf("ReadLink = %q, %v", got, err)
	}
	if b, err := readFile(fsys, "dirlink/f"); err != nil || string(b) != "hello\n" {
		t.Errorf("readFile through a link = %q, %v", b, err)
	}
	if _, err := fsys.Open("../etc/passwd"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Open outside the root = %v", err)
	}
	f, _ := fsys.Open("a/b/f")
	f.Close()
	if _, err := f.Read(make([]byte, 1)); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("Read after Close = %v", err)
	}
	if _, err := f.(io.Reader).Read(nil); err == nil {
		t.Error("Read of a closed file gave no error")
	}
}

// TestListThisMachine reads this machine's boot ID through the default
// root, and lists its disks through the default root and through
// os.DirFS("/"): both must see the same.
func TestListThisMachine(t *testing.T) {
	if id, err := BootID(nil); err != nil || !validBootID(id) {
		t.Errorf("BootID = %q, %v", id, err)
	}
	if _, err := os.Stat("/sys/block"); err != nil {
		t.Skip("no /sys/block here")
	}
	want, err := List(&Config{Root: os.DirFS("/"), Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := List(&Config{Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List through the default root differs from os.DirFS (-DirFS +default):\n%s", diff)
	}
	for _, d := range got {
		t.Logf("%s %s %d bytes serial %q transport %q removable %t usb %t ro %t", d.Name, d.Dev, d.Size, d.Serial, d.Transport, d.Removable, d.USB, d.ReadOnly)
	}
}
