package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/tinkerbell/tinkerbell/pkg/proto"
	"golang.org/x/sys/unix"
)

// TestMain runs the test binary as the runner's shim when the code under
// test runs /proc/self/exe as its shim, and as the action of
// TestIntegrationVolumes when the action's environment names it.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == shimArg {
		os.Exit(shimMain(os.Args[2:], os.Stderr))
	}
	if os.Getenv(testActionEnv) == "1" {
		os.Exit(testAction(os.Getenv("RO"), os.Getenv("RW")))
	}
	os.Exit(m.Run())
}

// testActionEnv, set to 1 in an action's environment, makes the test
// binary the action of TestIntegrationVolumes.
const testActionEnv = "FLEET_RUNNER_TEST_ACTION"

// testAction is an action that writes into its read-only volume ro (and a
// mount under it) and its writable volume rw, and mounts a tmpfs of its
// own under rw. It records in rw/result what each write did: "EROFS", or
// "ok".
func testAction(ro, rw string) int {
	outcome := func(err error) string {
		switch {
		case err == nil:
			return "ok"
		case errors.Is(err, syscall.EROFS):
			return "EROFS"
		}
		return err.Error()
	}
	own := filepath.Join(rw, "own")
	err := os.Mkdir(own, 0o755)
	if err == nil {
		err = unix.Mount("tmpfs", own, "tmpfs", 0, "size=1m")
	}
	result := fmt.Sprintf("ro: %s\nro/sub: %s\nown mount: %s\n",
		outcome(os.WriteFile(filepath.Join(ro, "file"), []byte("changed\n"), 0o644)),
		outcome(os.WriteFile(filepath.Join(ro, "sub", "file"), []byte("changed\n"), 0o644)),
		outcome(err))
	if err := os.WriteFile(filepath.Join(rw, "result"), []byte(result), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print("test action: done\n")
	return 0
}

// An action runs in a mount namespace of its own with its volumes bound:
// a write into a ":ro" volume, or into a mount under it, fails with EROFS
// and leaves the host's file as it was; a write into a writable volume
// lands on the host; and neither the binds nor a mount the action makes
// reach the runner's namespace, whose own mounts stay as they were.
func TestIntegrationVolumes(t *testing.T) {
	if os.Geteuid() != 0 {
		unavailable(t, "needs root: mount namespaces and bind mounts (run go test as root)")
	}
	dir := t.TempDir()
	// dir a shared mount, as systemd makes /: without private mounts in
	// the action's namespace, its binds would propagate here.
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s on itself: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("make %s shared: %v", dir, err)
	}
	hostRO, hostRW := filepath.Join(dir, "host-ro"), filepath.Join(dir, "host-rw")
	ctrRO, ctrRW := filepath.Join(dir, "ctr", "ro"), filepath.Join(dir, "ctr", "rw")
	sub := filepath.Join(hostRO, "sub")
	for _, d := range []string{sub, hostRW} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(hostRO, "file"), "original\n")
	// A mount under the read-only volume, as efivarfs is under /sys.
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", sub, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(sub, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", sub, err)
		}
	})
	write(t, filepath.Join(sub, "file"), "original\n")
	before := mountsUnder(t, dir)

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := &runner{images: map[string]string{"fleet/test-action:v1": exe}, out: &out}
	image, timeout := "fleet/test-action:v1", int64(60)
	a := &proto.ActionResponse{
		Image:       &image,
		Timeout:     &timeout,
		Environment: []string{testActionEnv + "=1", "RO=" + ctrRO, "RW=" + ctrRW},
		Volumes:     []string{hostRO + ":" + ctrRO + ":ro", hostRW + ":" + ctrRW, "/var/run/docker.sock:/var/run/docker.sock"},
	}
	if err := r.execute(t.Context(), a); err != nil {
		t.Fatalf("execute: %v; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "test action: done\n") {
		t.Errorf("the action's output is not the runner's: %q", out.String())
	}

	result, err := os.ReadFile(filepath.Join(hostRW, "result"))
	if err != nil {
		t.Fatalf("the write into the writable volume did not land on the host: %v", err)
	}
	if want := "ro: EROFS\nro/sub: EROFS\nown mount: ok\n"; string(result) != want {
		t.Errorf("the action's writes:\n%s\nwant:\n%s", result, want)
	}
	for _, f := range []string{filepath.Join(hostRO, "file"), filepath.Join(sub, "file")} {
		if b, err := os.ReadFile(f); err != nil || string(b) != "original\n" {
			t.Errorf("%s on the host = %q, %v; want it unchanged", f, b, err)
		}
	}
	if after := mountsUnder(t, dir); !slices.Equal(after, before) {
		t.Errorf("the mounts under %s after the action: %q, want %q as before it", dir, after, before)
	}
	// The runner's own mount under the read-only volume is still writable.
	write(t, filepath.Join(sub, "file"), "the host's\n")
}

// unavailable ends t because something it needs is missing: a skip, or a
// failure with FLEET_REQUIRE_INTEGRATION=1 (as fleet's CI runs tests).
func unavailable(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("FLEET_REQUIRE_INTEGRATION") == "1" {
		t.Fatalf("integration test cannot run (FLEET_REQUIRE_INTEGRATION=1): %s", reason)
	}
	t.Skipf("%s (set FLEET_REQUIRE_INTEGRATION=1 to make this a failure)", reason)
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mountsUnder lists the mount points of the test's mount namespace at or
// under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if p := fields[4]; p == dir || strings.HasPrefix(p, dir+"/") {
			mounts = append(mounts, p)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(mounts)
	return mounts
}
