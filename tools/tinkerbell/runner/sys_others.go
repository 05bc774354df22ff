//go:build !linux

package main

import (
	"errors"
	"runtime"
	"syscall"
)

var errNotLinux = errors.New("not implemented on " + runtime.GOOS + ": the runner runs in a Linux machine")

func bindMount(host, target string) error         { return errNotLinux }
func bindInto(host, target string, ro bool) error { return errNotLinux }
func unmount(target string) error                 { return errNotLinux }
func chrootAttr(root string) *syscall.SysProcAttr { return nil }
func reboot() error                               { return errNotLinux }
