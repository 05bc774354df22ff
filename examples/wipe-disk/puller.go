package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/fleetkit/fleet/examples/internal/action"
)

// defaultPullCommand pulls through the host's Docker daemon, whose image
// cache the install action's container starts from.
const defaultPullCommand = "docker pull"

// puller pulls a container image into the image cache the run's later
// actions start from, so that the install action finds the installer
// without a registry. Pull returns once the image is in the cache, or with
// the reason it is not.
type puller interface {
	Pull(ctx context.Context, image string) error
}

// errPull: the installer image could not be pulled, so nothing was wiped.
var errPull = errors.New("wipe: the installer image cannot be pulled; nothing wiped")

// pullError is the runbook's line for an image that cannot be pulled:
// "wipe: the installer image <image> cannot be pulled (<reason>); nothing
// wiped". errors.Is finds errPull and the puller's error.
type pullError struct {
	image string
	err   error
}

func (e *pullError) Error() string {
	return "wipe: the installer image " + e.image + " cannot be pulled (" + action.OneLine(e.err.Error(), 300) + "); nothing wiped"
}

func (e *pullError) Unwrap() []error { return []error{errPull, e.err} }

// pull pulls image with p, and returns a *pullError when it cannot, or
// when ctx ended.
func pull(ctx context.Context, p puller, image string) error {
	var err error
	if p == nil {
		err = errors.New("no puller is configured")
	} else {
		err = p.Pull(ctx, image)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return &pullError{image: image, err: err}
	}
	return nil
}

// commandPuller pulls an image by running a command with the image as its
// last argument.
type commandPuller struct {
	argv []string
}

// newCommandPuller splits command on blanks ("" is defaultPullCommand). A
// program that cannot be found is said at pull time, as the reason the
// image cannot be pulled.
func newCommandPuller(command string) *commandPuller {
	if strings.TrimSpace(command) == "" {
		command = defaultPullCommand
	}
	return &commandPuller{argv: strings.Fields(command)}
}

// Pull runs the command. Its error is the command's last line of output
// (where the registry's answer is), or how the command failed.
func (p *commandPuller) Pull(ctx context.Context, image string) error {
	if len(p.argv) == 0 {
		return errors.New("no pull command")
	}
	cmd := exec.CommandContext(ctx, p.argv[0], append(p.argv[1:], image)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", p.argv[0], ctx.Err())
	}
	if last := lastLine(out.String()); last != "" {
		return fmt.Errorf("%s", last)
	}
	return fmt.Errorf("%s: %w", strings.Join(p.argv, " "), err)
}

// lastLine returns the last non-blank line of s, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
