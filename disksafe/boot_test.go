package disksafe

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
	"github.com/google/go-cmp/cmp"
)

func TestBootRecordRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "fleet")
	if err := WriteBootRecord(dir, BootRecord{Attested: true, Code: testCode}); err == nil {
		t.Fatal("a record without a boot ID was written")
	}
	want := BootRecord{BootID: disksafetest.BootID, Attested: true, Code: testCode, Time: time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)}
	if err := WriteBootRecord(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadBootRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadBootRecord (-want +got):\n%s", diff)
	}
	for p, want := range map[string]fs.FileMode{filepath.Join(dir, BootRecordFile): 0o600, dir: 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}

	// A second write replaces the first, and leaves no temporary file.
	want2 := BootRecord{BootID: disksafetest.BootID, Attested: false}
	if err := WriteBootRecord(dir, want2); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadBootRecord(dir); err != nil || !cmp.Equal(got, want2) {
		t.Errorf("after rewrite: %+v, %v", got, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d files, want 1", len(ents))
	}
	b, _ := os.ReadFile(filepath.Join(dir, BootRecordFile))
	if want := `{"boot_id":"` + disksafetest.BootID + `","attested":false}` + "\n"; string(b) != want {
		t.Errorf("file = %q, want %q", b, want)
	}
}

func TestReadBootRecordErrors(t *testing.T) {
	tests := []struct {
		name, content string
	}{
		{"malformed", `{"boot_id": "x", "attested": tru`},
		{"wrong type", `{"boot_id": "x", "attested": "yes", "install_code": "` + testCode + `"}`},
		{"unknown field", `{"boot_id": "x", "attested": true, "extra": 1}`},
		{"two objects", `{"boot_id": "x"} {"boot_id": "y"}`},
		{"not an object", `["` + testCode + `"]`},
		{"too large", `{"boot_id": "` + strings.Repeat("x", maxRecord) + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, BootRecordFile), []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := ReadBootRecord(dir)
			if err == nil {
				t.Fatalf("ReadBootRecord = %+v, want an error", r)
			}
			if strings.Contains(err.Error(), testCode) {
				t.Errorf("the error shows the install code: %v", err)
			}
			if errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a bad record reads as a missing one: %v", err)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		if _, err := ReadBootRecord(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("ReadBootRecord of an empty directory = %v, want fs.ErrNotExist", err)
		}
	})
}

func TestBootID(t *testing.T) {
	tr := disksafetest.NewTree()
	if id, err := BootID(&Config{Root: tr.FS}); err != nil || id != disksafetest.BootID {
		t.Fatalf("BootID = %q, %v", id, err)
	}
	for _, bad := range []string{"", "\n", "not-a-uuid", strings.ToUpper(disksafetest.BootID), disksafetest.BootID + "0", "6f1d3c52-8a0e-4c1b-9d7e_2b5a4f6e8c90"} {
		tr.File("proc/sys/kernel/random/boot_id", bad)
		if id, err := BootID(&Config{Root: tr.FS}); err == nil {
			t.Errorf("BootID of %q = %q, want an error", bad, id)
		}
	}
	delete(tr.FS, "proc/sys/kernel/random/boot_id")
	if _, err := BootID(&Config{Root: tr.FS}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("BootID without the file = %v", err)
	}
}
