package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
)

// scriptedInstaller prints lines, from two goroutines as stdout and stderr
// would, and returns err.
type scriptedInstaller struct {
	stdout, stderr []string
	err            error
}

func (s *scriptedInstaller) Install(ctx context.Context, disk string, output func(string)) error {
	var wg sync.WaitGroup
	for _, lines := range [][]string{s.stdout, s.stderr} {
		wg.Go(func() {
			for _, l := range lines {
				output(l)
			}
		})
	}
	wg.Wait()
	return s.err
}

var quiet = slog.New(slog.DiscardHandler)

func TestRunInstallerFails(t *testing.T) {
	var out []string
	for i := range 30 {
		out = append(out, fmt.Sprintf("2026/12/01 09:30:%02d step %d", i, i))
	}
	out = append(out,
		"",
		"   ",
		"2026/12/01 09:31:00 fetching https://fleet.example/config?code="+code+"\r",
		"2026/12/01 09:31:01.123456 failed to perform disk operations: disk /dev/sda is not empty, skipping install",
	)
	for _, tt := range []struct {
		inst *scriptedInstaller
		keep int
		want []string // the error's lines before the runbook's
	}{
		{&scriptedInstaller{stdout: out, err: errors.New("exit status 1 (talos.config=https://fleet.example/config?code=" + code + ")")}, 4, []string{
			"install: step 28",
			"install: step 29",
			"install: fetching https://fleet.example/config?code=<install code>",
			"install: failed to perform disk operations: disk /dev/sda is not empty, skipping install",
		}},
		// An installer that printed nothing: its own error is its output.
		{&scriptedInstaller{err: errors.New("docker: image not found, code " + code)}, defaultInstallerLines, []string{"install: docker: image not found, code <install code>"}},
	} {
		err := runInstaller(t.Context(), tt.inst, "/dev/sda", code, tt.keep, quiet)
		var ie *installerError
		if !errors.As(err, &ie) || !errors.Is(err, errInstallerFailed) || !errors.Is(err, tt.inst.err) {
			t.Fatalf("runInstaller = %v, want an *installerError", err)
		}
		if want := strings.Join(append(tt.want, "install: the installer failed; the lines above are its last output"), "\n"); err.Error() != want {
			t.Errorf("runInstaller error:\n%s\nwant:\n%s", err, want)
		}
	}
}

func TestRunInstallerConcurrentOutput(t *testing.T) {
	var a, b []string
	for i := range 500 {
		a = append(a, fmt.Sprintf("out %d", i))
		b = append(b, fmt.Sprintf("err %d", i))
	}
	inst := &scriptedInstaller{stdout: a, stderr: b, err: errors.New("exit status 1")}
	err := runInstaller(t.Context(), inst, "/dev/sda", "", defaultInstallerLines, quiet)
	var ie *installerError
	if !errors.As(err, &ie) || len(ie.lines) != defaultInstallerLines {
		t.Fatalf("runInstaller = %v; want %d lines", err, defaultInstallerLines)
	}
}

// lateInstaller keeps printing after it returned, as a leaked reader of a
// killed installer's pipe might.
type lateInstaller struct{ late chan func(string) }

func (l *lateInstaller) Install(ctx context.Context, disk string, output func(string)) error {
	output("before")
	l.late <- output
	return errors.New("exit status 1")
}

func TestRunInstallerIgnoresLateOutput(t *testing.T) {
	inst := &lateInstaller{late: make(chan func(string), 1)}
	err := runInstaller(t.Context(), inst, "/dev/sda", "", defaultInstallerLines, quiet)
	output := <-inst.late
	var wg sync.WaitGroup
	wg.Go(func() { output("after") })
	wg.Wait()
	var ie *installerError
	if !errors.As(err, &ie) || !slices.Equal(ie.lines, []string{"before"}) {
		t.Fatalf("runInstaller = %v", err)
	}
}
