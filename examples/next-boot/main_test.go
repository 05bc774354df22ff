package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
)

// nvram is a UEFI boot manager as efibootmgr drives it: Boot#### entries,
// BootOrder and BootNext, printed in the form of efibootmgr 17 or 18.
type nvram struct {
	style   int // 17 or 18
	current string
	next    string
	order   []string
	entries map[string]fakeEntry
	// disks maps a disk's path to its ESP, as efibootmgr --create reads it.
	disks map[string]esp
	calls []string

	fail       string // every call fails with this line
	failCreate bool   // --create-only fails
	dropNext   bool   // the firmware does not keep BootNext
}

type fakeEntry struct {
	label  string
	active bool
	path   string // in efibootmgr 17's form
}

func (n *nvram) Run(_ context.Context, args ...string) (string, error) {
	n.calls = append(n.calls, strings.Join(args, " "))
	if n.fail != "" {
		return "", errors.New("efibootmgr " + strings.Join(args, " ") + ": " + n.fail)
	}
	switch {
	case len(args) == 1 && args[0] == "-v":
		return n.print(), nil
	case len(args) == 2 && args[0] == "--bootnext":
		if _, ok := n.entries[args[1]]; !ok {
			return "", fmt.Errorf("efibootmgr: Boot%s does not exist", args[1])
		}
		if !n.dropNext {
			n.next = args[1]
		}
		return n.print(), nil
	case len(args) == 3 && args[0] == "--bootnum" && args[2] == "--delete-bootnum":
		delete(n.entries, args[1])
		n.order = slices.DeleteFunc(n.order, func(s string) bool { return s == args[1] })
		return n.print(), nil
	case len(args) == 9 && args[0] == "--create-only" && args[1] == "--disk" && args[3] == "--part" && args[5] == "--loader" && args[7] == "--label":
		if n.failCreate {
			return "", errors.New("efibootmgr: Could not prepare Boot variable: No space left on device")
		}
		p, ok := n.disks[args[2]]
		if !ok || fmt.Sprint(p.Index) != args[4] {
			return "", fmt.Errorf("efibootmgr: Could not prepare Boot variable: No such file or directory")
		}
		for i := 0; ; i++ {
			num := fmt.Sprintf("%04X", i)
			if _, used := n.entries[num]; !used {
				n.entries[num] = fakeEntry{label: args[8], active: true,
					path: fmt.Sprintf("HD(%d,GPT,%s,0x800,0x200000)/File(%s)", p.Index, p.GUID, args[6])}
				return n.print(), nil
			}
		}
	}
	return "", fmt.Errorf("efibootmgr: unexpected arguments %q", args)
}

func (n *nvram) print() string {
	var b strings.Builder
	fmt.Fprintf(&b, "BootCurrent: %s\n", n.current)
	if n.next != "" {
		fmt.Fprintf(&b, "BootNext: %s\n", n.next)
	}
	b.WriteString("Timeout: 1 seconds\n")
	fmt.Fprintf(&b, "BootOrder: %s\n", strings.Join(n.order, ","))
	nums := make([]string, 0, len(n.entries))
	for num := range n.entries {
		nums = append(nums, num)
	}
	slices.Sort(nums)
	for _, num := range nums {
		e := n.entries[num]
		star := " "
		if e.active {
			star = "*"
		}
		path := e.path
		if n.style == 18 {
			if i := strings.Index(path, "/File("); i >= 0 {
				path = path[:i] + "/" + strings.TrimSuffix(path[i+len("/File("):], ")")
			}
		}
		fmt.Fprintf(&b, "Boot%s%s %s\t%s\n", num, star, e.label, path)
		if n.style == 18 {
			b.WriteString("      dp: 04 01 2a 00 01 00 00 00 00 08 00 00 00 00 00 00 / 7f ff 04 00\n")
		}
	}
	return b.String()
}

