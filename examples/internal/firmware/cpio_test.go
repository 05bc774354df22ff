package firmware

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"testing"

	"github.com/fleetkit/fleet/internal/testenv"
)

// cpio writes a cpio archive in the "newc" format, the one the Linux
// kernel unpacks as an initramfs (Documentation/driver-api/early-userspace/
// buffer-format.rst): a 110-byte header of hex fields, the name with its
// NUL, and the data, each padded to 4 bytes; the archive ends with the
// entry TRAILER!!!. Names are relative ("init", "bin/hookos-attest").
type cpio struct {
	w    io.Writer
	ino  int
	err  error
	made map[string]bool // the directories added
}

// The file types of a header's mode.
const (
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioChar    = 0o020000
	cpioSymlink = 0o120000
)

func (c *cpio) header(name string, mode uint32, size int, major, minor int) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := 1
	if mode&0o170000 == cpioDir {
		nlink = 2
	}
	h := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, major, minor, len(name)+1, 0)
	c.write([]byte(h + name + "\x00"))
	c.pad(len(h) + len(name) + 1)
}

func (c *cpio) write(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

func (c *cpio) pad(n int) {
	if r := n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// dir adds a directory, and the directories above it that were not added
// yet: the kernel makes no missing parent.
func (c *cpio) dir(name string) {
	if c.made == nil {
		c.made = map[string]bool{}
	}
	if name == "." || name == "" || c.made[name] {
		return
	}
	c.dir(path.Dir(name))
	c.made[name] = true
	c.header(name, cpioDir|0o755, 0, 0, 0)
}

// file adds a regular file holding data, and its directory.
func (c *cpio) file(name string, perm uint32, data []byte) {
	c.dir(path.Dir(name))
	c.header(name, cpioFile|perm, len(data), 0, 0)
	c.write(data)
	c.pad(len(data))
}

// symlink adds a symbolic link to target, and its directory.
func (c *cpio) symlink(name, target string) {
	c.dir(path.Dir(name))
	c.header(name, cpioSymlink|0o777, len(target), 0, 0)
	c.write([]byte(target))
	c.pad(len(target))
}

// char adds a character device node.
func (c *cpio) char(name string, perm uint32, major, minor int) {
	c.dir(path.Dir(name))
	c.header(name, cpioChar|perm, 0, major, minor)
}

// close writes the trailer and returns the first error.
func (c *cpio) close() error {
	c.header("TRAILER!!!", 0, 0, 0, 0)
	return c.err
}

// TestCpio has GNU cpio unpack an archive the writer made.
func TestCpio(t *testing.T) {
	prog := testenv.Command(t, "cpio", "cpio")
	var b bytes.Buffer
	c := &cpio{w: &b}
	c.dir("etc")
	c.dir("etc/fleet")
	c.file("etc/fleet/env", 0o644, []byte("FLEET_INTERFACE=eth0\n"))
	c.file("init", 0o755, []byte("odd length"))
	c.file("empty", 0o600, nil)
	c.file("usr/share/deep/file", 0o644, []byte("deep"))
	c.symlink("usr/bin/docker", "/bin/runner")
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if b.Len()%4 != 0 {
		t.Errorf("the archive is %d bytes, not a multiple of 4", b.Len())
	}
	dir := t.TempDir()
	cmd := exec.Command(prog, "-i", "-d", "--quiet")
	cmd.Dir, cmd.Stdin = dir, &b
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v: %s", err, out)
	}
	for name, want := range map[string]struct {
		data string
		perm os.FileMode
	}{
		"etc/fleet/env":       {"FLEET_INTERFACE=eth0\n", 0o644},
		"init":                {"odd length", 0o755},
		"empty":               {"", 0o600},
		"usr/share/deep/file": {"deep", 0o644},
	} {
		p := filepath.Join(dir, name)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		fi, _ := os.Stat(p)
		if string(got) != want.data || fi.Mode().Perm() != want.perm {
			t.Errorf("%s holds %q, mode %v; want %q, %v", name, got, fi.Mode().Perm(), want.data, want.perm)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "usr/bin/docker")); err != nil || target != "/bin/runner" {
		t.Errorf("usr/bin/docker links to %q (%v), want /bin/runner", target, err)
	}
}
