package repotest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoot(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || ModulePath(data) != Module {
		t.Errorf("Root() = %s, whose go.mod names %q (%v)", root, ModulePath(data), err)
	}
	t.Chdir(t.TempDir())
	if _, err := Root(); err != ErrNoRoot {
		t.Errorf("Root() outside the repository: %v, want ErrNoRoot", err)
	}
}

func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"// c\nmodule github.com/fleetkit/fleet\n\ngo 1.26\n": "github.com/fleetkit/fleet",
		"module \"example.com/x\" // c\n":                     "example.com/x",
		"go 1.26\n":                                           "",
	} {
		if got := ModulePath([]byte(in)); got != want {
			t.Errorf("ModulePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTail(t *testing.T) {
	if got := Tail("  short\n", 100); got != "short" {
		t.Errorf("Tail of a short text = %q", got)
	}
	long := strings.Repeat("line one\n", 20) + "last line"
	if got := Tail(long, 15); got != "...last line" {
		t.Errorf("Tail(long, 15) = %q, want whole lines", got)
	}
}
