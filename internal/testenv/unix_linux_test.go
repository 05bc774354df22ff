package testenv

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestUnixListening(t *testing.T) {
	// A test's directory may hold spaces, as its name does.
	dir := filepath.Join(t.TempDir(), "a test")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	if UnixListening(sock) {
		t.Fatal("no socket yet, and UnixListening says one listens")
	}
	// Bound, not listening: the moment a stat of the socket file
	// mistakes for ready.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if UnixListening(sock) {
		t.Error("a socket bound and not listening: UnixListening says it listens")
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Fatal("a dial of a bound socket that does not listen succeeded")
	}
	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	if !UnixListening(sock) {
		t.Error("a listening socket: UnixListening says it does not listen")
	}
	for _, other := range []string{filepath.Join(dir, "other.sock"), "test/s.sock", "s.sock"} {
		if UnixListening(other) {
			t.Errorf("%s: UnixListening says it listens", other)
		}
	}
}
