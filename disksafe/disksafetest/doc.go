// Package disksafetest builds, for tests and examples, the disks and the
// root file systems that package disksafe reads: a Tree is a machine's
// sysfs, udev database, /dev and boot ID in memory, of disks of the kinds
// disksafe tells apart (SATADisk, NVMeDisk, ...) or written by hand, and
// WriteGPT writes a disk's GUID partition tables as sfdisk does. None of
// it reads a real machine.
package disksafetest