const (
	installedGUID = "b2a4c6e8-0d1f-4a3b-9c5d-7e8f9a0b1c2d"
	byID          = "/dev/disk/by-id/nvme-Samsung_SSD_980_1TB_S64DNX0R123456"
)

// machine is a UEFI machine with an NVMe install disk, freshly installed
// (its GPT in a file in the test's /dev), and a firmware with a PXE entry
// first in BootOrder, a shell, and an entry of ours from an earlier install.
type machine struct {
	root     fstest.MapFS
	devDir   string
	nv       *nvram
	env      map[string]string
	mounts   int   // how often efivarfs was mounted
	mountErr error // what mounting it returns
}

func newMachine(t *testing.T, style int) *machine {
	t.Helper()
	m := &machine{devDir: t.TempDir()}
	m.root = disksafetest.NewTree().
		Add(disksafetest.NVMeDisk("nvme0n1", "259:0", "S64DNX0R123456")).
		Link("dev/disk/by-id/nvme-Samsung_SSD_980_1TB_S64DNX0R123456", "../../nvme0n1").
		File("sys/firmware/efi/efivars/BootOrder-8be4df61-93ca-11d2-aa0d-00e098032b8c", "\x07\x00\x00\x00\x04\x00\x01\x00").FS
	if err := os.WriteFile(filepath.Join(m.devDir, "nvme0n1"), makeGPT(512, talosLayout(installedGUID)), 0o600); err != nil {
		t.Fatal(err)
	}
	m.nv = &nvram{
		style: style, current: "0004", order: []string{"0004", "0003", "0001"},
		entries: map[string]fakeEntry{
			"0001": {label: "UEFI: Built-in EFI Shell", path: "VenMedia(5023b95c-db26-429b-a648-bd47664c8012)..BO"},
			"0003": {label: defaultLabel, active: true, path: `HD(1,GPT,` + staleGUID + `,0x800,0x200000)/File(\EFI\BOOT\BOOTX64.EFI)`},
			"0004": {label: "UEFI: PXE IP4 Intel(R) Ethernet Connection X722 for 10GbE SFP+", active: true,
				path: "PciRoot(0x0)/Pci(0x1c,0x0)/Pci(0x0,0x0)/MAC(3cecef123456,1)/IPv4(0.0.0.00.0.0.0,0,0)..BO"},
		},
		disks: map[string]esp{filepath.Join(m.devDir, "nvme0n1"): {1, installedGUID}},
	}
	m.env = map[string]string{"INSTALL_DISK": byID, "NEXT_BOOT_LOADER": `\EFI\BOOT\BOOTX64.EFI`}
	return m
}

