// Command testaction is a Tinkerbell action for tests of the chain from
// Tinkerbell's agent to a machine's dockerd: it does one small, visible
// thing, chosen by its arguments (a Template action's command):
//
//	testaction write PATH     writes $MESSAGE and a line end to PATH
//	                          (a file of a bound volume) and exits 0
//	testaction run PROG ARG…  executes PROG, found in PATH, with the ARGs:
//	                          a program the image holds besides this one,
//	                          such as the docker CLI
//
// Each prints what it does on standard output, which the agent logs.
// Anything else exits 2.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	switch {
	case len(args) == 2 && args[0] == "write":
		if err := os.WriteFile(args[1], []byte(os.Getenv("MESSAGE")+"\n"), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "testaction: %v\n", err)
			return 1
		}
		fmt.Printf("testaction: wrote %q to %s\n", os.Getenv("MESSAGE"), args[1])
		return 0
	case len(args) >= 2 && args[0] == "run":
		prog, err := exec.LookPath(args[1])
		if err != nil {
			fmt.Fprintf(os.Stderr, "testaction: %v\n", err)
			return 127
		}
		fmt.Printf("testaction: running %q\n", args[1:])
		err = syscall.Exec(prog, args[1:], os.Environ())
		fmt.Fprintf(os.Stderr, "testaction: exec %s: %v\n", prog, err)
		return 126
	}
	fmt.Fprintf(os.Stderr, "usage: testaction write PATH | run PROG [ARG...]; got %q\n", args)
	return 2
}
