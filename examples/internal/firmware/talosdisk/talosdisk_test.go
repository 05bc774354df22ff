package talosdisk_test

import (
	"bytes"
	"errors"
	"io"
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetkit/fleet/examples/internal/firmware/talosdisk"
	"github.com/fleetkit/fleet/internal/imagetest/standin"
	"github.com/siderolabs/talos/pkg/machinery/meta"
)

// An empty disk holds no install; after standin's Install and WriteESP,
// Read finds META's values and the EFI partition, which holds the image
// written over it; an image larger than the partition is refused.
func TestWriteAndRead(t *testing.T) {
	const size = 64 << 20
	f, err := os.Create(filepath.Join(t.TempDir(), "disk"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if _, err := talosdisk.Read(f, size); !errors.Is(err, talosdisk.ErrNoInstall) {
		t.Fatalf("Read of an empty disk: %v, want ErrNoInstall", err)
	}
	if err := talosdisk.WriteESP(f, f, size, []byte("x")); !errors.Is(err, talosdisk.ErrNoInstall) {
		t.Fatalf("WriteESP to an empty disk: %v, want ErrNoInstall", err)
	}
	values := meta.Values{{Key: meta.DownloadURLCode, Value: "code-1"}}
	if err := standin.Install(f, size, "registry.example/installer:v1", values, log.New(io.Discard, "", 0)); err != nil {
		t.Fatal(err)
	}
	esp := bytes.Repeat([]byte("FAT!"), 1024)
	if err := talosdisk.WriteESP(f, f, size, esp); err != nil {
		t.Fatal(err)
	}
	d, err := talosdisk.Read(f, size)
	if err != nil {
		t.Fatal(err)
	}
	if d.Meta[0x0b] != "code-1" || len(d.Meta) != 1 || d.ESP.Index != 1 || d.ESP.FirstLBA != 2048 {
		t.Errorf("Read: %+v", d)
	}
	got := make([]byte, len(esp))
	if _, err := f.ReadAt(got, d.ESP.FirstLBA*512); err != nil || !bytes.Equal(got, esp) {
		t.Errorf("the EFI partition does not begin with the image (%v)", err)
	}
	big := make([]byte, (d.ESP.LastLBA-d.ESP.FirstLBA+2)*512)
	if err := talosdisk.WriteESP(f, f, size, big); err == nil {
		t.Error("WriteESP wrote an image larger than the partition")
	}
}
