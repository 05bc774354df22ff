package firmware

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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

// decoyStream is the decoy's contents: seed's ChaCha8 stream.
func decoyStream(seed uint64) io.Reader {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return io.LimitReader(rand.NewChaCha8(s), diskSize)
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

// sameBytes compares the file p with r byte for byte, and says where they
// first differ.
func sameBytes(p string, r io.Reader) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; off += int64(len(a)) {
		n, errA := io.ReadFull(f, a)
		m, errB := io.ReadFull(r, b)
		if n != m {
			return fmt.Errorf("it holds %d bytes, want %d", off+int64(n), off+int64(m))
		}
		if i := firstDiff(a[:n], b[:m]); i >= 0 {
			return fmt.Errorf("it differs at byte %d", off+int64(i))
		}
		if errA != nil || errB != nil {
			if errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF) {
				return nil
			}
			return errors.Join(errA, errB)
		}
	}
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
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
