package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// bootState is the firmware's boot manager as efibootmgr -v prints it.
type bootState struct {
	Current string // BootCurrent, e.g. "0001"; "" when not printed
	Next    string // BootNext; "" when unset
	Order   []string
	Entries []bootEntry
}

// bootEntry is one Boot#### variable.
type bootEntry struct {
	Num    string // four uppercase hex digits
	Active bool
	Label  string
	Path   string // the device path as printed, with any optional data

	// Part and PartGUID are the partition of the path's HD(N,GPT,GUID,...)
	// node; 0 and "" when it has none.
	Part     int
	PartGUID string // lowercase
	// File is the loader's path after the HD node, as printed: from
	// File(...) (efibootmgr up to 17), or the text that follows "HD(...)/"
	// (efibootmgr 18, which may run straight into optional data).
	File string
}

var (
	entryLine = regexp.MustCompile(`^Boot([0-9A-Fa-f]{4})([* ])\s?(.*)$`)
	hdNode    = regexp.MustCompile(`HD\((\d+),GPT,([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}),[^)]*\)`)
	hexNum    = regexp.MustCompile(`^[0-9A-Fa-f]{4}$`)
	// pathStart finds where a device path begins when no tab parts it
	// from the label (old efibootmgr, or a copy that lost its tabs).
	pathStart = regexp.MustCompile(`\s+(HD|PciRoot|Pci|ACPI|PcieRoot|FvVol|FvFile|MemoryMapped|VenHw|VenMsg|VenMedia|BBS|USB|Sata|NVMe|Scsi|SCSI|MAC|File|Fv|Uri|CDROM)\(`)
)

// parseBootState reads efibootmgr's output, with or without -v, in the
// forms of efibootmgr 0.12 to 18: a tab (or, in old versions and copies,
// blanks) between an entry's label and its device path, File(...) or a
// bare path after the HD node, and the "dp:" and "data:" lines of 18's -v.
// Lines it does not know are skipped; a malformed BootNext, BootCurrent or
// BootOrder is an error, since next-boot acts on them.
func parseBootState(out string) (bootState, error) {
	var s bootState
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case strings.HasPrefix(line, "BootCurrent:"):
			v := strings.TrimSpace(strings.TrimPrefix(line, "BootCurrent:"))
			if !hexNum.MatchString(v) {
				return bootState{}, fmt.Errorf("efibootmgr: BootCurrent %q is not a boot number", v)
			}
			s.Current = strings.ToUpper(v)
		case strings.HasPrefix(line, "BootNext:"):
			v := strings.TrimSpace(strings.TrimPrefix(line, "BootNext:"))
			if !hexNum.MatchString(v) {
				return bootState{}, fmt.Errorf("efibootmgr: BootNext %q is not a boot number", v)
			}
			s.Next = strings.ToUpper(v)
		case strings.HasPrefix(line, "BootOrder:"):
			v := strings.TrimSpace(strings.TrimPrefix(line, "BootOrder:"))
			s.Order = nil
			for _, n := range strings.Split(v, ",") {
				if n = strings.TrimSpace(n); n == "" {
					continue
				}
				if !hexNum.MatchString(n) {
					return bootState{}, fmt.Errorf("efibootmgr: BootOrder %q holds %q, not a boot number", v, n)
				}
				s.Order = append(s.Order, strings.ToUpper(n))
			}
		default:
			if m := entryLine.FindStringSubmatch(line); m != nil {
				s.Entries = append(s.Entries, parseEntry(strings.ToUpper(m[1]), m[2] == "*", m[3]))
			}
		}
	}
	return s, nil
}

func parseEntry(num string, active bool, rest string) bootEntry {
	e := bootEntry{Num: num, Active: active}
	if label, path, ok := strings.Cut(rest, "\t"); ok {
		e.Label, e.Path = strings.TrimSpace(label), strings.TrimSpace(path)
	} else if loc := pathStart.FindStringIndex(rest); loc != nil {
		e.Label, e.Path = strings.TrimSpace(rest[:loc[0]]), strings.TrimSpace(rest[loc[0]:])
	} else {
		e.Label = strings.TrimSpace(rest)
	}
	m := hdNode.FindStringSubmatchIndex(e.Path)
	if m == nil {
		return e
	}
	part, err := strconv.Atoi(e.Path[m[2]:m[3]])
	if err != nil {
		return e
	}
	e.Part, e.PartGUID = part, strings.ToLower(e.Path[m[4]:m[5]])
	after := e.Path[m[1]:]
	switch {
	case strings.HasPrefix(after, "/File("):
		f := after[len("/File("):]
		if i := strings.IndexByte(f, ')'); i >= 0 {
			e.File = f[:i]
		}
	case strings.HasPrefix(after, "/\\"):
		f := after[1:]
		if i := strings.IndexAny(f, " \t"); i >= 0 {
			f = f[:i]
		}
		e.File = f
	}
	return e
}

// boots reports whether e boots loader from the partition p.
func (e bootEntry) boots(p esp, loader string) bool {
	return e.Part == p.Index && e.PartGUID == p.GUID &&
		// efibootmgr 18 runs a path into its optional data, so the loader
		// is a prefix; FAT paths compare without case.
		strings.HasPrefix(strings.ToUpper(e.File), strings.ToUpper(loader))
}

// efiTool runs efibootmgr with args and returns what it printed.
type efiTool interface {
	Run(ctx context.Context, args ...string) (string, error)
}

// efibootmgr runs the efibootmgr program.
type efibootmgr struct{ path string }

// Run runs the program. A failure's error is its last line of output (where
// efibootmgr says why), or how it failed.
func (t efibootmgr) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, t.path, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err == nil {
		return out.String(), nil
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("%s: %w", t.path, ctx.Err())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return "", fmt.Errorf("%s %s: %s", t.path, strings.Join(args, " "), last)
	}
	return "", fmt.Errorf("%s %s: %w", t.path, strings.Join(args, " "), err)
}

// state runs efibootmgr -v and reads its output.
func state(ctx context.Context, t efiTool) (bootState, error) {
	out, err := t.Run(ctx, "-v")
	if err != nil {
		return bootState{}, err
	}
	s, err := parseBootState(out)
	if err != nil {
		return bootState{}, err
	}
	if len(s.Entries) == 0 && s.Current == "" && len(s.Order) == 0 {
		return bootState{}, errors.New("efibootmgr -v printed no boot manager state")
	}
	return s, nil
}
