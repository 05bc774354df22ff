package standin_test

import (
	"bytes"
	"errors"
	"io"
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetkit/fleet/disksafe"
	"github.com/fleetkit/fleet/internal/imagetest/standin"
	"github.com/google/go-cmp/cmp"
	"github.com/siderolabs/talos/pkg/machinery/meta"
)

// size is the size of the disks the tests install to.
const size = 64 << 20

// emptyDisk returns a file of size zero bytes, closed when t ends.
func emptyDisk(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "disk"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return f
}

// Install lays out an empty disk as a Talos install that disksafe reads
// (the one EFI system partition next-boot looks for) and Read reads back,
// and refuses the disk once it holds that layout. WriteESP then writes an
// image over the EFI system partition, where ReadLayout finds it with
// META's values, and refuses an image larger than the partition, or a disk
// without the layout.
func TestInstallAndRead(t *testing.T) {
	f := emptyDisk(t)
	if _, ok, err := standin.Read(f, size); ok || err != nil {
		t.Fatalf("Read of an empty disk = %v, %v; want no install", ok, err)
	}
	if err := standin.WriteESP(f, size, []byte("x")); !errors.Is(err, standin.ErrNoLayout) {
		t.Fatalf("WriteESP to an empty disk: %v, want ErrNoLayout", err)
	}
	var logged bytes.Buffer
	values := meta.Values{{Key: meta.DownloadURLCode, Value: "code-1"}}
	const image = "127.0.0.1:5000/siderolabs/installer:v1.13.9"
	if err := standin.Install(f, size, image, values, log.New(&logged, "", 0), nil); err != nil {
		t.Fatalf("Install: %v\n%s", err, logged.String())
	}

	gpt, err := disksafe.ReadGPT(f, size, 512)
	if err != nil {
		t.Fatalf("ReadGPT: %v", err)
	}
	if len(gpt.Partitions) != 4 || gpt.Partitions[0].Type != disksafe.ESPType || gpt.Partitions[0].FirstLBA != 2048 || gpt.Partitions[0].LastLBA != 34815 {
		t.Errorf("partitions = %+v, want an EFI system partition at 2048-34815 and three more", gpt.Partitions)
	}
	if last := gpt.Partitions[3].LastLBA; last != size/512-34 {
		t.Errorf("EPHEMERAL ends at %d, want the last usable sector %d", last, size/512-34)
	}
	backup := make([]byte, 8)
	if _, err := f.ReadAt(backup, size-512); err != nil || string(backup) != "EFI PART" {
		t.Errorf("the last sector begins %q (%v), want the backup header", backup, err)
	}
	got, ok, err := standin.Read(f, size)
	if err != nil || !ok {
		t.Fatalf("Read = %v, %v", ok, err)
	}
	want := standin.Installed{Image: image, Meta: map[uint8]string{meta.DownloadURLCode: "code-1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	if err := standin.Install(f, size, image, values, log.New(io.Discard, "", 0), nil); !errors.Is(err, standin.ErrNotEmpty) {
		t.Errorf("a second Install = %v, want ErrNotEmpty", err)
	}

	esp := bytes.Repeat([]byte("FAT!"), 1024)
	if err := standin.WriteESP(f, size, esp); err != nil {
		t.Fatal(err)
	}
	l, ok, err := standin.ReadLayout(f, size)
	if err != nil || !ok || l.ESP.Index != 1 || l.ESP.FirstLBA != 2048 || !cmp.Equal(l.Meta, want.Meta) {
		t.Errorf("ReadLayout after WriteESP = %+v, %v, %v", l, ok, err)
	}
	b := make([]byte, len(esp))
	if _, err := f.ReadAt(b, l.ESP.FirstLBA*512); err != nil || !bytes.Equal(b, esp) {
		t.Errorf("the EFI partition does not begin with the image (%v)", err)
	}
	big := make([]byte, (l.ESP.LastLBA-l.ESP.FirstLBA+2)*512)
	if err := standin.WriteESP(f, size, big); err == nil {
		t.Error("WriteESP wrote an image larger than the partition")
	}
}

// A disk that holds a partition table is refused as Talos's installer
// refuses it, naming what it holds; Install calls writing between the
// partition table and the marks, so a program stopped there leaves a
// partition table without them.
func TestNotEmptyAndPaced(t *testing.T) {
	f := emptyDisk(t)
	var atWriting bool
	err := standin.Install(f, size, "image", nil, log.New(io.Discard, "", 0), func() {
		gpt, err := disksafe.ReadGPT(f, size, 512)
		_, ok, _ := standin.Read(f, size)
		atWriting = err == nil && len(gpt.Partitions) == 4 && !ok
	})
	if err != nil || !atWriting {
		t.Fatalf("Install = %v; at writing the disk held a partition table without the marks: %v", err, atWriting)
	}
	err = standin.Install(f, size, "image", nil, log.New(io.Discard, "", 0), nil)
	var ne *standin.NotEmptyError
	if !errors.As(err, &ne) || ne.Detected != "gpt" || !errors.Is(err, standin.ErrNotEmpty) {
		t.Errorf("Install on a GPT disk = %v, want a *NotEmptyError detecting gpt", err)
	}
	mbr := make([]byte, 512)
	mbr[510], mbr[511] = 0x55, 0xaa
	if _, err := f.WriteAt(make([]byte, 1024), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(mbr, 0); err != nil {
		t.Fatal(err)
	}
	if err := standin.Install(f, size, "image", nil, log.New(io.Discard, "", 0), nil); !errors.As(err, &ne) || ne.Detected != "dos" {
		t.Errorf("Install on an MBR disk = %v, want a *NotEmptyError detecting dos", err)
	}
}
