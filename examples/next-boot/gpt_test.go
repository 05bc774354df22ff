package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/internal/testenv"
)

// guidBytes is the GPT (mixed-endian) form of a GUID in text.
func guidBytes(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		panic("not a GUID: " + s)
	}
	// The first three fields are stored little-endian.
	slices.Reverse(b[0:4])
	slices.Reverse(b[4:6])
	slices.Reverse(b[6:8])
	return b
}

const (
	espTypeText   = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"
	linuxTypeText = "0fc63daf-8483-4772-8e79-3d69d8477de4"
	biosTypeText  = "21686148-6449-6e6f-744e-656564454649"
)

type gptPart struct {
	typ, guid   string
	first, last uint64
}

// makeGPT returns a disk image of sectors of ss bytes with a primary GPT
// holding parts (128 entries of 128 bytes), as the UEFI specification
// lays it out.
func makeGPT(ss int, sectors uint64, parts []gptPart) []byte {
	img := make([]byte, int(sectors)*ss)
	le := binary.LittleEndian
	entries := make([]byte, 128*128)
	for i, p := range parts {
		e := entries[i*128:]
		copy(e[0:], guidBytes(p.typ))
		copy(e[16:], guidBytes(p.guid))
		le.PutUint64(e[32:], p.first)
		le.PutUint64(e[40:], p.last)
		copy(e[56:], []byte{'E', 0, 'F', 0, 'I', 0})
	}
	entriesLBA := uint64(2)
	copy(img[int(entriesLBA)*ss:], entries)
	h := img[ss : ss+92]
	copy(h, "EFI PART")
	le.PutUint32(h[8:], 0x00010000)
	le.PutUint32(h[12:], 92)
	le.PutUint64(h[24:], 1)
	le.PutUint64(h[32:], sectors-1)
	le.PutUint64(h[40:], 34)
	le.PutUint64(h[48:], sectors-34)
	copy(h[56:], guidBytes("6a1f0e3c-9b2d-4e5f-8a7b-1c2d3e4f5a6b"))
	le.PutUint64(h[72:], entriesLBA)
	le.PutUint32(h[80:], 128)
	le.PutUint32(h[84:], 128)
	le.PutUint32(h[88:], crc32.ChecksumIEEE(entries))
	le.PutUint32(h[16:], crc32.ChecksumIEEE(h))
	return img
}

// talosLayout is Talos 1.13's partitions on a UEFI disk, EFI, META, STATE
// and EPHEMERAL, shrunk to fit a disk of 4096 sectors.
func talosLayout(espGUID string) []gptPart {
	return []gptPart{
		{espTypeText, espGUID, 64, 2047},
		{linuxTypeText, "7d4c2b1a-0f9e-4d8c-b7a6-958473625140", 2048, 2111},
		{linuxTypeText, "8e5d3c2b-1a0f-4e9d-a8b7-a69584736251", 2112, 3071},
		{linuxTypeText, "9f6e4d3c-2b1a-4f0e-b9a8-b7a695847362", 3072, 4000},
	}
}

// TestFindESP finds the one ESP of each disk, or the reason there is none.
func TestFindESP(t *testing.T) {
	const guid = "5f2c9e1a-7b3d-4c8e-9a10-2b4c6d8e0f12"
	corrupt := makeGPT(512, 4096, talosLayout(guid))
	corrupt[512+40] ^= 0xff
	tests := []struct {
		name string
		img  []byte
		want esp    // when err is ""
		err  string // what the error holds
	}{
		{"512-byte sectors", makeGPT(512, 4096, talosLayout(guid)), esp{1, guid}, ""},
		{"4096-byte sectors", makeGPT(4096, 4096, talosLayout(guid)), esp{1, guid}, ""},
		// The ESP need not be the first partition.
		{"a BIOS boot partition first", makeGPT(512, 4096, append([]gptPart{{biosTypeText, "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f", 34, 63}}, talosLayout(guid)...)),
			esp{2, guid}, ""},
		// One of ReadGPT's refusals (TestReadGPTRefuses' in disksafe), its
		// reason kept.
		{"a changed header", corrupt, esp{}, "the header's CRC does not check"},
		{"no ESP", makeGPT(512, 4096, talosLayout(guid)[1:]), esp{}, "no EFI system partition"},
		{"two ESPs", makeGPT(512, 4096, append(talosLayout(guid), gptPart{espTypeText, "00000000-1111-4222-8333-444444444444", 4001, 4050})), esp{},
			"more than one EFI system partition: partition 1 (" + guid + "), partition 5 (00000000-1111-4222-8333-444444444444)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := findESP(bytes.NewReader(tt.img), int64(len(tt.img)))
			if got != tt.want || (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("findESP = %v, %v; want %v, an error holding %q", got, err, tt.want, tt.err)
			}
		})
	}
	if _, err := findESP(bytes.NewReader(make([]byte, 8192)), 8192); !errors.Is(err, errNoGPT) {
		t.Errorf("findESP of zeros = %v, want errNoGPT", err)
	}
}

// TestIntegrationSfdisk reads GPTs that util-linux's sfdisk wrote, as the
// Talos installer's GPT library writes them.
func TestIntegrationSfdisk(t *testing.T) {
	sfdisk := testenv.Command(t, "sfdisk", "fdisk")
	const guid = "3a7e9c1d-5b2f-4d8a-9e6c-0f1b2d3c4e5a"
	for _, tt := range []struct {
		name   string
		script string
		want   esp
	}{
		{"the ESP first, as Talos lays it out", "label: gpt\n" +
			"start=2048, size=2097152, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, uuid=" + guid + ", name=EFI\n" +
			"size=2048, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=META\n" +
			"size=204800, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=STATE\n" +
			"type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=EPHEMERAL\n", esp{1, guid}},
		{"the ESP third", "label: gpt\n" +
			"size=2048, type=21686148-6449-6E6F-744E-656564454649\n" +
			"size=4096, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n" +
			"size=204800, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, uuid=" + strings.ToUpper(guid) + "\n", esp{3, guid}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "disk.img")
			if err := os.WriteFile(img, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(img, 4<<30); err != nil { // sparse
				t.Fatal(err)
			}
			cmd := exec.Command(sfdisk, "--no-reread", "--no-tell-kernel", "-q", img)
			cmd.Stdin = strings.NewReader(tt.script)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("sfdisk: %v\n%s", err, out)
			}
			f, err := os.Open(img)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := findESP(f, 4<<30)
			if err != nil || got != tt.want {
				t.Errorf("findESP = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
