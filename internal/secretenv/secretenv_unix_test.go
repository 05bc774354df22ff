//go:build unix

package secretenv

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A named pipe is refused without being opened, which would block.
func TestLookupNamedPipe(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := Lookup(env(map[string]string{"NETBOX_TOKEN_FILE": p}), "NETBOX_TOKEN")
	if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a named pipe") {
		t.Errorf("a named pipe: %v, want ErrNotRegular", err)
	}
}
