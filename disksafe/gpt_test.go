package disksafe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
	"github.com/google/go-cmp/cmp"
)

// linuxType is the Linux file system partition type writeGPT writes.
var linuxType = GUID{0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47, 0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4}

// gptImage is a disk of size bytes in 512-byte sectors with a primary and
// backup GPT of n entries holding parts.
func gptImage(size int64, n int, parts ...gptEntry) []byte {
	return disksafetest.GPTImage(disksafetest.GPT{Size: size, SectorSize: 512, Entries: n, Parts: linuxParts(parts)})
}

// withHeader returns a copy of img whose primary header each edit changed,
// with the header's CRC computed again over the size it now says (at most
// its sector).
func withHeader(img []byte, edits ...func(h []byte)) []byte {
	b := bytes.Clone(img)
	for _, edit := range edits {
		edit(b[512:])
	}
	h := b[512 : 512+min(binary.LittleEndian.Uint32(b[512+12:]), 512)]
	binary.LittleEndian.PutUint32(h[16:], 0)
	binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h))
	return b
}

// put32 and put64 are header edits: v at byte off.
func put32(off int, v uint32) func([]byte) {
	return func(h []byte) { binary.LittleEndian.PutUint32(h[off:], v) }
}

func put64(off int, v uint64) func([]byte) {
	return func(h []byte) { binary.LittleEndian.PutUint64(h[off:], v) }
}

func TestReadGPT(t *testing.T) {
	// The second partition ends at the disk's last LBA.
	img := gptImage(1<<20, 128, gptEntry{34, 1000}, gptEntry{1001, 2047})
	g, err := ReadGPT(bytes.NewReader(img), int64(len(img)), 512)
	if err != nil {
		t.Fatal(err)
	}
	want := []Partition{
		{Index: 1, Type: linuxType, FirstLBA: 34, LastLBA: 1000},
		{Index: 2, Type: linuxType, FirstLBA: 1001, LastLBA: 2047},
	}
	want[0].ID[0], want[1].ID[0] = 1, 2
	if diff := cmp.Diff(GPT{SectorSize: 512, Partitions: want}, g); diff != "" {
		t.Errorf("ReadGPT (-want +got):\n%s", diff)
	}
	if got := linuxType.String(); got != "0fc63daf-8483-4772-8e79-3d69d8477de4" {
		t.Errorf("GUID.String = %s", got)
	}
	if got := ESPType.String(); got != "c12a7328-f81f-11d2-ba4b-00a0c93ec93b" {
		t.Errorf("ESPType = %s", got)
	}
	// The backup, at the last LBA, reads the same.
	b, err := readGPT(bytes.NewReader(img), int64(len(img)), 512, int64(len(img))/512-1)
	if err != nil || !cmp.Equal(b, g) {
		t.Errorf("the backup GPT = %+v, %v; want %+v", b, err, g)
	}
}

