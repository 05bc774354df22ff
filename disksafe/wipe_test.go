package disksafe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
	"github.com/google/go-cmp/cmp"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

func TestEraseRegions(t *testing.T) {
	tests := []struct {
		name  string
		size  int64
		parts []extent
		want  []extent
	}{
		{"empty disk", 0, nil, nil},
		{"small disk: all of it", 3 * mib, nil, []extent{{0, 3 * mib}}},
		{"16 MiB: the edges meet", 16 * mib, nil, []extent{{0, 16 * mib}}},
		{"1 GiB", gib, nil, []extent{{0, 8 * mib}, {64 * mib, 64 * kib}, {gib - 8*mib, 8 * mib}}},
		{"300 GiB: both btrfs mirrors", 300 * gib, nil, []extent{
			{0, 8 * mib}, {64 * mib, 64 * kib}, {256 * gib, 64 * kib}, {300*gib - 8*mib, 8 * mib},
		}},
		{"a partition inside", gib, []extent{{100 * mib, 200 * mib}}, []extent{
			{0, 8 * mib}, {64 * mib, 64 * kib},
			{100 * mib, 8 * mib}, {164 * mib, 64 * kib}, {292 * mib, 8 * mib},
			{gib - 8*mib, 8 * mib},
		}},
		{"partitions past the end, negative or empty are clipped or dropped", gib, []extent{
			{gib - mib, 100 * mib}, {2 * gib, mib}, {-5, 10}, {10 * mib, 0}, {20 * mib, -1},
		}, []extent{{0, 8 * mib}, {64 * mib, 64 * kib}, {gib - 8*mib, 8 * mib}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := eraseRegions(tt.size, tt.parts)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(extent{})); diff != "" {
				t.Errorf("eraseRegions (-want +got):\n%s", diff)
			}
		})
	}
}

// fileDevice is a device backed by a regular file, for erase.
type fileDevice struct {
	f        *os.File
	size     int64
	discards []extent
	discard  error
	synced   bool
	writes   int
	failAt   int // fail the failAt-th write (1-based); 0: never
}

func (d *fileDevice) ReadAt(p []byte, off int64) (int, error) { return d.f.ReadAt(p, off) }
func (d *fileDevice) WriteAt(p []byte, off int64) (int, error) {
	d.writes++
	if d.writes == d.failAt {
		return 0, errors.New("injected write error")
	}
	return d.f.WriteAt(p, off)
}
func (d *fileDevice) Size() int64       { return d.size }
func (d *fileDevice) SectorSize() int64 { return 512 }
func (d *fileDevice) Discard(off, n int64) error {
	d.discards = append(d.discards, extent{off, n})
	return d.discard
}
func (d *fileDevice) Sync() error   { d.synced = true; return d.f.Sync() }
func (d *fileDevice) Reread() error { return errors.New("not a block device") }
func (d *fileDevice) Close() error  { return d.f.Close() }

func newFileDevice(t *testing.T, size int64) *fileDevice {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &fileDevice{f: f, size: size, discard: errors.ErrUnsupported}
}

