package standin

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/siderolabs/talos/pkg/machinery/meta"
)

// Command is what fleet's install action gives Talos's installer, read as
// the installer reads it: the arguments
//
//	installer install --disk DISK --platform metal
//
// and the META values of INSTALLER_META_BASE64, as the stand-in installer
// (internal/imagetest/standin/installer) reads them.
type Command struct {
	Disk   string
	Values meta.Values
}

// ParseCommand reads args (without the program's name) and the META values
// from getenv("INSTALLER_META_BASE64"); anything else but install on the
// metal platform with a disk is a usage error.
func ParseCommand(args []string, getenv func(string) string) (Command, error) {
	usage := fmt.Errorf("usage: installer install --disk DISK --platform metal, got %q", args)
	if len(args) == 0 || args[0] != "install" {
		return Command{}, usage
	}
	var c Command
	platform := ""
	for i := 1; i+1 < len(args); i += 2 {
		switch args[i] {
		case "--disk":
			c.Disk = args[i+1]
		case "--platform":
			platform = args[i+1]
		}
	}
	if c.Disk == "" || platform != "metal" {
		return Command{}, usage
	}
	values, err := meta.DecodeValues(getenv("INSTALLER_META_BASE64"))
	if err != nil {
		return Command{}, fmt.Errorf("decoding META values: %w", err)
	}
	c.Values = values
	return c, nil
}

// OpenDisk opens the command's disk for writing and returns its size; the
// caller closes it.
func (c Command) OpenDisk() (*os.File, int64, error) {
	f, err := os.OpenFile(c.Disk, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("failed to open %s: %w", c.Disk, err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("failed to size %s: %w", c.Disk, err)
	}
	return f, size, nil
}

// InstallError is Install's error as Talos's installer words it: a disk
// that is not empty is
//
//	failed to perform disk operations: disk DISK is not empty, skipping install, detected "gpt"
//
// and any other error names the disk. nil stays nil.
func (c Command) InstallError(err error) error {
	if ne := (*NotEmptyError)(nil); errors.As(err, &ne) {
		return fmt.Errorf("failed to perform disk operations: disk %s is not empty, skipping install, detected %q", c.Disk, ne.Detected)
	}
	if err != nil {
		return fmt.Errorf("failed to perform disk operations on %s: %w", c.Disk, err)
	}
	return nil
}
