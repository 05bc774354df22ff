package disksafe

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/internal/testenv"
	"golang.org/x/sys/unix"
)

// loopDev is a file-backed loop device a test attached.
type loopDev struct {
	path string // /dev/loopN
	name string // loopN
	dev  string // major:minor
}

// needLoopTools ends tb unless it runs as root with the programs the loop
// tests use.
func needLoopTools(tb testing.TB) {
	tb.Helper()
	testenv.Root(tb, "loop devices, an exclusive open of a block device, mount")
	testenv.Command(tb, "losetup", "mount")
	testenv.Command(tb, "mount", "mount")
	testenv.Command(tb, "umount", "mount")
	testenv.Command(tb, "sfdisk", "fdisk")
	testenv.Command(tb, "mkfs.ext4", "e2fsprogs")
	testenv.Command(tb, "blkid", "util-linux")
	testenv.Command(tb, "wipefs", "util-linux")
}

func run(tb testing.TB, stdin string, name string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// attach makes a file of size bytes (filled by fill when set), attaches it
// to a free loop device, and detaches it when tb ends.
func attach(tb testing.TB, dir, file string, size int64, fill func(io.Writer)) loopDev {
	tb.Helper()
	p := filepath.Join(dir, file)
	f, err := os.Create(p)
	if err != nil {
		tb.Fatal(err)
	}
	if fill != nil {
		fill(f)
	}
	if err := f.Truncate(size); err != nil {
		tb.Fatal(err)
	}
	f.Close()
	dev := strings.TrimSpace(run(tb, "", "losetup", "-f", "--show", p))
	tb.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			tb.Errorf("losetup -d %s: %v\n%s", dev, err, out)
		}
	})
	name := filepath.Base(dev)
	num, err := os.ReadFile("/sys/block/" + name + "/dev")
	if err != nil {
		tb.Fatal(err)
	}
	return loopDev{path: dev, name: name, dev: strings.TrimSpace(string(num))}
}

// giveSerial writes a udev database record that gives d a serial, and puts
// back what was there (or nothing) when tb ends.
func giveSerial(tb testing.TB, d loopDev, serial string) {
	tb.Helper()
	dir := "/run/udev/data"
	var created []string
	for p := dir; p != "/"; p = filepath.Dir(p) {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			created = append(created, p)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	rec := filepath.Join(dir, "b"+d.dev)
	old, err := os.ReadFile(rec)
	existed := err == nil
	if err := os.WriteFile(rec, []byte("E:ID_SERIAL_SHORT="+serial+"\nE:ID_SERIAL="+serial+"\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if existed {
			os.WriteFile(rec, old, 0o644)
		} else {
			os.Remove(rec)
		}
		for _, p := range created { // deepest first
			os.Remove(p) // only if empty
		}
	})
}

