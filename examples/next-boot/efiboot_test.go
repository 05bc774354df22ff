package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readFixture(tb testing.TB, name string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

const (
	uefiOSGUID = "5f2c9e1a-7b3d-4c8e-9a10-2b4c6d8e0f12"
	staleGUID  = "11111111-2222-4333-8444-555555555555"
)

// TestParseBootState parses each fixture, and judges which of its entries
// boot partition 1 of GUID uefiOSGUID with the fallback loader, named in
// lower case (FAT paths compare without case).
func TestParseBootState(t *testing.T) {
	p := esp{Index: 1, GUID: uefiOSGUID}
	uefiOS17 := bootEntry{Num: "0000", Active: true, Label: "UEFI OS",
		Path: `HD(1,GPT,` + uefiOSGUID + `,0x800,0x200000)/File(\EFI\BOOT\BOOTX64.EFI)..BO`,
		Part: 1, PartGUID: uefiOSGUID, File: `\EFI\BOOT\BOOTX64.EFI`}
	ours17 := bootEntry{Num: "0003", Active: true, Label: "Talos (fleet)",
		Path: `HD(1,GPT,` + staleGUID + `,0x800,0x200000)/File(\EFI\BOOT\BOOTX64.EFI)`,
		Part: 1, PartGUID: staleGUID, File: `\EFI\BOOT\BOOTX64.EFI`}
	pxe17 := bootEntry{Num: "0004", Active: true, Label: "UEFI: PXE IP4 Intel(R) Ethernet Connection X722 for 10GbE SFP+",
		Path: "PciRoot(0x0)/Pci(0x1c,0x0)/Pci(0x0,0x0)/MAC(3cecef123456,1)/IPv4(0.0.0.00.0.0.0,0,0)..BO"}
	tests := []struct {
		file  string
		want  bootState
		boots []string // the entries that boot p; not Boot0003 (another ESP), Boot0002 (another loader) or PXE
	}{
		{"efibootmgr17-v.txt", bootState{
			Current: "0004", Next: "0002", Order: []string{"0004", "0000", "0002", "0003", "0001"},
			Entries: []bootEntry{
				uefiOS17,
				{Num: "0001", Label: "UEFI: Built-in EFI Shell", Path: "VenMedia(5023b95c-db26-429b-a648-bd47664c8012)..BO"},
				{Num: "0002", Active: true, Label: "Windows Boot Manager",
					Path: `HD(1,GPT,0a1b2c3d-4e5f-4061-8273-94a5b6c7d8e9,0x800,0x32000)/File(\EFI\Microsoft\Boot\bootmgfw.efi)WINDOWS.........x...B.C.D.O.B.J.E.C.T.=.{.9.d.e.a.8.6.2.c.-.5.c.d.d.-.4.e.7.0.-.a.c.c.1.-.f.3.2.b.3.4.4.d.4.7.9.5.}...................`,
					Part: 1, PartGUID: "0a1b2c3d-4e5f-4061-8273-94a5b6c7d8e9", File: `\EFI\Microsoft\Boot\bootmgfw.efi`},
				ours17,
				pxe17,
			}}, []string{"0000"}},
		{"efibootmgr18-v.txt", bootState{
			Current: "0004", Order: []string{"0004", "0000", "0003", "0001"},
			Entries: []bootEntry{
				{Num: "0000", Active: true, Label: "UEFI OS",
					Path: `HD(1,GPT,` + uefiOSGUID + `,0x800,0x200000)/\EFI\BOOT\BOOTX64.EFI0000424f`,
					Part: 1, PartGUID: uefiOSGUID, File: `\EFI\BOOT\BOOTX64.EFI0000424f`},
				{Num: "0001", Label: "UEFI: Built-in EFI Shell", Path: "VenMedia(5023b95c-db26-429b-a648-bd47664c8012)0000424f"},
				{Num: "0003", Active: true, Label: "Talos (fleet)",
					Path: `HD(1,GPT,` + staleGUID + `,0x800,0x200000)/\EFI\BOOT\BOOTX64.EFI`,
					Part: 1, PartGUID: staleGUID, File: `\EFI\BOOT\BOOTX64.EFI`},
				{Num: "0004", Active: true, Label: pxe17.Label,
					Path: "PciRoot(0x0)/Pci(0x1c,0x0)/Pci(0x0,0x0)/MAC(3cecef123456,1)/IPv4(0.0.0.00.0.0.0,0,0)0000424f"},
			}}, []string{"0000"}}, // the path runs into optional data
		{"efibootmgr18.txt", bootState{
			Current: "0004", Order: []string{"0004", "0000", "0003", "0001"},
			Entries: []bootEntry{
				{Num: "0000", Active: true, Label: "UEFI OS"},
				{Num: "0001", Label: "UEFI: Built-in EFI Shell"},
				{Num: "0003", Active: true, Label: "Talos (fleet)"},
				{Num: "0004", Active: true, Label: pxe17.Label},
			}}, nil}, // no device path printed
		{"efibootmgr-copied.txt", bootState{
			Current: "0004", Order: []string{"0004", "0000", "0003"},
			Entries: []bootEntry{
				{Num: "0000", Active: true, Label: "UEFI OS",
					Path: `HD(1,GPT,5F2C9E1A-7B3D-4C8E-9A10-2B4C6D8E0F12,0x800,0x200000)/File(\EFI\BOOT\BOOTX64.EFI)..BO`,
					Part: 1, PartGUID: uefiOSGUID, File: `\EFI\BOOT\BOOTX64.EFI`},
				ours17,
				pxe17,
			}}, []string{"0000"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := parseBootState(readFixture(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseBootState (-want +got):\n%s", diff)
			}
			for _, e := range got.Entries {
				if b := e.boots(p, `\efi\boot\bootx64.efi`); b != slices.Contains(tt.boots, e.Num) {
					t.Errorf("Boot%s boots = %t", e.Num, b)
				}
			}
		})
	}
	if (bootEntry{Part: 2, PartGUID: uefiOSGUID, File: `\EFI\BOOT\BOOTX64.EFI`}).boots(p, `\EFI\BOOT\BOOTX64.EFI`) {
		t.Error("an entry of partition 2 boots partition 1")
	}
}

func TestParseBootStateErrors(t *testing.T) {
	for _, out := range []string{
		"BootCurrent: 00004\n",
		"BootNext: zz\n",
		"BootOrder: 0001,0x02\n",
	} {
		if s, err := parseBootState(out); err == nil {
			t.Errorf("parseBootState(%q) = %+v, want an error", out, s)
		}
	}
	// Lines it does not know are skipped.
	s, err := parseBootState("EFI variables are not supported on this system.\nBoot000\nBoot00001* X\tHD(1,GPT,y)\nMirroredPercentageAbove4G: 0.00\n")
	if err != nil || len(s.Entries) != 0 {
		t.Errorf("parseBootState = %+v, %v", s, err)
	}
}

func TestEfibootmgrProgram(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses sh")
	}
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := efibootmgr{path: script("ok", "test \"$1\" = -v || exit 9\ncat testdata/efibootmgr17-v.txt\n")}
	s, err := state(t.Context(), ok)
	if err != nil || len(s.Entries) != 5 || s.Next != "0002" {
		t.Errorf("state = %+v, %v", s, err)
	}
	// efibootmgr on a machine without efivarfs.
	noVars := efibootmgr{path: script("novars", "echo 'EFI variables are not supported on this system.' >&2\nexit 2\n")}
	if _, err := state(t.Context(), noVars); err == nil || !strings.HasSuffix(err.Error(), "novars -v: EFI variables are not supported on this system.") {
		t.Errorf("state = %v", err)
	}
	silent := efibootmgr{path: script("silent", "exit 5\n")}
	if _, err := silent.Run(t.Context(), "--bootnext", "0003"); err == nil || !strings.Contains(err.Error(), "silent --bootnext 0003: exit status 5") {
		t.Errorf("Run = %v", err)
	}
	empty := efibootmgr{path: script("empty", "exit 0\n")}
	if _, err := state(t.Context(), empty); err == nil {
		t.Error("state of no output succeeded")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (efibootmgr{path: script("slow", "sleep 10\n")}).Run(ctx, "-v"); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("Run after cancel = %v", err)
	}
}

func FuzzParseBootState(f *testing.F) {
	for _, name := range []string{"efibootmgr17-v.txt", "efibootmgr18-v.txt", "efibootmgr18.txt", "efibootmgr-copied.txt"} {
		f.Add(readFixture(f, name))
	}
	f.Add("Boot0000* X\tHD(1,GPT,00000000-0000-0000-0000-000000000000,0x1,0x1)/File(")
	f.Fuzz(func(t *testing.T, out string) {
		s, err := parseBootState(out)
		if err != nil {
			return
		}
		for _, e := range s.Entries {
			if len(e.Num) != 4 || strings.ToUpper(e.Num) != e.Num {
				t.Errorf("entry number %q", e.Num)
			}
			if e.PartGUID != "" && (len(e.PartGUID) != 36 || strings.ToLower(e.PartGUID) != e.PartGUID) {
				t.Errorf("partition GUID %q", e.PartGUID)
			}
			if !strings.Contains(out, e.Label) {
				t.Errorf("label %q is not in the output", e.Label)
			}
		}
		for _, n := range append([]string{s.Current, s.Next}, s.Order...) {
			if n != "" && len(n) != 4 {
				t.Errorf("boot number %q", n)
			}
		}
	})
}
