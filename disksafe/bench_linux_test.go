package disksafe

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkJudge256OnDisk lists and judges 256 disks from the same tree
// written to a real directory (symbolic links, device nodes) and read
// through os.DirFS, as sysfs is read: the cost with the system calls.
// Device nodes need root.
func BenchmarkJudge256OnDisk(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: device nodes")
	}
	tr, tg := bigMachine(256)
	dir := b.TempDir()
	if err := materialize(tr.FS, dir); err != nil {
		b.Fatal(err)
	}
	cfg := &Config{Root: newRootFS(dir)}
	boot := goodBoot()
	l, err := Read(tg.Disk, cfg)
	if err != nil || len(l.Disks) != 256 {
		b.Fatalf("Read: %d disks, %v", len(l.Disks), err)
	}
	if _, err := check(l, tg, boot); err != nil {
		b.Fatal(err)
	}
	cpu := startCPU()
	for b.Loop() {
		if _, _, err := Check(tg, boot, cfg); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// cpuClock measures the process's CPU time (user and system) across a
// benchmark, so a figure means something on a machine other work shares.
type cpuClock struct{ start time.Duration }

func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuClock { return cpuClock{processCPU()} }

// report adds the metric cpu-ns/op.
func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(processCPU()-c.start)/float64(b.N), "cpu-ns/op")
}

// materialize writes m below dir: files, directories, symbolic links, and
// block device nodes (numbered 0:0; only their kind is read).
func materialize(m fstest.MapFS, dir string) error {
	for name, f := range m {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		var err error
		switch {
		case f.Mode.IsDir():
			err = os.MkdirAll(p, 0o755)
		case f.Mode.Type() == fs.ModeSymlink:
			err = os.Symlink(string(f.Data), p)
		case f.Mode&fs.ModeDevice != 0 && f.Mode&fs.ModeCharDevice == 0:
			err = unix.Mknod(p, unix.S_IFBLK|0o600, 0)
		default:
			err = os.WriteFile(p, f.Data, 0o644)
		}
		if err != nil && !os.IsExist(err) {
			return fmt.Errorf("%s: %w", strings.TrimPrefix(p, dir), err)
		}
	}
	return nil
}
