package main

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync"

	"github.com/fleetkit/fleet/examples/internal/action"
)

// defaultInstallerLines is how many of the installer's last output lines a
// failed install repeats.
const defaultInstallerLines = 20

// installer runs the Talos installer onto a disk. It calls output once per
// line the installer prints (stdout and stderr alike, without the line
// end), possibly from several goroutines, and returns nil only when the
// installer succeeded.
type installer interface {
	Install(ctx context.Context, disk string, output func(line string)) error
}

// errInstallerFailed: the installer ran and failed.
var errInstallerFailed = errors.New("install: the installer failed; the lines above are its last output")

// installerError is the error of an installer that ran and failed. Its text
// is the installer's last lines, each prefixed "install: ", and then the
// line "install: the installer failed; the lines above are its last
// output". errors.Is finds errInstallerFailed and err.
type installerError struct {
	// lines are the installer's last non-blank output lines, oldest
	// first, with a leading Go log timestamp removed and the install code
	// replaced by "<install code>".
	lines []string
	// err is what the installer returned. Its text is not part of Error;
	// it may hold what the installer was given.
	err error
}

func (e *installerError) Error() string {
	var b strings.Builder
	for _, l := range e.lines {
		b.WriteString("install: ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString(errInstallerFailed.Error())
	return b.String()
}

func (e *installerError) Unwrap() []error { return []error{errInstallerFailed, e.err} }

// logStamp is the timestamp Go's log package puts before each line (the
// Talos installer logs that way).
var logStamp = regexp.MustCompile(`^[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)? `)

// runInstaller runs inst onto disk, and keeps its last keep lines of output
// for the *installerError of a failure. Each line goes to log at debug
// level, and into the error, with code replaced by "<install code>"; lines
// that come after inst returned are ignored.
func runInstaller(ctx context.Context, inst installer, disk, code string, keep int, log *slog.Logger) error {
	var (
		mu   sync.Mutex
		tail []string
		done bool // inst returned: later lines are ignored
	)
	hide := func(s string) string {
		if code == "" {
			return s
		}
		return strings.ReplaceAll(s, code, "<install code>")
	}
	output := func(line string) {
		line = strings.TrimRight(line, "\r\n")
		line = logStamp.ReplaceAllString(line, "")
		line = strings.ToValidUTF8(hide(line), "?")
		if strings.TrimSpace(line) == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		log.Debug("installer", "line", line)
		if len(tail) == keep {
			copy(tail, tail[1:])
			tail = tail[:keep-1]
		}
		tail = append(tail, line)
	}
	err := inst.Install(ctx, disk, output)
	mu.Lock()
	done = true
	lines := tail
	mu.Unlock()
	if err == nil {
		return nil
	}
	if len(lines) == 0 {
		// An installer that printed nothing: its error is its output.
		lines = []string{action.OneLine(hide(err.Error()), 300)}
	}
	return &installerError{lines: lines, err: err}
}
