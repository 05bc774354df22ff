package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
)

// espType is the partition type GUID of an EFI system partition,
// C12A7328-F81F-11D2-BA4B-00A0C93EC93B, as GPT stores it.
var espType = [16]byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b}

// Bounds on what a GPT header may ask to read: the UEFI specification's
// entry size is 128 × 2^n bytes, and no disk needs more than a few hundred
// entries (the minimum array is 16 KiB).
const (
	maxEntrySize  = 4096
	maxEntryBytes = 1 << 20
)

// esp is an EFI system partition as a boot entry's HD() node names it.
type esp struct {
	Index int    // the partition's number, from 1
	GUID  string // its unique partition GUID, lowercase
}

func (e esp) String() string { return fmt.Sprintf("partition %d (%s)", e.Index, e.GUID) }

// errNoGPT: the disk holds no valid primary GPT.
var errNoGPT = errors.New("no GUID partition table")

// findESP reads the primary GPT of the disk at r (whose logical sector is
// 512 or 4096 bytes: the header's signature says which) and returns its one
// EFI system partition. The header's and the entry array's CRC32 must
// check.
func findESP(r io.ReaderAt) (esp, error) {
	var hdr []byte
	var sector int64
	for _, ss := range []int64{512, 4096} {
		b := make([]byte, 92)
		if _, err := r.ReadAt(b, ss); err != nil && !errors.Is(err, io.EOF) {
			return esp{}, fmt.Errorf("read the GPT header: %w", err)
		}
		if string(b[:8]) == "EFI PART" {
			hdr, sector = b, ss
			break
		}
	}
	if hdr == nil {
		return esp{}, errNoGPT
	}
	le := binary.LittleEndian
	size := le.Uint32(hdr[12:])
	if size < 92 || int64(size) > sector {
		return esp{}, fmt.Errorf("%w: header size %d", errNoGPT, size)
	}
	full := make([]byte, size)
	if _, err := r.ReadAt(full, sector); err != nil {
		return esp{}, fmt.Errorf("read the GPT header: %w", err)
	}
	want := le.Uint32(full[16:])
	le.PutUint32(full[16:], 0)
	if crc32.ChecksumIEEE(full) != want {
		return esp{}, fmt.Errorf("%w: the header's CRC does not check", errNoGPT)
	}
	entriesLBA := le.Uint64(hdr[72:])
	n := le.Uint32(hdr[80:])
	entSize := le.Uint32(hdr[84:])
	if entSize < 128 || entSize > maxEntrySize || entSize%8 != 0 || uint64(n)*uint64(entSize) > maxEntryBytes ||
		entriesLBA < 2 || entriesLBA > (1<<62)/uint64(sector) {
		return esp{}, fmt.Errorf("%w: %d entries of %d bytes at LBA %d", errNoGPT, n, entSize, entriesLBA)
	}
	entries := make([]byte, int(n)*int(entSize))
	if _, err := r.ReadAt(entries, int64(entriesLBA)*sector); err != nil {
		return esp{}, fmt.Errorf("read the GPT entries: %w", err)
	}
	if crc32.ChecksumIEEE(entries) != le.Uint32(hdr[88:]) {
		return esp{}, fmt.Errorf("%w: the entries' CRC does not check", errNoGPT)
	}
	var found []esp
	for i := 0; i < int(n); i++ {
		e := entries[i*int(entSize):]
		if bytes.Equal(e[:16], espType[:]) {
			found = append(found, esp{Index: i + 1, GUID: guidString(e[16:32])})
		}
	}
	switch len(found) {
	case 0:
		return esp{}, errors.New("no EFI system partition")
	case 1:
		return found[0], nil
	default:
		var s []string
		for _, f := range found {
			s = append(s, f.String())
		}
		return esp{}, fmt.Errorf("more than one EFI system partition: %s", strings.Join(s, ", "))
	}
}

// guidString formats a GUID as GPT stores it (the first three fields
// little-endian) in the lowercase form efibootmgr prints.
func guidString(b []byte) string {
	le := binary.LittleEndian
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", le.Uint32(b[0:]), le.Uint16(b[4:]), le.Uint16(b[6:]), b[8:10], b[10:16])
}
