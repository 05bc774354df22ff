package disksafe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
)

func TestParseGPTHeader(t *testing.T) {
	img := gptImage(t, 1<<20, 128, gptEntry{34, 1000})
	const last = 1<<20/512 - 1
	hdr := func(edits ...func([]byte)) []byte { return withHeader(img, edits...)[512:1024] }
	tests := []struct {
		name string
		hdr  []byte
		lba  int64
		want gptHeader // entriesCRC not compared
		err  string
	}{
		{name: "primary", hdr: hdr(), lba: 1, want: gptHeader{entriesLBA: 2, count: 128, entrySize: 128}},
		{name: "the whole sector is the header", hdr: func() []byte {
			h := bytes.Clone(img[512:1024])
			binary.LittleEndian.PutUint32(h[12:], 512)
			binary.LittleEndian.PutUint32(h[16:], 0)
			binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h))
			return h
		}(), lba: 1, want: gptHeader{entriesLBA: 2, count: 128, entrySize: 128}},
		{name: "entries end at the last LBA", hdr: hdr(put64(72, last-31)), lba: 1, want: gptHeader{entriesLBA: last - 31, count: 128, entrySize: 128}},
		{name: "entries one sector past the last LBA", hdr: hdr(put64(72, last-30)), lba: 1, err: "128 entries of 128 bytes at LBA 2017"},
		{name: "another LBA", hdr: hdr(), lba: 2, err: "the header at LBA 2 says it is at LBA 1"},
		{name: "no signature", hdr: make([]byte, 512), lba: 1, err: "no GUID partition table"},
		{name: "shorter than a header", hdr: hdr()[:91], lba: 1, err: "no GUID partition table"},
		{name: "a header of 91 bytes", hdr: hdr(put32(12, 91)), lba: 1, err: "header size 91"},
		{name: "entries of 136 bytes", hdr: hdr(put32(84, 136)), lba: 1, want: gptHeader{entriesLBA: 2, count: 128, entrySize: 136}},
		{name: "entries of 132 bytes", hdr: hdr(put32(84, 132)), lba: 1, err: "128 entries of 132 bytes"},
		{name: "entries of 8192 bytes", hdr: hdr(put32(84, 8192)), lba: 1, err: "128 entries of 8192 bytes"},
	}
	for _, tt := range tests {
		got, err := parseGPTHeader(tt.hdr, tt.lba, last)
		if tt.err != "" {
			if !errors.Is(err, ErrNoGPT) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: parseGPTHeader = %+v, %v; want %q", tt.name, got, err, tt.err)
			}
			continue
		}
		got.entriesCRC = 0
		if err != nil || got != tt.want {
			t.Errorf("%s: parseGPTHeader = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func TestParseGPTEntries(t *testing.T) {
	img := gptImage(t, 1<<20, 128, gptEntry{34, 1000}, gptEntry{1001, 2047})
	const last = 1<<20/512 - 1
	h, err := parseGPTHeader(img[512:1024], 1, last)
	if err != nil {
		t.Fatal(err)
	}
	arr := img[2*512 : 2*512+128*128]
	g, err := parseGPTEntries(arr, h, 512, last)
	if err != nil || g.SectorSize != 512 || len(g.Partitions) != 2 || g.Partitions[1].Index != 2 || g.Partitions[1].LastLBA != last {
		t.Errorf("parseGPTEntries = %+v, %v", g, err)
	}
	if _, err := parseGPTEntries(arr, h, 512, last-1); err == nil || !strings.Contains(err.Error(), "partition 2 (LBA 1001 to 2047) lies outside a disk of 2047 sectors") {
		t.Errorf("parseGPTEntries of a shorter disk = %v", err)
	}
	bad := h
	bad.entriesCRC++
	if _, err := parseGPTEntries(arr, bad, 512, last); !errors.Is(err, ErrNoGPT) || !strings.Contains(err.Error(), "the entries' CRC does not check") {
		t.Errorf("parseGPTEntries with another CRC = %v", err)
	}
}
