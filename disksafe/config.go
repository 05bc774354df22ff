package disksafe

import (
	"io/fs"
	"log/slog"
)

// Default locations. Each is a path in the HookOS host's file system, and so
// also in a Tinkerbell action container that mounts it (see the package
// documentation).
const (
	// DefaultBootDir holds the HookOS agent's record of this boot's
	// attestation (BootRecordFile). /run is a tmpfs, so a new boot starts
	// without one.
	DefaultBootDir = "/run/fleet"

	// DefaultStateDir is the directory a Workflow's actions share, as the
	// Template mounts it in each action (fleet's Templates bind the
	// HookOS host's RAM-backed /run/fleet-workflow there; Tinkerbell's
	// agent mounts no shared directory of its own). wipe-disk records its
	// wipe there (WipeRecordFile) for the install step.
	DefaultStateDir = "/workflow"

	// DefaultDevDir is where Wipe opens a disk by its kernel name.
	DefaultDevDir = "/dev"
)

// Config holds the optional inputs of List, Read, Check, Wipe and CheckWiped. A nil
// *Config means every default below. A Config must not change while a call
// that uses it runs; it may be shared by concurrent calls.
type Config struct {
	// Root is the file system, rooted at the machine's "/", from which
	// sysfs (/sys/block, /sys/class/block), the udev database
	// (/run/udev/data), the /dev links of install_disk and
	// /proc/sys/kernel/random/boot_id are read. It should implement
	// fs.ReadLinkFS (os.DirFS does, and so does fstest.MapFS): without it
	// no /dev/disk/by-id link resolves and no sysfs device path is known,
	// so Check refuses every disk (ErrDevicePathUnreadable).
	// nil: the machine's root, read as os.DirFS("/") reads it.
	Root fs.FS

	// DevDir is the directory, in the operating system's own file system,
	// where Wipe opens the chosen disk as DevDir/<kernel name>. Wipe
	// opens only a block device whose device number is the one sysfs gave
	// for that name. "": DefaultDevDir.
	DevDir string

	// StateDir is the directory, shared by the run's actions, where Wipe
	// records this boot's wipe and CheckWiped reads that record. "":
	// DefaultStateDir.
	StateDir string

	// Loop lists loop devices that have a backing file, so a file-backed
	// loop device can be judged and wiped like a disk (as in tests). false:
	// loop devices are never listed, so never wiped.
	Loop bool

	// Logger receives what the package notices on the way (a discard the
	// device does not support, an unreadable sysfs attribute). It never
	// receives an install code. nil: nothing is logged.
	Logger *slog.Logger
}

func (c *Config) root() fs.FS {
	if c == nil || c.Root == nil {
		return newRootFS("/")
	}
	return c.Root
}

func (c *Config) devDir() string {
	if c == nil || c.DevDir == "" {
		return DefaultDevDir
	}
	return c.DevDir
}

func (c *Config) stateDir() string {
	if c == nil || c.StateDir == "" {
		return DefaultStateDir
	}
	return c.StateDir
}

func (c *Config) loop() bool { return c != nil && c.Loop }

func (c *Config) logger() *slog.Logger {
	if c == nil || c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}
