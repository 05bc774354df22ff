// Package action is what the Tinkerbell actions of a fleet run (the
// wipe-disk, install and next-boot commands) share: the exit codes, a main
// that ends the action's context on SIGINT and SIGTERM, flag parsing with
// those exit codes, the logger, one-line reasons, and the line that says
// what lies under a disksafe refusal.
//
// An action's run function takes its arguments, environment and output as
// parameters, so that its tests run it in-process; Main hands it the
// process's own.
package action

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fleetkit/fleet/disksafe"
)

// The exit codes of every action.
const (
	ExitOK     = 0 // done
	ExitFailed = 1 // refused, or failed
	ExitUsage  = 2 // a flag, an argument or a setting is wrong; nothing done
)

// Run is an action: it reads its flags from args and its settings through
// getenv, writes to stdout and stderr, stops early when ctx ends, and
// returns its exit code.
type Run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int

// Main runs run with the process's arguments, environment, standard output
// and standard error, and a context that SIGINT or SIGTERM ends, and exits
// with the code run returns.
func Main(run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Flags returns an empty flag set for the action name that writes its
// messages to stderr and returns its errors from Parse.
func Flags(name string, stderr io.Writer) *flag.FlagSet {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	return fl
}

// Parse parses args with fl, which takes no positional arguments. ok is
// true when the action goes on; otherwise exit is its exit code: ExitOK
// after -help, ExitUsage after a wrong flag (which fl has said) or an
// argument ("<name>: unexpected arguments [...]").
func Parse(fl *flag.FlagSet, args []string) (exit int, ok bool) {
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, false
		}
		return ExitUsage, false
	}
	if fl.NArg() != 0 {
		fmt.Fprintf(fl.Output(), "%s: unexpected arguments %q\n", fl.Name(), fl.Args())
		return ExitUsage, false
	}
	return 0, true
}

// Logger returns the action's logger: text lines on w, from info level, or
// from debug level when verbose.
func Logger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// Cause writes, below a refusal's line, what lies under it, "  (<cause>)",
// when err is a *disksafe.Refusal with a Cause and errors.Is finds one of
// sentinels in it: the refusals whose line does not already say why.
func Cause(w io.Writer, err error, sentinels ...error) {
	var r *disksafe.Refusal
	if !errors.As(err, &r) || r.Cause == nil {
		return
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			fmt.Fprintf(w, "  (%v)\n", r.Cause)
			return
		}
	}
}

// OneLine renders an error's text for a "(<reason>)" slot of a line: its
// words, each run of blanks and line ends one blank, cut to max bytes (and
// "..."). A text of blanks alone is "no reason given".
func OneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "no reason given"
	}
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "..."
	}
	return s
}