func TestReadGPTRefuses(t *testing.T) {
	good := gptImage(1<<20, 128, gptEntry{34, 1000})
	change := func(f func(img []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	tests := []struct {
		name string
		img  []byte
		ss   int64
		want string
	}{
		{"zeros", make([]byte, 1<<20), 512, "no GUID partition table"},
		{"a short disk", []byte("EFI"), 512, "no GUID partition table"},
		{"an odd sector size", good, 1000, "no GUID partition table: 1000-byte sectors"},
		{"a changed header", change(func(img []byte) { img[512+40] ^= 0xff }), 512, "the header's CRC does not check"},
		{"a changed entry", change(func(img []byte) { img[2*512+40] ^= 0xff }), 512, "the entries' CRC does not check"},
		{"a header larger than its sector", withHeader(good, put32(12, 600)), 512, "header size 600"},
		{"no entries", withHeader(good, put32(80, 0)), 512, "0 entries of 128 bytes at LBA 2"},
		{"entries of 100 bytes", withHeader(good, put32(84, 100)), 512, "128 entries of 100 bytes at LBA 2"},
		{"entries over the header", withHeader(good, put64(72, 1)), 512, "128 entries of 128 bytes at LBA 1"},
		{"entries past the end", withHeader(good, put64(72, 1<<40)), 512, "128 entries of 128 bytes at LBA 1099511627776"},
		{"a huge entry array", withHeader(good, put32(80, 1<<30)), 512, "1073741824 entries of 128 bytes at LBA 2"},
		{"more than 1 MiB of entries", withHeader(gptImage(4<<20, 128, gptEntry{34, 1000}), put32(80, 257), put32(84, 4096)),
			512, "257 entries of 4096 bytes at LBA 2"},
		{"a partition past the end", gptImage(1<<20, 128, gptEntry{34, 4096}), 512, "partition 1 (LBA 34 to 4096) lies outside a disk of 2048 sectors"},
		{"a partition one past the last LBA", gptImage(1<<20, 128, gptEntry{34, 2048}), 512, "partition 1 (LBA 34 to 2048) lies outside a disk of 2048 sectors"},
		{"a partition that ends before it starts", gptImage(1<<20, 128, gptEntry{100, 99}), 512, "partition 1 (LBA 100 to 99) lies outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ReadGPT(bytes.NewReader(tt.img), int64(len(tt.img)), tt.ss)
			if !errors.Is(err, ErrNoGPT) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadGPT = %+v, %v; want ErrNoGPT saying %q", g, err, tt.want)
			}
		})
	}
	if _, err := ReadGPT(bytes.NewReader(good[:4096]), int64(len(good)), 512); err == nil || errors.Is(err, ErrNoGPT) || !errors.Is(err, io.EOF) {
		t.Errorf("ReadGPT of a disk shorter than it says = %v, want the read's error", err)
	}
}

// FuzzReadGPT feeds arbitrary disk images and sector sizes to the GPT
// reader, its primary and its backup, and to the partition table reader:
// neither may panic, every table the GPT reader accepts names only
// partitions that lie inside the disk, and so does every partition (and
// region to erase) the partition table reader names. Its corpus holds the
// images of the partition table reader's and next-boot's tests.
func FuzzReadGPT(f *testing.F) {
	f.Add(gptImage(1<<20, 128, gptEntry{34, 1000}, gptEntry{1001, 2000}), int64(512))
	f.Add(gptImage(8<<10, 4, gptEntry{3, 6}, gptEntry{7, 12}), int64(512))
	mbr := make([]byte, 4096)
	disksafetest.MBREntry(mbr, 0, 0x05, 1, 7)
	disksafetest.MBREntry(mbr[512:], 0, 0x83, 1, 2)
	f.Add(mbr, int64(512))
	f.Add([]byte("EFI PART"), int64(4096))
	f.Fuzz(func(t *testing.T, b []byte, ss int64) {
		size := int64(len(b))
		lbas := []int64{1}
		if ss > 0 {
			lbas = append(lbas, size/ss-1)
		}
		for _, lba := range lbas {
			g, err := readGPT(bytes.NewReader(b), size, ss, lba)
			if err != nil {
				if !errors.Is(err, ErrNoGPT) && !strings.HasPrefix(err.Error(), "read the GPT ") {
					t.Fatalf("readGPT at LBA %d: %v is neither ErrNoGPT nor a read's error", lba, err)
				}
				continue
			}
			if g.SectorSize != ss {
				t.Fatalf("SectorSize %d, read with %d", g.SectorSize, ss)
			}
			for i, p := range g.Partitions {
				if p.Index < 1 || (i > 0 && p.Index <= g.Partitions[i-1].Index) || p.Type == (GUID{}) {
					t.Fatalf("partition %+v after %+v", p, g.Partitions[:i])
				}
				if p.FirstLBA < 0 || p.FirstLBA > p.LastLBA || p.LastLBA >= size/ss {
					t.Fatalf("partition %+v lies outside a disk of %d bytes in %d-byte sectors", p, size, ss)
				}
			}
		}
		parts := partitionTables(bytes.NewReader(b), size, ss)
		if len(parts) > 3*maxPartitions {
			t.Fatalf("%d partitions", len(parts))
		}
		for _, p := range parts {
			if p.off < 0 || p.n <= 0 || p.end() > size {
				t.Fatalf("partition %v outside a disk of %d bytes", p, size)
			}
		}
		for _, r := range eraseRegions(size, parts) {
			if r.off < 0 || r.n <= 0 || r.end() > size {
				t.Fatalf("region %v outside a disk of %d bytes", r, size)
			}
		}
	})
}
