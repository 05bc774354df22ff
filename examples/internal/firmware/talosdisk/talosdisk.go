// Package talosdisk reads and finishes the installed disk of the firmware
// test's stand-in Talos installer (examples/internal/firmware/installer):
// the layout of internal/imagetest/standin (a GPT of EFI, META, STATE and
// EPHEMERAL, META holding the install action's values), whose EFI system
// partition the installer then fills with a FAT file system that boots
// (WriteESP). Read reads it back, as the installed system and the test do.
package talosdisk

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/internal/imagetest/standin"
)

// sector is the layout's sector size.
const sector = 512

// The layout's partitions, by their index in the GPT.
const (
	espIndex  = 1
	metaIndex = 2
	parts     = 4
)

// ErrNoInstall: the disk holds no install of the layout.
var ErrNoInstall = errors.New("no install of the stand-in Talos layout")

// Disk is what an installed disk holds.
type Disk struct {
	ESP  disksafe.Partition // the EFI system partition
	Meta map[uint8]string   // META's values, by key
}

// Read reads an installed disk of size bytes: its GPT, whose partitions
// are the layout's, and META's values. It returns ErrNoInstall for a disk
// without that layout or without META's mark.
func Read(r io.ReaderAt, size int64) (Disk, error) {
	gpt, err := disksafe.ReadGPT(r, size, sector)
	if errors.Is(err, disksafe.ErrNoGPT) {
		return Disk{}, ErrNoInstall
	}
	if err != nil {
		return Disk{}, err
	}
	if len(gpt.Partitions) != parts || gpt.Partitions[espIndex-1].Type != disksafe.ESPType {
		return Disk{}, fmt.Errorf("%w: %d partitions", ErrNoInstall, len(gpt.Partitions))
	}
	d := Disk{ESP: gpt.Partitions[espIndex-1], Meta: map[uint8]string{}}
	b := make([]byte, 4096)
	if _, err := r.ReadAt(b, gpt.Partitions[metaIndex-1].FirstLBA*sector); err != nil {
		return Disk{}, fmt.Errorf("read META: %w", err)
	}
	m, ok := strings.CutPrefix(string(bytes.TrimRight(b, "\x00")), standin.MetaMark)
	if !ok {
		return Disk{}, fmt.Errorf("%w: META has no mark", ErrNoInstall)
	}
	for l := range strings.Lines(m) {
		l = strings.TrimRight(l, "\n")
		if l == "" {
			continue
		}
		k, v, _ := strings.Cut(l, " ")
		key, err := strconv.ParseUint(k, 0, 8)
		if err != nil {
			return Disk{}, fmt.Errorf("META line %q: %w", l, err)
		}
		d.Meta[uint8(key)] = v
	}
	return d, nil
}

// WriteESP writes the file system image esp over the EFI system partition
// of the installed disk w (of size bytes, read through r), in place of the
// mark the layout writes there. The image must fit the partition.
func WriteESP(r io.ReaderAt, w io.WriterAt, size int64, esp []byte) error {
	d, err := Read(r, size)
	if err != nil {
		return err
	}
	room := (d.ESP.LastLBA - d.ESP.FirstLBA + 1) * sector
	if int64(len(esp)) > room {
		return fmt.Errorf("the EFI system partition holds %d bytes, the image %d", room, len(esp))
	}
	if _, err := w.WriteAt(esp, d.ESP.FirstLBA*sector); err != nil {
		return fmt.Errorf("write the EFI system partition: %w", err)
	}
	return nil
}
