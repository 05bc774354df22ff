package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
	"github.com/fleetkit/fleet/internal/testenv"
)

const (
	espTypeText   = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"
	linuxTypeText = "0fc63daf-8483-4772-8e79-3d69d8477de4"
	biosTypeText  = "21686148-6449-6e6f-744e-656564454649"
)

// makeGPT returns a disk image of 4096 sectors of ss bytes with a GPT
// holding parts (128 entries of 128 bytes), as the UEFI specification
// lays it out.
func makeGPT(ss int64, parts []disksafetest.GPTPart) []byte {
	return disksafetest.GPTImage(disksafetest.GPT{Size: 4096 * ss, SectorSize: ss, Entries: 128, Parts: parts})
}

// talosLayout is Talos 1.13's partitions on a UEFI disk, EFI, META, STATE
// and EPHEMERAL, shrunk to fit a disk of 4096 sectors.
func talosLayout(espGUID string) []disksafetest.GPTPart {
	return []disksafetest.GPTPart{
		{Type: espTypeText, ID: espGUID, First: 64, Last: 2047},
		{Type: linuxTypeText, ID: "7d4c2b1a-0f9e-4d8c-b7a6-958473625140", First: 2048, Last: 2111},
		{Type: linuxTypeText, ID: "8e5d3c2b-1a0f-4e9d-a8b7-a69584736251", First: 2112, Last: 3071},
		{Type: linuxTypeText, ID: "9f6e4d3c-2b1a-4f0e-b9a8-b7a695847362", First: 3072, Last: 4000},
	}
}

// TestFindESP finds the one ESP of each disk, or the reason there is none.
func TestFindESP(t *testing.T) {
	const guid = "5f2c9e1a-7b3d-4c8e-9a10-2b4c6d8e0f12"
	corrupt := makeGPT(512, talosLayout(guid))
	corrupt[512+40] ^= 0xff
	tests := []struct {
		name string
		img  []byte
		want esp    // when err is ""
		err  string // what the error holds
	}{
		{"512-byte sectors", makeGPT(512, talosLayout(guid)), esp{1, guid}, ""},
		{"4096-byte sectors", makeGPT(4096, talosLayout(guid)), esp{1, guid}, ""},
		// The ESP need not be the first partition.
		{"a BIOS boot partition first", makeGPT(512, append([]disksafetest.GPTPart{{Type: biosTypeText, ID: "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f", First: 34, Last: 63}}, talosLayout(guid)...)),
			esp{2, guid}, ""},
		// One of ReadGPT's refusals (TestReadGPTRefuses' in disksafe), its
		// reason kept.
		{"a changed header", corrupt, esp{}, "the header's CRC does not check"},
		{"no ESP", makeGPT(512, talosLayout(guid)[1:]), esp{}, "no EFI system partition"},
		{"two ESPs", makeGPT(512, append(talosLayout(guid), disksafetest.GPTPart{Type: espTypeText, ID: "00000000-1111-4222-8333-444444444444", First: 4001, Last: 4050})), esp{},
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
