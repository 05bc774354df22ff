package disksafe

import (
	"errors"
	"fmt"
	"io/fs"
)

// CheckWiped is the install action's guard: it returns nil only when
// wipe-disk recorded, in this run's state directory (cfg's StateDir), that
// it finished wiping disk in this boot (bootID, as BootID reads it).
// Otherwise it returns a *Refusal with Op "install", and the install
// action installs nothing:
//
//   - ErrNoInstallDisk: disk is empty.
//   - ErrResumedRun: the state directory holds no WipeRecord (a new HookOS
//     boot starts with an empty one), or one of another boot than bootID,
//     or bootID is empty: the run resumed at install in a new boot.
//   - ErrNotWiped: the record is of this boot but of another disk, or
//     says the wipe did not finish, or cannot be read.
//
// Refusal.Cause says what the record holds instead. CheckWiped only reads.
func CheckWiped(disk, bootID string, cfg *Config) error {
	if disk == "" {
		return &Refusal{Op: "install", Err: ErrNoInstallDisk}
	}
	rec, err := ReadWipeRecord(cfg.stateDir())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &Refusal{Op: "install", Err: ErrResumedRun, Disk: disk, Cause: err}
	case err != nil:
		return &Refusal{Op: "install", Err: ErrNotWiped, Disk: disk, Cause: err}
	case bootID == "" || rec.BootID != bootID:
		return &Refusal{Op: "install", Err: ErrResumedRun, Disk: disk,
			Cause: fmt.Errorf("wipe-disk ran in boot %q; this is boot %q", rec.BootID, bootID)}
	case rec.Disk != disk:
		return &Refusal{Op: "install", Err: ErrNotWiped, Disk: disk,
			Cause: fmt.Errorf("wipe-disk wiped %s", rec.Disk)}
	case !rec.Wiped:
		return &Refusal{Op: "install", Err: ErrNotWiped, Disk: disk,
			Cause: errors.New("wipe-disk started and did not finish")}
	}
	return nil
}
