package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// defaultPullCommand pulls through the host's Docker daemon, whose image
// cache the install action's container starts from.
const defaultPullCommand = "docker pull"

// commandPuller pulls an image by running a command with the image as its
// last argument. It implements disksafe.Puller.
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