// signature is a magic planted at an offset.
type signature struct {
	name string
	off  int64
	data []byte
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// signatures are the on-disk magics of the formats Wipe erases, placed as
// their formats place them on a disk (or partition) of size bytes at base.
func signatures(base, size int64) []signature {
	end := base + size
	md090 := base + (size&^(64*kib-1) - 64*kib)
	md10 := base + ((size/512-16)&^7)*512
	zfsEnd := base + size&^(256*kib-1)
	sigs := []signature{
		{"MBR boot signature", base + 510, []byte{0x55, 0xaa}},
		{"primary GPT", base + 512, []byte("EFI PART")},
		{"backup GPT", end - 512, []byte("EFI PART")},
		{"ext4", base + 1024 + 0x38, []byte{0x53, 0xef}},
		{"xfs", base, []byte("XFSB")},
		{"btrfs", base + 64*kib + 0x40, []byte("_BHRfS_M")},
		{"vfat", base + 0x52, []byte("FAT32   ")},
		{"swap (4 KiB pages)", base + 4096 - 10, []byte("SWAPSPACE2")},
		{"swap (64 KiB pages)", base + 64*kib - 10, []byte("SWAPSPACE2")},
		{"iso9660", base + 32*kib + 1, []byte("CD001")},
		{"md 0.90", md090, le32(0xa92b4efc)},
		{"md 1.0", md10, le32(0xa92b4efc)},
		{"md 1.1", base, le32(0xa92b4efc)},
		{"md 1.2", base + 4096, le32(0xa92b4efc)},
		{"LVM label", base + 512, []byte("LABELONE")},
		{"LVM label type", base + 512 + 24, []byte("LVM2 001")},
		{"ZFS label 0", base + 128*kib, le32(0x00bab10c)},
		{"ZFS label 1", base + 256*kib + 128*kib, le32(0x00bab10c)},
		{"ZFS label 2", zfsEnd - 512*kib + 128*kib, le32(0x00bab10c)},
		{"ZFS label 3", zfsEnd - 256*kib + 128*kib, le32(0x00bab10c)},
		{"bcache", base + 4096 + 24, []byte{0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81}},
		{"LUKS", base, []byte("LUKS\xba\xbe")},
		{"LUKS2 secondary 16 KiB", base + 16*kib, []byte("SKUL\xba\xbe")},
		{"LUKS2 secondary 4 MiB", base + 4*mib, []byte("SKUL\xba\xbe")},
	}
	if size >= 64*mib+64*kib {
		sigs = append(sigs, signature{"btrfs mirror 1", base + 64*mib + 0x40, []byte("_BHRfS_M")})
	}
	return sigs
}

// plant writes each of sigs at its offset.
func plant(t testing.TB, w io.WriterAt, sigs []signature) {
	t.Helper()
	for _, s := range sigs {
		if _, err := w.WriteAt(s.data, s.off); err != nil {
			t.Fatalf("plant %s: %v", s.name, err)
		}
	}
}

func checkErased(t *testing.T, r io.ReaderAt, sigs []signature) {
	t.Helper()
	for _, s := range sigs {
		b := make([]byte, len(s.data))
		if _, err := r.ReadAt(b, s.off); err != nil {
			t.Fatalf("read %s: %v", s.name, err)
		}
		if bytes.Equal(b, s.data) {
			t.Errorf("%s at byte %d survived the wipe", s.name, s.off)
		}
		if !bytes.Equal(b, make([]byte, len(b))) {
			t.Errorf("%s at byte %d is not zero: % x", s.name, s.off, b)
		}
	}
}

// gptEntry is one partition of a GPT the tests build: of the Linux file
// system type, its unique GUID's first byte its number.
type gptEntry struct{ first, last int64 } // LBAs

// linuxParts is parts as disksafetest writes them.
func linuxParts(parts []gptEntry) []disksafetest.GPTPart {
	var gpt []disksafetest.GPTPart
	for i, p := range parts {
		gpt = append(gpt, disksafetest.GPTPart{Type: linuxType.String(), ID: GUID{byte(i + 1)}.String(), First: p.first, Last: p.last})
	}
	return gpt
}

// writeGPT writes disksafetest.WriteGPT's GPT of n entries holding parts,
// for 512-byte sectors.
func writeGPT(t testing.TB, w io.WriterAt, size int64, parts []gptEntry, n int) {
	t.Helper()
	if err := disksafetest.WriteGPT(w, disksafetest.GPT{Size: size, SectorSize: 512, Entries: n, Parts: linuxParts(parts)}); err != nil {
		t.Fatal(err)
	}
}

func TestEraseSignatures(t *testing.T) {
	const size = 512 * mib
	dev := newFileDevice(t, size)
	// Partition 1 at 1 MiB (inside the disk's edge), partition 2 at 200
	// MiB (far from it), as the GPT says; a kernel-only partition at 400
	// MiB, as sysfs would say.
	p2 := extent{200 * mib, 150 * mib}
	sys := extent{400 * mib, 100 * mib}
	sigs := signatures(0, size)
	sigs = append(sigs, signatures(p2.off, p2.n)...)
	sigs = append(sigs, signatures(sys.off, sys.n)...)
	plant(t, dev, sigs)
	writeGPT(t, dev, size, []gptEntry{
		{2048, 200*2048 - 1},
		{p2.off / 512, p2.end()/512 - 1},
	}, 128)
	// A byte far from every signature, to show the wipe erases signatures
	// and not everything.
	marker := []byte("user data that no signature region covers")
	plant(t, dev, []signature{{"marker", 150 * mib, marker}})
	if got := partitionTables(dev, size, 512); !cmp.Equal(got, []extent{{mib, 199 * mib}, p2, {mib, 199 * mib}, p2}, cmp.AllowUnexported(extent{})) {
		t.Fatalf("partitionTables = %v", got)
	}

	if err := erase(t.Context(), dev, []extent{sys}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	checkErased(t, dev, sigs)
	if !dev.synced {
		t.Error("erase did not flush")
	}
	if !cmp.Equal(dev.discards, []extent{{0, size}}, cmp.AllowUnexported(extent{})) {
		t.Errorf("discards = %v, want the whole disk", dev.discards)
	}
	got := make([]byte, len(marker))
	if _, err := dev.ReadAt(got, 150*mib); err != nil || !bytes.Equal(got, marker) {
		t.Errorf("data at 150 MiB = %q, %v; want it untouched", got, err)
	}
	if got := partitionTables(dev, size, 512); len(got) != 0 {
		t.Errorf("after the wipe the disk still names partitions %v", got)
	}
}

func TestEraseFailures(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Run("write error", func(t *testing.T) {
		dev := newFileDevice(t, 64*mib)
		dev.failAt = 3
		if err := erase(t.Context(), dev, nil, log); err == nil {
			t.Fatal("erase ignored a write error")
		}
		if dev.synced {
			t.Error("erase flushed after a failed write")
		}
	})
	t.Run("context ended", func(t *testing.T) {
		dev := newFileDevice(t, 64*mib)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := erase(ctx, dev, nil, log); !errors.Is(err, context.Canceled) {
			t.Fatalf("erase = %v, want context.Canceled", err)
		}
		if dev.writes != 0 {
			t.Errorf("erase wrote %d times after its context ended", dev.writes)
		}
	})
	t.Run("discard fails", func(t *testing.T) {
		dev := newFileDevice(t, 64*mib)
		dev.discard = errors.New("EIO")
		plant(t, dev, signatures(0, 64*mib))
		if err := erase(t.Context(), dev, nil, log); err != nil {
			t.Fatalf("a failed discard failed the wipe: %v", err)
		}
		checkErased(t, dev, signatures(0, 64*mib))
	})
	t.Run("no size", func(t *testing.T) {
		dev := newFileDevice(t, 0)
		if err := erase(t.Context(), dev, nil, log); err == nil {
			t.Fatal("erase of a device without a size gave no error")
		}
	})
}

func TestPartitionTablesMBR(t *testing.T) {
	dev := newFileDevice(t, 64*mib)
	sec := make([]byte, 512)
	disksafetest.MBREntry(sec, 0, 0x83, 2048, 8192)
	disksafetest.MBREntry(sec, 1, 0x05, 20480, 40960) // extended
	plant(t, dev, []signature{{"MBR", 0, sec}})
	// Two logical partitions chained from the extended one.
	ebr := func(at int64, start, n, next uint32) {
		b := make([]byte, 512)
		disksafetest.MBREntry(b, 0, 0x83, start, n)
		if next != 0 {
			disksafetest.MBREntry(b, 1, 0x05, next, 1000)
		}
		plant(t, dev, []signature{{"EBR", at * 512, b}})
	}
	ebr(20480, 63, 1000, 4096)
	ebr(20480+4096, 63, 2000, 0)
	got := partitionTables(dev, 64*mib, 512)
	want := []extent{
		{2048 * 512, 8192 * 512},
		{20480 * 512, 40960 * 512},
		{(20480 + 63) * 512, 1000 * 512},
		{(20480 + 4096 + 63) * 512, 2000 * 512},
	}
	if !cmp.Equal(got, want, cmp.AllowUnexported(extent{})) {
		t.Errorf("partitionTables = %v, want %v", got, want)
	}
}

func TestPartitionTablesBadGPT(t *testing.T) {
	dev := newFileDevice(t, 64*mib)
	writeGPT(t, dev, 64*mib, []gptEntry{{2048, 4095}}, 128)
	// Break the primary header's CRC and the backup's entries: nothing
	// left to trust.
	plant(t, dev, []signature{{"primary header", 512 + 40, []byte{0xff}}, {"backup entries", (64*mib/512-33)*512 + 32, []byte{0xff}}})
	if got := partitionTables(dev, 64*mib, 512); len(got) != 0 {
		t.Errorf("partitionTables of damaged GPTs = %v, want none", got)
	}
}

// TestWipeWipesNothing runs Wipe where it must wipe nothing, on a machine
// whose sda reports S1, with a device directory that holds a regular file as
// sda, so nothing can be wiped for real: the device file keeps its content,
// and no wipe is recorded.
func TestWipeWipesNothing(t *testing.T) {
	tr := disksafetest.NewTree(disksafetest.SATADisk("sda", "8:0", "S1"), disksafetest.SATADisk("sdb", "8:16", "S2"))
	precious := bytes.Repeat([]byte("precious "), 4096)
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tt := range []struct {
		name   string
		ctx    context.Context
		serial string
		gone   bool  // the device node is removed
		want   error // on Linux; elsewhere the judged wipes fail ErrUnsupported
		cause  error
		text   string // on Linux; {file} is the device file; "": not compared
	}{
		{name: "a refusal", serial: "S2", want: ErrWrongDisk, text: "wipe: /dev/sda is sda, but the disk that reports S2 is sdb"},
		{name: "the context ends before the open", ctx: canceled, serial: "S1", want: context.Canceled},
		// DevDir/sda is a regular file, not the block device 8:0 sysfs names.
		{name: "it opens only the judged block device", serial: "S1", want: ErrChanged,
			text: "wipe: /dev/sda changed while it was being opened (not the judged device: {file} is not a block device); nothing wiped"},
		{name: "the device node is missing", serial: "S1", gone: true, want: ErrOpen, cause: fs.ErrNotExist,
			text: "wipe: /dev/sda cannot be opened (open {file}: no such file or directory); nothing wiped"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &Config{Root: tr.FS, DevDir: t.TempDir(), StateDir: filepath.Join(t.TempDir(), "workflow")}
			file := filepath.Join(cfg.DevDir, "sda")
			if err := os.WriteFile(file, precious, 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.gone {
				os.Remove(file)
			}
			ctx := t.Context()
			if tt.ctx != nil {
				ctx = tt.ctx
			}
			_, err := Wipe(ctx, Target{Disk: "/dev/sda", Serial: tt.serial}, goodBoot(), cfg)
			want, cause, text := tt.want, tt.cause, strings.ReplaceAll(tt.text, "{file}", file)
			if runtime.GOOS != "linux" && tt.serial == "S1" && tt.ctx == nil {
				want, cause, text = ErrUnsupported, nil, ""
			}
			if err == nil || !errors.Is(err, want) || (cause != nil && !errors.Is(err, cause)) || (text != "" && err.Error() != text) {
				t.Fatalf("Wipe = %v\nwant %v, %v, %s", err, want, cause, text)
			}
			if b, err := os.ReadFile(file); !tt.gone && (err != nil || !bytes.Equal(b, precious)) {
				t.Errorf("the device file changed (%v)", err)
			}
			if _, err := ReadWipeRecord(cfg.StateDir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a wipe record exists: %v", err)
			}
		})
	}
}
