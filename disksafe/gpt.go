package disksafe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// ErrNoGPT: the disk holds no valid GUID partition table where one was
// looked for. ReadGPT returns it bare when no header signature is there,
// and wrapped, with what is wrong, when a header is there and fails a
// check.
var ErrNoGPT = errors.New("no GUID partition table")

// GUID is a GUID as a GPT stores it: its first three fields little-endian.
type GUID [16]byte

// String returns g in the canonical lowercase form, as efibootmgr prints
// it: c12a7328-f81f-11d2-ba4b-00a0c93ec93b.
func (g GUID) String() string {
	le := binary.LittleEndian
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", le.Uint32(g[0:]), le.Uint16(g[4:]), le.Uint16(g[6:]), g[8:10], g[10:16])
}

// ESPType is the partition type GUID of an EFI system partition,
// C12A7328-F81F-11D2-BA4B-00A0C93EC93B.
var ESPType = GUID{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b}

// Partition is one used entry of a GUID partition table. It is a value.
type Partition struct {
	Index    int   // the entry's position in the table, from 1
	Type     GUID  // the partition type GUID, e.g. ESPType
	ID       GUID  // the unique partition GUID
	FirstLBA int64 // its first sector
	LastLBA  int64 // its last sector, inclusive
}

// GPT is a GUID partition table that passed every check of ReadGPT. It is a
// value.
type GPT struct {
	SectorSize int64       // the logical sector size it was read with
	Partitions []Partition // its used entries (a non-zero type), in table order
}

// Bounds on what a GPT header may ask to read. The UEFI specification's
// entry is 128 × 2^n bytes; no disk needs thousands of entries (the
// specification's minimum array is 128 entries, 16 KiB).
const (
	maxGPTEntrySize  = 4096
	maxGPTEntries    = 4096
	maxGPTEntryBytes = 1 << 20
)

// ReadGPT reads the primary GUID partition table (the header at LBA 1) of
// the disk r, which holds size bytes in sectors of sectorSize bytes (a power
// of two from 512 to 64 KiB). It accepts a table only when:
//
//   - the header says "EFI PART", is 92 bytes to one sector long, names
//     LBA 1 as its own, and passes its CRC32;
//   - its entries are 128 to 4096 bytes each, a multiple of 8, at most
//     4096 of them and 1 MiB in all, and lie inside the disk from LBA 2 on;
//   - the entry array passes its CRC32;
//   - every used entry's first sector is at most its last, and its last is
//     inside the disk.
//
// So every partition of an accepted table lies inside the disk. A table
// that fails a check is ErrNoGPT (errors.Is), with what failed; a failed
// read is the reader's error. ReadGPT reads at most two sectors and the
// entry array.
func ReadGPT(r io.ReaderAt, size, sectorSize int64) (GPT, error) {
	return readGPT(r, size, sectorSize, 1)
}

// readGPT reads the GPT whose header is at lba: 1 for the primary, the
// disk's last sector for the backup.
func readGPT(r io.ReaderAt, size, ss, lba int64) (GPT, error) {
	if ss < 512 || ss > 64<<10 || ss&(ss-1) != 0 {
		return GPT{}, fmt.Errorf("%w: %d-byte sectors", ErrNoGPT, ss)
	}
	last := size/ss - 1 // the disk's last LBA
	if last < 2 || lba < 1 || lba > last {
		return GPT{}, ErrNoGPT
	}
	hdr := make([]byte, ss)
	if _, err := r.ReadAt(hdr, lba*ss); err != nil {
		return GPT{}, fmt.Errorf("read the GPT header: %w", err)
	}
	h, err := parseGPTHeader(hdr, lba, last)
	if err != nil {
		return GPT{}, err
	}
	arr := make([]byte, h.count*h.entrySize)
	if _, err := r.ReadAt(arr, h.entriesLBA*ss); err != nil {
		return GPT{}, fmt.Errorf("read the GPT entries: %w", err)
	}
	return parseGPTEntries(arr, h, ss, last)
}

// gptHeader is what a GPT header says of its entry array.
type gptHeader struct {
	entriesLBA int64  // the array's first LBA
	count      int64  // its entries
	entrySize  int64  // the bytes of each
	entriesCRC uint32 // the array's CRC32
}

// parseGPTHeader checks the GPT header in hdr, the sector at lba of a disk
// whose last LBA is last, as ReadGPT says: its signature, size and CRC,
// its own LBA, and an entry array that fits the bounds and the disk.
func parseGPTHeader(hdr []byte, lba, last int64) (gptHeader, error) {
	if len(hdr) < 92 || !bytes.Equal(hdr[:8], []byte("EFI PART")) {
		return gptHeader{}, ErrNoGPT
	}
	le := binary.LittleEndian
	hsize := int64(le.Uint32(hdr[12:]))
	if hsize < 92 || hsize > int64(len(hdr)) {
		return gptHeader{}, fmt.Errorf("%w: header size %d", ErrNoGPT, hsize)
	}
	h := bytes.Clone(hdr[:hsize])
	clear(h[16:20])
	if crc32.ChecksumIEEE(h) != le.Uint32(hdr[16:]) {
		return gptHeader{}, fmt.Errorf("%w: the header's CRC does not check", ErrNoGPT)
	}
	if my := le.Uint64(hdr[24:]); my != uint64(lba) {
		return gptHeader{}, fmt.Errorf("%w: the header at LBA %d says it is at LBA %d", ErrNoGPT, lba, my)
	}
	entriesLBA := le.Uint64(hdr[72:])
	count := int64(le.Uint32(hdr[80:]))
	esize := int64(le.Uint32(hdr[84:]))
	ss := int64(len(hdr))
	if esize < 128 || esize > maxGPTEntrySize || esize%8 != 0 || count < 1 || count > maxGPTEntries ||
		count*esize > maxGPTEntryBytes || entriesLBA < 2 || entriesLBA > uint64(last) ||
		count*esize > (last-int64(entriesLBA)+1)*ss {
		return gptHeader{}, fmt.Errorf("%w: %d entries of %d bytes at LBA %d", ErrNoGPT, count, esize, entriesLBA)
	}
	return gptHeader{entriesLBA: int64(entriesLBA), count: count, entrySize: esize, entriesCRC: le.Uint32(hdr[88:])}, nil
}

// parseGPTEntries checks the entry array arr that header h describes, on
// a disk of ss-byte sectors whose last LBA is last: its CRC, and each used
// entry's sectors inside the disk. It returns the used entries.
func parseGPTEntries(arr []byte, h gptHeader, ss, last int64) (GPT, error) {
	if crc32.ChecksumIEEE(arr) != h.entriesCRC {
		return GPT{}, fmt.Errorf("%w: the entries' CRC does not check", ErrNoGPT)
	}
	le := binary.LittleEndian
	g := GPT{SectorSize: ss}
	for i := range h.count {
		e := arr[i*h.entrySize:]
		var p Partition
		copy(p.Type[:], e[0:16])
		if p.Type == (GUID{}) {
			continue
		}
		copy(p.ID[:], e[16:32])
		first, lastLBA := le.Uint64(e[32:]), le.Uint64(e[40:])
		if first > lastLBA || lastLBA > uint64(last) {
			return GPT{}, fmt.Errorf("%w: partition %d (LBA %d to %d) lies outside a disk of %d sectors", ErrNoGPT, i+1, first, lastLBA, last+1)
		}
		p.Index, p.FirstLBA, p.LastLBA = int(i)+1, int64(first), int64(lastLBA)
		g.Partitions = append(g.Partitions, p)
	}
	return g, nil
}
