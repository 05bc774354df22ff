package firmware

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/internal/imagetest/standin"
)

// diskSize is the size of every disk of a machine but its boot disk.
const diskSize = 64 << 20

// oldInstall makes the install disk: an old install on it, a GPT of two
// partitions, so that the installer, which installs only to an empty disk,
// can install only after wipe-disk wiped it.
func oldInstall(t *testing.T, tl tools, dir string) string {
	t.Helper()
	p := newDisk(t, dir+"/install.img", nil)
	sf := exec.Command(tl.sfdisk, "-q", p)
	sf.Stdin = strings.NewReader("label: gpt\nsize=16MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=old-efi\ntype=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=old-root\n")
	if out, err := sf.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk %s: %v: %s", p, err, out)
	}
	return p
}

// newDisk makes the disk image p of diskSize bytes: content's, and zeros
// after them (all zeros when content is nil).
func newDisk(t *testing.T, p string, content io.Reader) string {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if content != nil {
		if _, err := io.Copy(f, content); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(diskSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// installed reads the install disk as the installed system reads it, or
// fails t when it holds no install.
func installed(t *testing.T, p string) standin.Layout {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, ok, err := standin.ReadLayout(f, diskSize)
	if err != nil || !ok {
		t.Fatalf("the install disk holds no install (%v)", err)
	}
	return l
}
