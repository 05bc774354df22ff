package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// shimArg is the hidden first argument with which the runner runs itself
// as the shim of one container (see container).
const shimArg = "container-shim"

// The shim's exit codes when it fails before the program runs, as docker
// run's: the engine failed, the program could not be run, or not found.
const (
	shimFailed     = 125
	shimCannotRun  = 126
	shimNoSuchProg = 127
)

// container returns the command that runs prog with args in a mount
// namespace of its own, with root as its root directory and each of vols
// bound at its container path under root (read-only when ro). The
// command is the runner itself, run again as the shim: in its new
// namespace it makes every mount private, binds the volumes, changes its
// root, and then executes prog in its own place, so that the command's
// process, exit code and signals are prog's. ctx kills it, as
// exec.CommandContext does.
func container(ctx context.Context, root string, vols []volume, prog string, args []string) *exec.Cmd {
	argv := []string{shimArg, root}
	for _, v := range vols {
		argv = append(argv, v.String())
	}
	argv = append(argv, "--", prog)
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, "/proc/self/exe", argv...)
	cmd.SysProcAttr = newMountNamespace()
	cmd.Dir = "/"
	return cmd
}

// shimMain is the shim: its arguments are ROOT VOLUME... -- PROGRAM
// [ARG...], as container writes them. It returns only when it failed.
func shimMain(args []string, stderr io.Writer) int {
	root, vols, argv, err := parseShim(args)
	if err != nil {
		fmt.Fprintf(stderr, "runner: container: %v\n", err)
		return shimFailed
	}
	if err := enterContainer(root, vols); err != nil {
		fmt.Fprintf(stderr, "runner: container: %v\n", err)
		return shimFailed
	}
	// After the root changed: a program named without a slash is looked
	// up in the container's PATH, in its root.
	prog, err := exec.LookPath(argv[0])
	if err == nil {
		err = execProgram(prog, argv, os.Environ())
	}
	fmt.Fprintf(stderr, "runner: container: start %s: %v\n", argv[0], err)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		return shimNoSuchProg
	}
	return shimCannotRun
}

// parseShim reads the shim's arguments.
func parseShim(args []string) (root string, vols []volume, argv []string, err error) {
	sep := slices.Index(args, "--")
	if sep < 1 || sep == len(args)-1 || !filepath.IsAbs(args[0]) {
		return "", nil, nil, fmt.Errorf("usage: %s ROOT VOLUME... -- PROGRAM [ARG...]", shimArg)
	}
	vols, err = parseVolumes(args[1:sep])
	if err != nil {
		return "", nil, nil, err
	}
	return args[0], vols, args[sep+1:], nil
}
