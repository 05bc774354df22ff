package disksafetest

import (
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"unicode/utf16"
)

// GPT is a GUID partition table that WriteGPT writes to a disk of Size
// bytes in sectors of SectorSize bytes: Entries entries of 128 bytes
// holding Parts, and the disk's GUID DiskID ("" is zero), in text.
type GPT struct {
	Size, SectorSize int64
	Entries          int
	DiskID           string
	Parts            []GPTPart
}

// GPTPart is a partition of a GPT: its type and unique GUIDs in text
// (0fc63daf-8483-4772-8e79-3d69d8477de4), its first and last LBA, and its
// name.
type GPTPart struct {
	Type, ID    string
	First, Last int64
	Name        string
}

// guid is the GPT (mixed-endian) form of the GUID s in text; it panics
// when s is not a GUID.
func guid(s string) [16]byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		panic("not a GUID: " + s)
	}
	// The first three fields are stored little-endian.
	slices.Reverse(b[0:4])
	slices.Reverse(b[4:6])
	slices.Reverse(b[6:8])
	return [16]byte(b)
}

// MBREntry writes partition entry i (0 to 3) of the MBR or EBR sec, and
// its boot signature.
func MBREntry(sec []byte, i int, typ byte, start, n uint32) {
	e := sec[446+16*i:]
	e[4] = typ
	binary.LittleEndian.PutUint32(e[8:], start)
	binary.LittleEndian.PutUint32(e[12:], n)
	sec[510], sec[511] = 0x55, 0xaa
}

// WriteGPT writes g to w: a protective MBR and the primary and backup
// table, with their CRCs, as sfdisk does.
func WriteGPT(w io.WriterAt, g GPT) error {
	le := binary.LittleEndian
	ss := g.SectorSize
	last := g.Size/ss - 1
	entrySectors := (int64(g.Entries)*128 + ss - 1) / ss
	mbr := make([]byte, ss)
	MBREntry(mbr, 0, 0xee, 1, uint32(min(last, 0xffffffff)))
	// Its first and last CHS addresses, as sfdisk writes them.
	copy(mbr[447:], []byte{0x00, 0x02, 0x00, 0xee, 0xff, 0xff, 0xff})
	entries := make([]byte, g.Entries*128)
	for i, p := range g.Parts {
		e := entries[i*128:]
		typ, id := guid(p.Type), guid(p.ID)
		copy(e, typ[:])
		copy(e[16:], id[:])
		le.PutUint64(e[32:], uint64(p.First))
		le.PutUint64(e[40:], uint64(p.Last))
		for j, c := range utf16.Encode([]rune(p.Name)) {
			le.PutUint16(e[56+2*j:], c)
		}
	}
	var diskID [16]byte
	if g.DiskID != "" {
		diskID = guid(g.DiskID)
	}
	header := func(cur, backup, entriesLBA int64) []byte {
		h := make([]byte, ss)
		copy(h, "EFI PART")
		le.PutUint32(h[8:], 0x00010000)
		le.PutUint32(h[12:], 92)
		le.PutUint64(h[24:], uint64(cur))
		le.PutUint64(h[32:], uint64(backup))
		le.PutUint64(h[40:], uint64(2+entrySectors))
		le.PutUint64(h[48:], uint64(last-entrySectors-1))
		copy(h[56:], diskID[:])
		le.PutUint64(h[72:], uint64(entriesLBA))
		le.PutUint32(h[80:], uint32(g.Entries))
		le.PutUint32(h[84:], 128)
		le.PutUint32(h[88:], crc32.ChecksumIEEE(entries))
		le.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))
		return h
	}
	for _, s := range []struct {
		lba  int64
		data []byte
	}{
		{0, mbr},
		{1, header(1, last, 2)},
		{2, entries},
		{last - entrySectors, entries},
		{last, header(last, 1, last-entrySectors)},
	} {
		if _, err := w.WriteAt(s.data, s.lba*ss); err != nil {
			return err
		}
	}
	return nil
}

// GPTImage is a disk image of g.Size bytes, zeros but for WriteGPT's g.
func GPTImage(g GPT) []byte {
	img := make(memDisk, g.Size)
	WriteGPT(img, g) // writes to memory do not fail
	return img
}

// memDisk is a disk image in memory.
type memDisk []byte

func (m memDisk) WriteAt(p []byte, off int64) (int, error) { return copy(m[off:], p), nil }
