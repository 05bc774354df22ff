// Package standin is the disk layout of fleet's stand-in for Talos's
// installer image, which no test here can pull: what its installer writes
// to the install disk (Install) and what a test, or the machine's next
// boot, reads back (Read).
//
// The layout is the one a Talos UKI install makes, recognisably marked: a
// GUID partition table, in 512-byte sectors, of an EFI system partition
// (sectors 2048 to 34815), META (2048 sectors), STATE (32768 sectors) and
// EPHEMERAL (the rest). The EFI system partition begins with ImageMark and
// the line "image <reference>"; META begins with MetaMark and then one
// "0xKEY VALUE" line per META value the install action gave the installer
// (INSTALLER_META_BASE64, as Talos's installer decodes it). No boot loader,
// kernel or file system is written: nothing boots from the disk.
//
// WriteESP writes a file system image over the EFI system partition of an
// installed disk, as Talos's installer writes its boot loader there, so
// that the disk boots (the firmware test's installed system).
//
// The command internal/imagetest/standin/installer is the image's
// /bin/installer, and imagetest.Installer builds and pushes the image.
package standin

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"strconv"
	"strings"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/disksafe/disksafetest"
	"github.com/siderolabs/talos/pkg/machinery/meta"
)

// Version is the Talos version the stand-in says it installs.
const Version = "v1.13.9"

// The marks at the start of the EFI system partition and of META.
const (
	ImageMark = "FLEET WHOLE-MACHINE TALOS IMAGE\n"
	MetaMark  = "FLEET WHOLE-MACHINE META\n"
)

// sector is the sector size the layout is written and read in.
const sector = 512

// linuxType is the partition type GUID of META, STATE and EPHEMERAL:
// 0FC63DAF-8483-4772-8E79-3D69D8477DE4, a Linux file system.
var linuxType = disksafe.GUID{0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47, 0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4}

// part is a partition of the layout; size 0 runs to the last usable sector.
type part struct {
	name  string
	typ   disksafe.GUID
	first int64
	size  int64
}

var layout = []part{
	{"EFI", disksafe.ESPType, 2048, 32768},
	{"META", linuxType, 0, 2048},
	{"STATE", linuxType, 0, 32768},
	{"EPHEMERAL", linuxType, 0, 0},
}

// minSectors is the smallest disk the layout fits: an EPHEMERAL of 1 MiB,
// and the backup table.
const minSectors = 2048 + 32768 + 2048 + 32768 + 2048 + 33

// Disk is an install disk: a block device or an image file.
type Disk interface {
	io.ReaderAt
	io.WriterAt
}

// ErrNotEmpty: the disk holds a partition table already, and Talos's
// installer, without its wipe option, installs only to an empty disk.
// Install returns it in a *NotEmptyError.
var ErrNotEmpty = errors.New("disk is not empty")

// NotEmptyError is Install's refusal of a disk that is not empty. errors.Is
// finds ErrNotEmpty.
type NotEmptyError struct {
	// Detected is what the disk holds, as Talos's installer names it
	// (blkid's name): "gpt" or "dos".
	Detected string
}

func (e *NotEmptyError) Error() string { return ErrNotEmpty.Error() + ": " + e.Detected }

func (e *NotEmptyError) Unwrap() error { return ErrNotEmpty }

// Install lays out disk, of size bytes, as the package doc says, marked
// with image and values, and logs each step to lg as Talos's installer
// logs. It refuses, with a *NotEmptyError, a disk whose first sectors hold
// an MBR signature or a GPT header. The caller syncs disk. It calls
// writing, when it is not nil, once the partition table is written and
// before the marks are: where Talos's installer spends its time formatting
// the partitions and copying the boot assets. A program stopped there
// leaves a partial install, a partition table without the marks.
func Install(disk Disk, size int64, image string, values meta.Values, lg *log.Logger, writing func()) error {
	head := make([]byte, 2*sector)
	if _, err := disk.ReadAt(head, 0); err != nil {
		return fmt.Errorf("read the disk: %w", err)
	}
	switch {
	case bytes.Equal(head[sector:sector+8], []byte("EFI PART")):
		return &NotEmptyError{Detected: "gpt"}
	case bytes.Equal(head[510:512], []byte{0x55, 0xaa}):
		return &NotEmptyError{Detected: "dos"}
	}
	sectors := size / sector
	if sectors < minSectors {
		return fmt.Errorf("the disk holds %d bytes, fewer than the %d the layout needs", size, minSectors*sector)
	}
	lg.Printf("creating new partition table")
	parts, err := writeGPT(disk, sectors)
	if err != nil {
		return err
	}
	for _, p := range parts {
		lg.Printf("created partition %d (%s): sectors %d-%d", p.Index, layout[p.Index-1].name, p.FirstLBA, p.LastLBA)
	}
	if writing != nil {
		writing()
	}
	var m strings.Builder
	m.WriteString(MetaMark)
	for _, v := range values {
		fmt.Fprintf(&m, "%#x %s\n", v.Key, v.Value)
	}
	for _, w := range []struct {
		part int
		data string
	}{{0, ImageMark + "image " + image + "\n"}, {1, m.String()}} {
		if _, err := disk.WriteAt([]byte(w.data), parts[w.part].FirstLBA*sector); err != nil {
			return fmt.Errorf("write %s: %w", layout[w.part].name, err)
		}
	}
	lg.Printf("writing %d META values", len(values))
	return nil
}

