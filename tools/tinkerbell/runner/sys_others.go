//go:build !linux

package main

import (
	"errors"
	"runtime"
	"syscall"
)

var errNotLinux = errors.New("not implemented on " + runtime.GOOS + ": the runner runs in a Linux machine")

func newMountNamespace() *syscall.SysProcAttr           { return nil }
func enterContainer(root string, vols []volume) error   { return errNotLinux }
func execProgram(prog string, argv, env []string) error { return errNotLinux }
func reboot() error                                     { return errNotLinux }
