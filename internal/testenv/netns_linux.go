package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// InNetns runs fn on an OS thread that has entered the network namespace
// ns (a name under /run/netns, as `ip netns add` makes). Sockets fn opens
// stay in that namespace after it returns. If the thread cannot return to
// its namespace, it stays locked and the runtime ends it with its
// goroutine.
func InNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns back from %s: %w", ns, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Within runs fn in the network namespace ns, as InNetns does, and returns
// what fn made; it ends t when fn fails.
func Within[T any](t testing.TB, ns string, fn func() (T, error)) T {
	t.Helper()
	var v T
	err := InNetns(ns, func() (err error) {
		v, err = fn()
		return err
	})
	if err != nil {
		t.Fatalf("in network namespace %s: %v", ns, err)
	}
	return v
}