// writeGPT writes a protective MBR and the primary and backup GPT of the
// layout to a disk of sectors sectors, and returns its partitions.
func writeGPT(disk Disk, sectors int64) ([]disksafe.Partition, error) {
	var parts []disksafe.Partition
	var gpt []disksafetest.GPTPart
	next := int64(0)
	for i, p := range layout {
		first := cmp.Or(p.first, next)
		end := first + p.size - 1
		if p.size == 0 {
			end = sectors - 34 // the last usable sector
		}
		id, err := randomGUID()
		if err != nil {
			return nil, err
		}
		parts = append(parts, disksafe.Partition{Index: i + 1, Type: p.typ, ID: id, FirstLBA: first, LastLBA: end})
		gpt = append(gpt, disksafetest.GPTPart{Type: p.typ.String(), ID: id.String(), First: first, Last: end, Name: p.name})
		next = end + 1
	}
	diskID, err := randomGUID()
	if err != nil {
		return nil, err
	}
	g := disksafetest.GPT{Size: sectors * sector, SectorSize: sector, Entries: 128, DiskID: diskID.String(), Parts: gpt}
	if err := disksafetest.WriteGPT(disk, g); err != nil {
		return nil, fmt.Errorf("write the partition table: %w", err)
	}
	return parts, nil
}

func randomGUID() (disksafe.GUID, error) {
	var g disksafe.GUID
	if _, err := rand.Read(g[:]); err != nil {
		return g, err
	}
	g[7] = g[7]&0x0f | 0x40 // version 4, in the GUID's little-endian third field
	g[8] = g[8]&0x3f | 0x80
	return g, nil
}

// Installed is what Install wrote to a disk.
type Installed struct {
	Image string           // the installer image's reference
	Meta  map[uint8]string // the META values, by key
}

// Read reads back what Install wrote to disk, of size bytes, as the
// installed Talos reads its META partition. ok is false when the disk holds
// no such install (no GPT, another layout, or no marks); err is a read
// error or a META line that does not parse.
func Read(disk io.ReaderAt, size int64) (in Installed, ok bool, err error) {
	l, ok, err := ReadLayout(disk, size)
	if err != nil || !ok {
		return Installed{}, false, err
	}
	esp, err := readPart(disk, l.ESP)
	if err != nil || !strings.HasPrefix(esp, ImageMark) {
		return Installed{}, false, err
	}
	in.Image = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(esp, ImageMark), "image "))
	in.Meta = l.Meta
	return in, true, nil
}

// Layout is the layout as a disk holds it: its EFI system partition and
// META's values.
type Layout struct {
	ESP  disksafe.Partition
	Meta map[uint8]string // by key
}

// ReadLayout reads the layout's partitions and META's values from disk, of
// size bytes, whatever its EFI system partition holds now (a program may
// have written a file system over ImageMark). ok is false when the disk
// holds no such layout (no GPT, other partitions, or META without its
// mark); err is a read error or a META line that does not parse.
func ReadLayout(disk io.ReaderAt, size int64) (l Layout, ok bool, err error) {
	gpt, err := disksafe.ReadGPT(disk, size, sector)
	if errors.Is(err, disksafe.ErrNoGPT) || err == nil && (len(gpt.Partitions) != len(layout) || gpt.Partitions[0].Type != disksafe.ESPType) {
		return Layout{}, false, nil
	}
	if err != nil {
		return Layout{}, false, err
	}
	m, err := readPart(disk, gpt.Partitions[1])
	if err != nil || !strings.HasPrefix(m, MetaMark) {
		return Layout{}, false, err
	}
	l = Layout{ESP: gpt.Partitions[0], Meta: map[uint8]string{}}
	for line := range strings.Lines(strings.TrimPrefix(m, MetaMark)) {
		line = strings.TrimRight(line, "\n")
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, " ")
		key, err := strconv.ParseUint(k, 0, 8)
		if err != nil {
			return Layout{}, false, fmt.Errorf("META line %q: %w", line, err)
		}
		l.Meta[uint8(key)] = v
	}
	return l, true, nil
}

// ErrNoLayout: the disk holds no layout of the stand-in installer.
var ErrNoLayout = errors.New("no install of the stand-in Talos layout")

// WriteESP writes the file system image esp over the EFI system partition
// of the installed disk, of size bytes, in place of the mark Install
// writes there. The image must fit the partition. It returns ErrNoLayout
// for a disk without the layout.
func WriteESP(disk Disk, size int64, esp []byte) error {
	l, ok, err := ReadLayout(disk, size)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNoLayout
	}
	room := (l.ESP.LastLBA - l.ESP.FirstLBA + 1) * sector
	if int64(len(esp)) > room {
		return fmt.Errorf("the EFI system partition holds %d bytes, the image %d", room, len(esp))
	}
	if _, err := disk.WriteAt(esp, l.ESP.FirstLBA*sector); err != nil {
		return fmt.Errorf("write the EFI system partition: %w", err)
	}
	return nil
}

// readPart returns the first 4 KiB of partition p, without trailing
// zeros.
func readPart(disk io.ReaderAt, p disksafe.Partition) (string, error) {
	b := make([]byte, 4096)
	if _, err := disk.ReadAt(b, p.FirstLBA*sector); err != nil {
		return "", err
	}
	return string(bytes.TrimRight(b, "\x00")), nil
}
