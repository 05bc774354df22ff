package disksafe

import (
	"encoding/binary"
	"io"
)

// partitionTables returns the partitions a disk's own tables name: the MBR's
// primary entries and the logical partitions of its extended partition, and
// the entries of the primary and the backup GPT. A GPT counts only when it
// passes every check of ReadGPT (CRC32s and bounds), so a damaged or random
// table names nothing. Every extent lies inside [0, size). ss is the logical
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

// gptPartitions adds the partitions of the primary GPT (LBA 1) and of the
// backup GPT (last LBA) for sector size ss, each only when it passes every
// check of ReadGPT.
func gptPartitions(r io.ReaderAt, size, ss int64, add func(off, n int64)) {
	for _, lba := range []int64{1, size/ss - 1} {
		g, err := readGPT(r, size, ss, lba)
		if err != nil {
			continue
		}
		for _, p := range g.Partitions {
			add(p.FirstLBA*ss, (p.LastLBA-p.FirstLBA+1)*ss)
		}
	}
}
