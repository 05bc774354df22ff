// Command waitdaemon is a stand-in for Tinkerbell's waitdaemon action
// (ghcr.io/jacobweinstock/waitdaemon), which fleet's fleet-provision
// Template runs as its last action, reboot: imagetest.WaitDaemon puts it at
// /waitdaemon of an image of its own.
//
// The real waitdaemon reports its action done at once and, WAIT_SECONDS
// later, runs its arguments (reboot) in the image IMAGE (alpine), with the
// action's privileges and, as the Template asks, in the host's PID
// namespace. On a test host that is the host itself, which it would
// reboot; and its image cannot be pulled here. So this stand-in only
// checks its inputs as the real one reads them, says what it would run on
// standard output, and exits 0 at once, so that the agent reports the
// action done as it does for the real one; the test then plays the
// machine's reboot. It exits 1 when IMAGE is unset, WAIT_SECONDS is not a
// number of seconds, or no command is given.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintf(os.Stderr, "waitdaemon: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string) error {
	image := getenv("IMAGE")
	if image == "" {
		return fmt.Errorf("IMAGE is not set")
	}
	wait := 0
	if v := getenv("WAIT_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("WAIT_SECONDS=%q is not a number of seconds", v)
		}
		wait = n
	}
	if len(args) == 0 {
		return fmt.Errorf("no command to run in %s", image)
	}
	fmt.Printf("waitdaemon: a stand-in: would run %q in %s after %d s; the test reboots the machine instead\n", strings.Join(args, " "), image, wait)
	return nil
}
