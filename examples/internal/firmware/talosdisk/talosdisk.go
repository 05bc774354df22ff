// Package talosdisk reads and finishes the installed disk of the firmware
// test's stand-in Talos installer (examples/internal/firmware/installer):
// the layout of internal/imagetest/standin (a GPT of EFI, META, STATE and
// EPHEMERAL, META holding the install action's values), whose EFI system
// partition the installer then fills with a FAT file system that boots
// (WriteESP). Read reads it back, as the installed system and the test do.
package talosdisk

import (
	"errors"
	"fmt"
	"io"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/internal/imagetest/standin"
)

// sector is the layout's sector size.
const sector = 512

// ErrNoInstall: the disk holds no install of the layout.
var ErrNoInstall = errors.New("no install of the stand-in Talos layout")

// Disk is what an installed disk holds.
type Disk struct {
	ESP  disksafe.Partition // the EFI system partition
	Meta map[uint8]string   // META's values, by key
}

// Read reads an installed disk of size bytes: its GPT, whose partitions
// are the layout's, and META's values (standin.ReadLayout). It returns
// ErrNoInstall for a disk without that layout or without META's mark.
func Read(r io.ReaderAt, size int64) (Disk, error) {
	l, ok, err := standin.ReadLayout(r, size)
	if err != nil {
		return Disk{}, err
	}
	if !ok {
		return Disk{}, ErrNoInstall
	}
	return Disk{ESP: l.ESP, Meta: l.Meta}, nil
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
