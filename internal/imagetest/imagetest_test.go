package imagetest

import (
	"archive/tar"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/deptest"
	"github.com/fleetkit/fleet/internal/imagetest/standin"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// go-containerregistry stays out of everything a user of fleet links.
func TestDeps(t *testing.T) {
	for _, pkg := range []string{
		"github.com/fleetkit/fleet/attest",
		"github.com/fleetkit/fleet/configserve",
		"github.com/fleetkit/fleet/disksafe",
		"github.com/fleetkit/fleet/inventory",
		"github.com/fleetkit/fleet/lldpwait",
		"github.com/fleetkit/fleet/provision",
		"github.com/fleetkit/fleet/examples/fleetd",
		"github.com/fleetkit/fleet/examples/fleetctl",
		"github.com/fleetkit/fleet/examples/hookos-attest",
		"github.com/fleetkit/fleet/examples/wipe-disk",
		"github.com/fleetkit/fleet/examples/install",
		"github.com/fleetkit/fleet/examples/next-boot",
	} {
		deptest.Check(t, pkg, []string{"github.com/google/go-containerregistry", "github.com/fleetkit/fleet/internal/imagetest"})
	}
	// The stand-in installer goes into an image: none of the builder.
	deptest.Check(t, "github.com/fleetkit/fleet/internal/imagetest/standin/installer", []string{"github.com/google/go-containerregistry"})
	deptest.Check(t, "github.com/fleetkit/fleet/internal/imagetest/standin/waitdaemon", []string{"github.com/google/go-containerregistry"})
}

// The stand-in installer's image, pulled back from the registry, is one
// layer holding /bin/installer, its entrypoint, with its own reference in
// STANDIN_IMAGE; the registry counts that pull and no push.
func TestInstallerImage(t *testing.T) {
	reg := StartRegistry(t)
	ref := Installer(t, reg)
	if want := reg.Host() + "/siderolabs/installer:" + standin.Version; ref != want {
		t.Errorf("Installer = %q, want %q", ref, want)
	}
	if n := reg.Pulls(InstallerRepo); n != 0 {
		t.Errorf("after the push, Pulls = %d, want 0", n)
	}

	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("media type = %q, %v; want an OCI manifest", mt, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || !slices.Equal(cfg.Config.Entrypoint, []string{"/bin/installer"}) || !slices.Contains(cfg.Config.Env, "STANDIN_IMAGE="+ref) {
		t.Errorf("config = %s/%s entrypoint %q env %q; want linux, /bin/installer, STANDIN_IMAGE=%s", cfg.OS, cfg.Architecture, cfg.Config.Entrypoint, cfg.Config.Env, ref)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "bin/installer" && (h.Mode != 0o755 || h.Size < 1<<20) {
			t.Errorf("bin/installer: mode %o, %d bytes", h.Mode, h.Size)
		}
	}
	if diff := cmp.Diff([]string{"bin/", "bin/installer"}, names); diff != "" {
		t.Errorf("layer (-want +got):\n%s", diff)
	}
	if n := reg.Pulls(InstallerRepo); n != 1 {
		t.Errorf("Pulls = %d, want 1", n)
	}
}

// A held repository's pull waits, counted, until the test releases it;
// the pull then gets the image. The slow stand-in installer is the
// stand-in with STANDIN_WRITE_TIME in its config.
func TestHoldAndSlowInstaller(t *testing.T) {
	reg := StartRegistry(t)
	ref := SlowInstaller(t, reg)
	if want := reg.Host() + "/siderolabs/installer:" + SlowInstallerTag; ref != want {
		t.Errorf("SlowInstaller = %q, want %q", ref, want)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	release := reg.Hold(t, InstallerRepo)
	done := make(chan error, 1)
	var env []string
	go func() {
		img, err := remote.Image(r)
		if err == nil {
			var cfg *v1.ConfigFile
			if cfg, err = img.ConfigFile(); err == nil {
				env = cfg.Config.Env
			}
		}
		done <- err
	}()
	for reg.Pulls(InstallerRepo) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the held pull ended: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the released pull: %v", err)
	}
	if !slices.Contains(env, "STANDIN_WRITE_TIME=10m") || !slices.Contains(env, "STANDIN_IMAGE="+ref) {
		t.Errorf("the slow installer's environment is %q", env)
	}
	release() // again: nothing
}

func TestLibraries(t *testing.T) {
	const ldd = "\tlinux-vdso.so.1 (0x00007ffd4b1f2000)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0a1c400000)\n" +
		"\tlibefivar.so.1 => /lib/x86_64-linux-gnu/libefivar.so.1 (0x00007f0a1c3b0000)\n" +
		"\tlibgone.so.1 => not found\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f0a1c6d4000)\n"
	want := []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libefivar.so.1", "/lib64/ld-linux-x86-64.so.2"}
	if diff := cmp.Diff(want, libraries(ldd)); diff != "" {
		t.Errorf("libraries (-want +got):\n%s", diff)
	}
}
