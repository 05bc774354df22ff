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
	inst := &scriptedInstaller{stdout: out, err: errors.New("exit status 1 (talos.config=https://fleet.example/config?code=" + code + ")")}
	err := runInstaller(t.Context(), inst, "/dev/sda", code, 4, quiet)
	var ie *installerError
	if !errors.As(err, &ie) || !errors.Is(err, errInstallerFailed) || !errors.Is(err, inst.err) {
		t.Fatalf("runInstaller = %v, want an *installerError", err)
	}
	want := strings.Join([]string{
		"install: step 28",
		"install: step 29",
		"install: fetching https://fleet.example/config?code=<install code>",
		"install: failed to perform disk operations: disk /dev/sda is not empty, skipping install",
		"install: the installer failed; the lines above are its last output",
	}, "\n")
	if err.Error() != want {
		t.Errorf("runInstaller error:\n%s\nwant:\n%s", err, want)
	}
}

func TestRunInstallerFailsSilently(t *testing.T) {
	inst := &scriptedInstaller{err: errors.New("docker: image not found, code " + code)}
	err := runInstaller(t.Context(), inst, "/dev/sda", code, defaultInstallerLines, quiet)
	want := "install: docker: image not found, code <install code>\ninstall: the installer failed; the lines above are its last output"
	if err == nil || err.Error() != want {
		t.Errorf("runInstaller error:\n%v\nwant:\n%s", err, want)
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
