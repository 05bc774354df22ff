package disksafe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"sync"
)

// Installer runs the Talos installer onto a disk. Install calls output once
// per line the installer prints (stdout and stderr alike, without the line
// end); output is safe for concurrent use, and ignores calls after Install
// returns. Install returns nil only when the installer succeeded.
type Installer interface {
	Install(ctx context.Context, disk string, output func(line string)) error
}

// Installed is a finished install. It is a value.
type Installed struct {
	Disk string // install_disk as declared
}

// String returns the runbook's line, "install: installed Talos to <disk>".
func (i Installed) String() string { return "install: installed Talos to " + i.Disk }

// InstallerError is the error of an installer that ran and failed. Its text
// is the installer's last lines (at most Config.InstallerLines), each
// prefixed "install: ", and then the line
// "install: the installer failed; the lines above are its last output".
// errors.Is finds ErrInstallerFailed and Err. It is not changed once
// returned.
type InstallerError struct {
	// Lines are the installer's last non-blank output lines, oldest
	// first, with a leading Go log timestamp removed and the install code
	// replaced by "<install code>".
	Lines []string
	// Err is what the Installer returned. Its text is not part of Error;
	// it may hold what the installer was given, so print it with care.
	Err error
}

func (e *InstallerError) Error() string {
	var b strings.Builder
	for _, l := range e.Lines {
		b.WriteString("install: ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString(ErrInstallerFailed.Error())
	return b.String()
}

// Unwrap returns ErrInstallerFailed and Err.
func (e *InstallerError) Unwrap() []error { return []error{ErrInstallerFailed, e.Err} }

// logStamp is the timestamp Go's log package puts before each line (the
// Talos installer logs that way).
var logStamp = regexp.MustCompile(`^[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)? `)

// Install runs the install step of a run: it installs Talos to t.Disk with
// inst, but only after wipe-disk wiped that disk in this boot. It refuses,
// installing nothing:
//
//   - ErrNoInstallDisk: t.Disk is empty.
//   - ErrResumedRun: the state directory holds no WipeRecord (a new HookOS
//     boot starts with an empty one), or one of another boot than bootID
//     (this boot's ID, BootID), or bootID is empty.
//   - ErrNotWiped: the record is of this boot but of another disk than
//     t.Disk, or says the wipe did not finish, or cannot be read.
//
// When the installer fails, Install returns an *InstallerError. On success
// it returns the runbook's line as an Installed. Lines of the installer's
// output go to cfg's Logger at debug level, with t.Code replaced by
// "<install code>".
func Install(ctx context.Context, t Target, bootID string, inst Installer, cfg *Config) (Installed, error) {
	if t.Disk == "" {
		return Installed{}, fmt.Errorf("install: no install disk is declared; nothing installed: %w", ErrNoInstallDisk)
	}
	if inst == nil {
		return Installed{}, errors.New("install: no installer is configured; nothing installed")
	}
	rec, err := ReadWipeRecord(cfg.stateDir())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Installed{}, &Refusal{Err: ErrResumedRun, Disk: t.Disk, Cause: err}
	case err != nil:
		return Installed{}, &Refusal{Err: ErrNotWiped, Disk: t.Disk, Cause: err}
	case bootID == "" || rec.BootID != bootID:
		return Installed{}, &Refusal{Err: ErrResumedRun, Disk: t.Disk,
			Cause: fmt.Errorf("wipe-disk ran in boot %q; this is boot %q", rec.BootID, bootID)}
	case rec.Disk != t.Disk:
		return Installed{}, &Refusal{Err: ErrNotWiped, Disk: t.Disk,
			Cause: fmt.Errorf("wipe-disk wiped %s", rec.Disk)}
	case !rec.Wiped:
		return Installed{}, &Refusal{Err: ErrNotWiped, Disk: t.Disk,
			Cause: errors.New("wipe-disk started and did not finish")}
	}

	log := cfg.logger()
	keep := cfg.installerLines()
	var (
		mu   sync.Mutex
		tail []string
		done bool // Install returned: later lines are ignored
	)
	output := func(line string) {
		line = strings.TrimRight(line, "\r\n")
		line = logStamp.ReplaceAllString(line, "")
		if t.Code != "" {
			line = strings.ReplaceAll(line, t.Code, "<install code>")
		}
		line = strings.ToValidUTF8(line, "?")
		if strings.TrimSpace(line) == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		log.Debug("disksafe: installer", "line", line)
		if len(tail) == keep {
			copy(tail, tail[1:])
			tail = tail[:keep-1]
		}
		tail = append(tail, line)
	}
	err = inst.Install(ctx, t.Disk, output)
	mu.Lock()
	done = true
	lines := tail
	mu.Unlock()
	if err != nil {
		if len(lines) == 0 {
			// An installer that printed nothing: its error is its output.
			l := err.Error()
			if t.Code != "" {
				l = strings.ReplaceAll(l, t.Code, "<install code>")
			}
			lines = []string{oneLine(l, 300)}
		}
		return Installed{}, &InstallerError{Lines: lines, Err: err}
	}
	return Installed{Disk: t.Disk}, nil
}
