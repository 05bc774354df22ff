package disksafe

import (
	"errors"
	"strings"
	"testing"
)

func TestParseGPTHeader(t *testing.T) {
	img := gptImage(1<<20, 128, gptEntry{34, 1000})
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
		{name: "the whole sector is the header", hdr: hdr(put32(12, 512)), lba: 1, want: gptHeader{entriesLBA: 2, count: 128, entrySize: 128}},
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