// digest returns the SHA-256 of the whole device.
func digest(tb testing.TB, d loopDev) [32]byte {
	tb.Helper()
	f, err := os.Open(d.path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		tb.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// probe runs blkid -p (at an offset when off > 0) and returns what it
// finds; "" when it finds no signature (blkid's exit status 2).
func probe(tb testing.TB, d loopDev, off int64) string {
	tb.Helper()
	args := []string{"-p"}
	if off > 0 {
		args = append(args, "-O", fmt.Sprint(off))
	}
	out, err := exec.Command("blkid", append(args, d.path)...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return ""
	}
	if err != nil {
		tb.Fatalf("blkid %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// nodeDir returns a directory where device nodes can be opened: in tmp,
// unless its file system is mounted nodev, and then below /dev.
func nodeDir(t *testing.T, tmp string) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(tmp, &st); err == nil && st.Flags&unix.ST_NODEV == 0 {
		dir := filepath.Join(tmp, "dev")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir, err := os.MkdirTemp("/dev", "fleet-disksafe-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestIntegrationLoopWipe(t *testing.T) {
	testenv.Short(t)
	needLoopTools(t)

	tmp := t.TempDir()
	const size = 64 << 20
	a := attach(t, tmp, "a.img", size, nil)
	b := attach(t, tmp, "b.img", size, func(w io.Writer) { io.CopyN(w, rand.Reader, size) })
	c := attach(t, tmp, "c.img", size, nil)

	// a: a GPT with one partition at 1 MiB holding ext4.
	run(t, "label: gpt\nstart=2048, size=65536, type=linux\n", "sfdisk", "-q", "--no-reread", a.path)
	run(t, "", "mkfs.ext4", "-q", "-F", "-E", "offset=1048576", a.path, "32M")
	if got := probe(t, a, 0); !strings.Contains(got, `PTTYPE="gpt"`) {
		t.Fatalf("blkid before the wipe: %q, want a GPT", got)
	}
	if got := probe(t, a, 1<<20); !strings.Contains(got, `TYPE="ext4"`) {
		t.Fatalf("blkid at 1 MiB before the wipe: %q, want ext4", got)
	}
	if got := run(t, "", "wipefs", a.path); !strings.Contains(got, "gpt") {
		t.Fatalf("wipefs before the wipe: %q, want gpt", got)
	}
	// c: ext4 on the whole device, mounted below.
	run(t, "", "mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", c.path)

	suffix := strings.ToUpper(rand.Text()[:10])
	serialA, serialB, serialC := "FLEETTEST-A-"+suffix, "FLEETTEST-B-"+suffix, "FLEETTEST-C-"+suffix
	giveSerial(t, a, serialA)
	giveSerial(t, b, serialB)
	giveSerial(t, c, serialC)

	id, err := BootID(nil)
	if err != nil {
		t.Fatal(err)
	}
	boot := Boot{ID: id, Record: &BootRecord{BootID: id, Attested: true, Code: testCode}}
	state := filepath.Join(tmp, "workflow")
	cfg := &Config{Loop: true, StateDir: state, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
	target := Target{Disk: a.path, Serial: serialA, Code: testCode}

	sumA, sumB := digest(t, a), digest(t, b)

	t.Run("the device node is another device", func(t *testing.T) {
		devDir := nodeDir(t, tmp)
		var maj, min uint32
		fmt.Sscanf(b.dev, "%d:%d", &maj, &min)
		if err := unix.Mknod(filepath.Join(devDir, a.name), unix.S_IFBLK|0o600, int(unix.Mkdev(maj, min))); err != nil {
			t.Fatal(err)
		}
		c := *cfg
		c.DevDir = devDir
		want := fmt.Sprintf("wipe: %s changed while it was being opened (not the judged device: %s is device %s, and sysfs gave %s for %s); nothing wiped",
			a.path, filepath.Join(devDir, a.name), b.dev, a.dev, a.name)
		if _, err := Wipe(t.Context(), target, boot, &c); !errors.Is(err, ErrChanged) || err.Error() != want {
			t.Errorf("Wipe error:\n got %v\nwant ErrChanged: %s", err, want)
		}
	})

	t.Run("the wipe cannot be recorded", func(t *testing.T) {
		c := *cfg
		c.StateDir = filepath.Join(tmp, "a.img", "workflow") // below a regular file
		_, err := Wipe(t.Context(), target, boot, &c)
		if !errors.Is(err, ErrRecord) {
			t.Fatalf("Wipe = %v, want ErrRecord", err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "wipe: the wipe cannot be recorded (") || !strings.HasSuffix(msg, "not a directory); nothing wiped") {
			t.Errorf("Wipe error: %s", msg)
		}
	})

	t.Run("a mounted device", func(t *testing.T) {
		mnt := filepath.Join(tmp, "mnt")
		os.MkdirAll(mnt, 0o755)
		run(t, "", "mount", "-t", "ext4", c.path, mnt)
		defer run(t, "", "umount", mnt)
		_, err := Wipe(t.Context(), Target{Disk: c.path, Serial: serialC, Code: testCode}, boot, cfg)
		if !errors.Is(err, ErrInUse) {
			t.Fatalf("Wipe of a mounted device = %v, want ErrInUse", err)
		}
		want := "wipe: " + c.path + " is in use (" + errDeviceBusy.Error() + "); nothing wiped"
		if err.Error() != want {
			t.Errorf("Wipe error:\n got %s\nwant %s", err, want)
		}
		if got := probe(t, c, 0); !strings.Contains(got, `TYPE="ext4"`) {
			t.Errorf("after the refusal blkid finds %q on the mounted device", got)
		}
	})

	if digest(t, a) != sumA || digest(t, b) != sumB {
		t.Fatal("a refused wipe changed a device")
	}
	if _, err := ReadWipeRecord(state); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused wipe left a record: %v", err)
	}

	w, err := Wipe(t.Context(), target, boot, cfg)
	if err != nil {
		t.Fatalf("Wipe: %v", err)
	}
	if want := "wipe: " + a.path + " reports the serial " + serialA; w.String() != want {
		t.Errorf("Wipe = %q, want %q", w, want)
	}
	if got := probe(t, a, 0); got != "" {
		t.Errorf("blkid -p finds after the wipe: %s", got)
	}
	if got := probe(t, a, 1<<20); got != "" {
		t.Errorf("blkid -p at 1 MiB finds after the wipe: %s", got)
	}
	if got := run(t, "", "wipefs", a.path); got != "" {
		t.Errorf("wipefs finds after the wipe:\n%s", got)
	}
	f, err := os.Open(a.path)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 8<<20)
	if _, err := f.ReadAt(head, 0); err != nil || !bytes.Equal(head, make([]byte, len(head))) {
		t.Errorf("the first 8 MiB are not zero (%v)", err)
	}
	f.Close()
	if digest(t, b) != sumB {
		t.Error("the wipe of a changed another loop device")
	}
	rec, err := ReadWipeRecord(state)
	if err != nil {
		t.Fatal(err)
	}
	if rec.BootID != id || !rec.Wiped || rec.Disk != a.path || rec.Name != a.name || rec.Serial != serialA {
		t.Errorf("wipe record = %+v", rec)
	}

	// The install step of the same run, in this boot and in another.
	if err := CheckWiped(target.Disk, id, cfg); err != nil {
		t.Errorf("CheckWiped = %v", err)
	}
	if err := CheckWiped(target.Disk, "00000000-0000-4000-8000-000000000000", cfg); !errors.Is(err, ErrResumedRun) {
		t.Errorf("CheckWiped in another boot = %v, want ErrResumedRun", err)
	}
}

// BenchmarkWipeLoop1GiB measures Wipe of a 1 GiB loop device whose backing
// file is full of data before each wipe: judgement, exclusive open,
// discard of the whole device, the signature writes and the flush.
func BenchmarkWipeLoop1GiB(b *testing.B) {
	needLoopTools(b)
	tmp := b.TempDir()
	const size = 1 << 30
	d := attach(b, tmp, "bench.img", size, nil)
	serial := "FLEETBENCH-" + strings.ToUpper(rand.Text()[:10])
	giveSerial(b, d, serial)
	id, err := BootID(nil)
	if err != nil {
		b.Fatal(err)
	}
	boot := Boot{ID: id, Record: &BootRecord{BootID: id, Attested: true, Code: testCode}}
	cfg := &Config{Loop: true, StateDir: filepath.Join(tmp, "workflow")}
	target := Target{Disk: d.path, Serial: serial}
	chunk := bytes.Repeat([]byte{0xa5}, 8<<20)
	fill := func() {
		f, err := os.OpenFile(d.path, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < size; off += int64(len(chunk)) {
			if _, err := f.WriteAt(chunk, off); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		fill()
		b.StartTimer()
		if _, err := Wipe(b.Context(), target, boot, cfg); err != nil {
			b.Fatal(err)
		}
	}
}
