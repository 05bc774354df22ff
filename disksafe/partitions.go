package disksafe

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
)

// partitionTables returns the partitions a disk's own tables name: the MBR's
// primary entries and the logical partitions of its extended partition, and
// the entries of the primary and the backup GPT. A GPT counts only when its
// header and entry array pass their CRC32s, so a damaged or random table
// names nothing. Every extent lies inside [0, size). ss is the logical
// sector size; GPTs are also looked for with 512- and 4096-byte sectors.
func partitionTables(r io.ReaderAt, size, ss int64) []extent {
	if size <= 0 {
		return nil
	}
	if ss < 512 || ss > 64<<10 || ss&(ss-1) != 0 {
		ss = 512
	}
	var parts []extent
	add := func(off, n int64) {
		if len(parts) >= 3*maxPartitions || off < 0 || n <= 0 || off >= size {
			return
		}
		parts = append(parts, extent{off, min(n, size-off)})
	}
	mbrPartitions(r, size, ss, add)
	for _, s := range uniq(ss, 512, 4096) {
		gptPartitions(r, size, s, add)
	}
	return parts
}

func uniq(v ...int64) []int64 {
	var out []int64
	for _, x := range v {
		dup := false
		for _, y := range out {
			dup = dup || x == y
		}
		if !dup {
			out = append(out, x)
		}
	}
	return out
}

// mbrPartitions adds the MBR's partitions: its four primary entries (not a
// GPT's protective 0xEE entry), and the logical partitions chained from an
// extended one (at most 64).
func mbrPartitions(r io.ReaderAt, size, ss int64, add func(off, n int64)) {
	sec := make([]byte, 512)
	if _, err := r.ReadAt(sec, 0); err != nil || sec[510] != 0x55 || sec[511] != 0xaa {
		return
	}
	var ext int64 = -1
	for i := range 4 {
		e := sec[446+16*i:]
		typ := e[4]
		start := int64(binary.LittleEndian.Uint32(e[8:]))
		n := int64(binary.LittleEndian.Uint32(e[12:]))
		if typ == 0 || typ == 0xee || n == 0 {
			continue
		}
		add(start*ss, n*ss)
		if (typ == 0x05 || typ == 0x0f || typ == 0x85) && ext < 0 {
			ext = start
		}
	}
	if ext <= 0 {
		return
	}
	ebr := ext
	for range 64 {
		if ebr*ss >= size {
			return
		}
		if _, err := r.ReadAt(sec, ebr*ss); err != nil || sec[510] != 0x55 || sec[511] != 0xaa {
			return
		}
		l := sec[446:]
		if start, n := int64(binary.LittleEndian.Uint32(l[8:])), int64(binary.LittleEndian.Uint32(l[12:])); l[4] != 0 && n != 0 {
			add((ebr+start)*ss, n*ss)
		}
		next := sec[462:]
		rel := int64(binary.LittleEndian.Uint32(next[8:]))
		if next[4] == 0 || rel == 0 || ext+rel <= ebr {
			return
		}
		ebr = ext + rel
	}
}

var gptSignature = []byte("EFI PART")

// gptPartitions adds the partitions of the primary GPT (LBA 1) and of the
// backup GPT (last LBA) for sector size ss.
func gptPartitions(r io.ReaderAt, size, ss int64, add func(off, n int64)) {
	last := size/ss - 1
	if last < 2 {
		return
	}
	for _, lba := range []int64{1, last} {
		hdr := make([]byte, ss)
		if _, err := r.ReadAt(hdr, lba*ss); err != nil || !bytes.Equal(hdr[:8], gptSignature) {
			continue
		}
		hsize := int64(binary.LittleEndian.Uint32(hdr[12:]))
		if hsize < 92 || hsize > ss {
			continue
		}
		want := binary.LittleEndian.Uint32(hdr[16:])
		h := bytes.Clone(hdr[:hsize])
		clear(h[16:20])
		if crc32.ChecksumIEEE(h) != want {
			continue
		}
		entriesLBA := int64(binary.LittleEndian.Uint64(hdr[72:]))
		count := int64(binary.LittleEndian.Uint32(hdr[80:]))
		esize := int64(binary.LittleEndian.Uint32(hdr[84:]))
		if esize < 128 || esize > 4096 || esize%8 != 0 || count == 0 || count > 4096 {
			continue
		}
		if entriesLBA < 0 || entriesLBA > last || (count*esize) > (last-entriesLBA+1)*ss {
			continue
		}
		arr := make([]byte, count*esize)
		if _, err := r.ReadAt(arr, entriesLBA*ss); err != nil {
			continue
		}
		if crc32.ChecksumIEEE(arr) != binary.LittleEndian.Uint32(hdr[88:]) {
			continue
		}
		var zero [16]byte
		for i := range count {
			e := arr[i*esize:]
			if bytes.Equal(e[:16], zero[:]) {
				continue
			}
			first := binary.LittleEndian.Uint64(e[32:])
			lastLBA := binary.LittleEndian.Uint64(e[40:])
			if first > lastLBA || lastLBA > uint64(last) {
				continue
			}
			add(int64(first)*ss, int64(lastLBA-first+1)*ss)
		}
	}
}