// TestOutcomes runs next-boot on newMachine (efibootmgr 17 unless style
// says 18), with more firmware entries and changed by change, into each
// outcome: the exit code, the whole stdout and stderr ({dev}: the disk's
// device file), how often it mounted efivarfs, and whether it ran
// efibootmgr. When an entry boots next, next names it: next-boot boots an
// active entry that boots the disk's ESP (ours first) and creates none, or
// creates one, and deletes ours that boot another ESP; BootOrder is never
// set, and the shell's entry is kept.
func TestOutcomes(t *testing.T) {
	hd := `HD(1,GPT,` + installedGUID + `,0x800,0x200000)/File(\EFI\BOOT\BOOTX64.EFI)`
	create := []string{
		"-v",
		"--bootnum 0003 --delete-bootnum", // the earlier install's ESP
		"--create-only --disk {dev} --part 1 --loader \\EFI\\BOOT\\BOOTX64.EFI --label Talos (fleet)",
		"-v",
		"--bootnext 0000",
		"-v",
	}
	noVars := func(m *machine) {
		maps.DeleteFunc(m.root, func(p string, _ *fstest.MapFile) bool { return strings.HasPrefix(p, "sys/firmware/efi/efivars/") })
		m.root["sys/firmware/efi/efivars"] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
	}
	tests := []struct {
		name           string
		style          int // efibootmgr's; 0: 17
		entries        map[string]fakeEntry
		change         func(m *machine)
		exit           int
		stdout, stderr string // stdout when next is ""
		mounts         int
		efi            bool // efibootmgr ran (it does when next is set)

		next    string   // the entry that boots next
		calls   []string // efibootmgr's arguments ({dev}: the disk's device file); nil: not compared
		order   []string // BootOrder after
		created bool
		count   int // the entries left
	}{
		{name: "efibootmgr 17 creates the entry", next: "Boot0000 Talos (fleet)", calls: create, order: []string{"0004", "0001"}, created: true, count: 3},
		{name: "efibootmgr 18 creates the entry", style: 18, next: "Boot0000 Talos (fleet)", calls: create, order: []string{"0004", "0001"}, created: true, count: 3},
		{name: "the Talos installer's systemd-boot entry, as it writes the path", entries: map[string]fakeEntry{"0005": {label: "Talos Linux UKI", active: true,
			path: `HD(1,GPT,` + installedGUID + `,0x800,0x200000)/File(\EFI\boot\BOOTX64.efi)`}}, next: "Boot0005 Talos Linux UKI", order: []string{"0004", "0001"}, count: 3},
		{name: "the firmware's own entry for the disk's fallback loader", style: 18, entries: map[string]fakeEntry{"0002": {label: "UEFI OS", active: true, path: hd + "0000424f"}},
			next: "Boot0002 UEFI OS", order: []string{"0004", "0001"}, count: 3},
		{name: "not an inactive one of ours", entries: map[string]fakeEntry{"0002": {label: "UEFI OS", active: true, path: hd}, "0005": {label: defaultLabel, path: hd}},
			next: "Boot0002 UEFI OS", order: []string{"0004", "0001"}, count: 4},
		// Ours, when it boots this ESP, is preferred; an inactive one is not used.
		{name: "ours", entries: map[string]fakeEntry{"0002": {label: "UEFI OS", active: true, path: hd}, "0003": {label: defaultLabel, active: true, path: hd},
			"0005": {label: defaultLabel, path: hd}}, next: "Boot0003 Talos (fleet)", order: []string{"0004", "0003", "0001"}, count: 5},
		{name: "efivarfs not mounted", change: noVars, mounts: 1, next: "Boot0000 Talos (fleet)", order: []string{"0004", "0001"}, created: true, count: 3},
		{name: "legacy BIOS", change: func(m *machine) {
			maps.DeleteFunc(m.root, func(p string, _ *fstest.MapFile) bool { return strings.HasPrefix(p, "sys/firmware/") })
		}, stdout: "next-boot: this machine booted by legacy BIOS, which has no BootNext; its boot order decides what boots next, and nothing was changed\n"},
		{name: "efivarfs cannot be mounted", change: func(m *machine) { noVars(m); m.mountErr = errors.New("operation not permitted") },
			exit: exitFailed, stderr: "next-boot: mount efivarfs: operation not permitted\n", mounts: 1},
		{name: "efivarfs without variables", change: func(m *machine) { m.nv.fail = "EFI variables are not supported on this system." },
			exit: exitFailed, stderr: "next-boot: efibootmgr -v: EFI variables are not supported on this system.\n", efi: true},
		{name: "the firmware refuses the entry", change: func(m *machine) { m.nv.failCreate = true },
			exit: exitFailed, stderr: "next-boot: efibootmgr: Could not prepare Boot variable: No space left on device\n", efi: true},
		{name: "the firmware drops BootNext", change: func(m *machine) { m.nv.dropNext = true },
			exit: exitFailed, stderr: "next-boot: BootNext is unset after efibootmgr --bootnext 0000\n", efi: true},
		{name: "a wiped disk", change: func(m *machine) {
			os.WriteFile(filepath.Join(m.devDir, "nvme0n1"), make([]byte, 1<<20), 0o600)
		}, exit: exitFailed, stderr: "next-boot: " + byID + " (nvme0n1): no GUID partition table\n"},
		{name: "no such disk", change: func(m *machine) { m.env["INSTALL_DISK"] = "/dev/sdz" }, exit: exitFailed, stderr: "next-boot: /dev/sdz is no block device\n"},
		{name: "a disk that cannot be opened", change: func(m *machine) { os.Remove(filepath.Join(m.devDir, "nvme0n1")) },
			exit: exitFailed, stderr: "next-boot: open {dev}: no such file or directory\n"},
		{name: "no install disk", change: func(m *machine) { delete(m.env, "INSTALL_DISK") }, exit: exitUsage, stderr: "next-boot: no install disk is declared (INSTALL_DISK)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMachine(t, cmp.Or(tt.style, 17))
			maps.Copy(m.nv.entries, tt.entries)
			if tt.change != nil {
				tt.change(m)
			}
			var out, errb bytes.Buffer
			sys := system{root: m.root, devDir: m.devDir, efi: m.nv, mountEFIVars: func() error { m.mounts++; return m.mountErr }}
			code := run(t.Context(), nil, func(k string) string { return m.env[k] }, sys, &out, &errb)
			stdout, stderr := out.String(), errb.String()
			dev := filepath.Join(m.devDir, "nvme0n1")
			wantOut, efi := tt.stdout, tt.efi
			if tt.next != "" {
				wantOut, efi = "next-boot: "+byID+" boots next: "+tt.next+"\n", true
			}
			want := strings.ReplaceAll(tt.stderr, "{dev}", dev)
			if code != tt.exit || stdout != wantOut || stderr != want || m.mounts != tt.mounts {
				t.Fatalf("exit %d, %d mounts\nstdout %q\nstderr %q\nwant exit %d, %d mounts, stdout %q, stderr %q\ncalls %q",
					code, m.mounts, stdout, stderr, tt.exit, tt.mounts, wantOut, want, m.nv.calls)
			}
			if ran := len(m.nv.calls) > 0; ran != efi {
				t.Errorf("efibootmgr ran %t, want %t: %q", ran, efi, m.nv.calls)
			}
			if tt.next == "" {
				return
			}
			var calls []string
			for _, c := range tt.calls {
				calls = append(calls, strings.ReplaceAll(c, "{dev}", dev))
			}
			if tt.calls != nil && !slices.Equal(m.nv.calls, calls) {
				t.Errorf("efibootmgr calls\n%q\nwant\n%q", m.nv.calls, calls)
			}
			created := slices.ContainsFunc(m.nv.calls, func(c string) bool { return strings.HasPrefix(c, "--create") })
			if m.nv.next != tt.next[4:8] || !slices.Equal(m.nv.order, tt.order) || created != tt.created || len(m.nv.entries) != tt.count {
				t.Errorf("BootNext %q, BootOrder %q, %d entries, calls %q", m.nv.next, m.nv.order, len(m.nv.entries), m.nv.calls)
			}
			if _, ok := m.nv.entries["0001"]; !ok {
				t.Error("the shell's entry was deleted")
			}
		})
	}
}

func TestUsage(t *testing.T) {
	var errb bytes.Buffer
	if code := run(t.Context(), []string{"now"}, func(string) string { return "" }, system{}, &bytes.Buffer{}, &errb); code != exitUsage {
		t.Errorf("an argument: exit %d", code)
	}
	errb.Reset()
	if code := run(t.Context(), []string{"-help"}, func(string) string { return "" }, system{}, &bytes.Buffer{}, &errb); code != 0 {
		t.Errorf("-help: exit %d", code)
	}
	for _, s := range []string{"INSTALL_DISK", "NEXT_BOOT_LOADER", "NEXT_BOOT_LABEL", "EFIBOOTMGR", `\EFI\BOOT\BOOT`, `"Talos (fleet)"`, "BootOrder is never changed"} {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("-help does not say %q:\n%s", s, errb.String())
		}
	}
}
