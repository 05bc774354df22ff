package imagetest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/imagetest/standin"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/testproc"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultTag is the tag Build gives an image when its Config names none:
// the tag of every image fleet's Templates name.
const DefaultTag = "v1"

// defaultPath is the environment's PATH in every image: a Debian-like
// base's, and ko's /ko-app, where the program lies.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/ko-app"

// pushTimeout bounds the push of one image to the loopback registry.
const pushTimeout = 2 * time.Minute

// Config holds the optional settings of Build. A nil *Config means every
// default. It must not change while Build runs.
type Config struct {
	// Path is where the program lies in the image, and the image's
	// entrypoint. "": /ko-app/<program>, where ko puts it, <program> being
	// the last element of the package's directory.
	Path string
	// Programs are programs of this machine (absolute paths) copied into
	// the image, each at its own path, with the shared libraries ldd says
	// it loads: what a base image would give the program, such as the
	// docker CLI (/usr/bin/docker) that fleet's wipe-disk and install run.
	// nil: none.
	Programs []string
	// Env is added to the image's environment, after its PATH (which
	// holds /usr/local/bin, /usr/bin, /bin and /ko-app) and ko's
	// KO_DATA_PATH. nil: nothing more.
	Env []string
	// Tag is the image's tag. "": DefaultTag.
	Tag string
}

// Build builds the Go main package in dir (relative to the repository
// root, such as "examples/wipe-disk") with CGO_ENABLED=0 for Linux on this
// machine's architecture, puts the binary, with cfg's Programs, in a
// single-layer OCI image whose entrypoint it is, pushes the image to r as
// repo (such as "fleet/wipe-disk"), and returns its reference,
// <host>/<repo>:<tag>. It logs how long the build and the push took.
//
// Build ends t as testenv.Unavailable does when the go command is missing,
// and fails t when the package does not build or the push fails.
func Build(t testing.TB, r *Registry, dir, repo string, cfg *Config) string {
	t.Helper()
	if cfg == nil {
		cfg = &Config{}
	}
	if _, err := exec.LookPath("go"); err != nil {
		testenv.Unavailable(t, "needs the go command on PATH to build %s", dir)
	}
	tag := cfg.Tag
	if tag == "" {
		tag = DefaultTag
	}
	ref := r.Ref(repo, tag)
	prog := path.Base(filepath.ToSlash(dir))
	entry := cfg.Path
	if entry == "" {
		entry = "/ko-app/" + prog
	}
	ctx, cancel := context.WithTimeout(context.Background(), pushTimeout+5*time.Minute)
	defer cancel()

	t0 := time.Now()
	bin := filepath.Join(t.TempDir(), prog)
	// For Linux on this architecture, as .ko.yaml builds fleet's images.
	if err := testproc.GoBuild(ctx, ".", bin, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH}, "-trimpath", "./"+filepath.ToSlash(dir)); err != nil {
		t.Fatalf("imagetest: %v", err)
	}
	built := time.Since(t0)

	t1 := time.Now()
	files := []file{{path: entry, source: bin}}
	for _, p := range cfg.Programs {
		paths, err := WithLibraries(ctx, p)
		if err != nil {
			t.Fatalf("imagetest: %s for %s: %v", p, ref, err)
		}
		for _, f := range paths {
			files = append(files, file{path: f, source: f})
		}
	}
	img, size, err := image(files, entry, cfg.Env)
	if err != nil {
		t.Fatalf("imagetest: %s: %v", ref, err)
	}
	if err := push(ctx, ref, img); err != nil {
		t.Fatalf("imagetest: push %s: %v", ref, err)
	}
	t.Logf("imagetest: %s: go build %v, layer and push %v (%.1f MB in one layer, entrypoint %s)",
		ref, testproc.Round(built), testproc.Round(time.Since(t1)), float64(size)/1e6, entry)
	return ref
}

// Action builds fleet's action name (wipe-disk, install or next-boot) from
// examples/<name> as Build does, into fleet/<name>:v1 of r, as fleet's
// Templates name it in their placeholder registry: the binary at
// /ko-app/<name>, where ko puts it, with what .ko.yaml's base image gives
// it (the docker CLI for wipe-disk and install, efibootmgr for next-boot),
// copied from this machine. It ends t, with the Debian package to install,
// when that program is missing.
func Action(t testing.TB, r *Registry, name string) string {
	t.Helper()
	var programs []string
	switch name {
	case "wipe-disk", "install":
		programs = []string{testenv.Command(t, "docker", "docker.io")}
	case "next-boot":
		programs = []string{testenv.Command(t, "efibootmgr", "efibootmgr")}
	default:
		t.Fatalf("imagetest: fleet has no action %q (wipe-disk, install, next-boot)", name)
	}
	return Build(t, r, "examples/"+name, "fleet/"+name, &Config{Programs: programs})
}

// InstallerRepo is the repository of the stand-in installer image in a
// Registry, named after Talos's own (ghcr.io/siderolabs/installer).
const InstallerRepo = "siderolabs/installer"

// Installer builds the stand-in for Talos's installer image and pushes it
// to r as siderolabs/installer:<standin.Version>, and returns its
// reference. Talos's own image cannot be pulled here. The stand-in holds
// one program, internal/imagetest/standin/installer, at /bin/installer,
// where fleet's install action runs the real one (docker run --entrypoint
// /bin/installer IMAGE install --disk DISK --platform metal); it writes the
// layout of package standin to the disk, marked with this reference, and
// installs no Talos that boots.
func Installer(t testing.TB, r *Registry) string {
	t.Helper()
	return installer(t, r, standin.Version)
}

// installer builds the stand-in installer tagged tag, with env more in its
// config.
func installer(t testing.TB, r *Registry, tag string, env ...string) string {
	t.Helper()
	return Build(t, r, "internal/imagetest/standin/installer", InstallerRepo, &Config{
		Path: "/bin/installer",
		Tag:  tag,
		Env:  append([]string{"STANDIN_IMAGE=" + r.Ref(InstallerRepo, tag)}, env...),
	})
}

// SlowInstallerTag is the tag of the stand-in installer that takes its
// time writing (SlowInstaller), in InstallerRepo.
const SlowInstallerTag = standin.Version + "-slow"

// SlowInstaller builds the stand-in installer as Installer does, tagged
// SlowInstallerTag, with STANDIN_WRITE_TIME=10m in its config: once it has
// written the partition table it takes 10 minutes writing the rest, unless
// it is stopped (it dies of SIGTERM, as Talos's installer does), so that a
// test can stop the machine, or restart its agent, while the installer
// writes, as the runbook's rows for a run resumed after wipe-disk and for
// an installer that met a disk it had started writing describe.
func SlowInstaller(t testing.TB, r *Registry) string {
	t.Helper()
	return installer(t, r, SlowInstallerTag, "STANDIN_WRITE_TIME=10m")
}

// WaitDaemonRepo and WaitDaemonTag name the stand-in for Tinkerbell's
// waitdaemon image in a Registry, as fleet's fleet-provision Template names
// the real one (ghcr.io/jacobweinstock/waitdaemon:0.2.0) but for the host.
const (
	WaitDaemonRepo = "jacobweinstock/waitdaemon"
	WaitDaemonTag  = "0.2.0"
)

// WaitDaemon builds the stand-in for Tinkerbell's waitdaemon image, which
// fleet's fleet-provision Template runs as its reboot action, and pushes it
// to r as WaitDaemonRepo:WaitDaemonTag, and returns its reference. The
// real image cannot be pulled here, and would reboot the test's host: it
// runs reboot in the host's PID namespace. The stand-in,
// internal/imagetest/standin/waitdaemon at /waitdaemon, its entrypoint,
// says what it would run and exits 0, so the action is reported done as
// the real one's is; rebooting the machine is the test's.
func WaitDaemon(t testing.TB, r *Registry) string {
	t.Helper()
	return Build(t, r, "internal/imagetest/standin/waitdaemon", WaitDaemonRepo, &Config{
		Path: "/waitdaemon",
		Tag:  WaitDaemonTag,
	})
}

// file is a regular file of an image: its path in the image and where its
// bytes are read from.
type file struct {
	path   string
	source string
}

// WithLibraries returns program, an absolute path, and the shared
// libraries ldd says it loads, each at its own path (which may be a
// symbolic link): what an image or an initramfs holds of it.
func WithLibraries(ctx context.Context, program string) ([]string, error) {
	if !filepath.IsAbs(program) {
		return nil, fmt.Errorf("not an absolute path")
	}
	files := []string{program}
	ldd, err := exec.LookPath("ldd")
	if err != nil {
		return nil, fmt.Errorf("needs ldd (Debian's libc-bin) to find its libraries: %w", err)
	}
	out, err := exec.CommandContext(ctx, ldd, program).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return files, nil
		}
		return nil, fmt.Errorf("ldd: %w: %s", err, out)
	}
	return append(files, libraries(string(out))...), nil
}

// libraries returns the absolute paths of ldd's output, in order:
// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" names the one
// after "=>", "/lib64/ld-linux-x86-64.so.2 (0x...)" its first word. The
// vDSO, which no file holds, has neither.
func libraries(ldd string) []string {
	var libs []string
	for line := range strings.Lines(ldd) {
		f := strings.Fields(line)
		var p string
		if i := slices.Index(f, "=>"); i >= 0 && i+1 < len(f) {
			p = f[i+1]
		} else if len(f) > 0 {
			p = f[0]
		}
		if strings.HasPrefix(p, "/") && !slices.Contains(libs, p) {
			libs = append(libs, p)
		}
	}
	return libs
}

// image returns an OCI image of one uncompressed layer holding files (mode
// 0755, owned by root, their parent directories 0755), whose entrypoint is
// entry, for Linux on this architecture, and the layer's uncompressed
// size.
func image(files []file, entry string, env []string) (v1.Image, int, error) {
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	dirs := map[string]bool{}
	for _, f := range files {
		name := strings.TrimPrefix(path.Clean(f.path), "/")
		var parents []string
		for d := path.Dir(name); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, Format: tar.FormatPAX}); err != nil {
				return nil, 0, err
			}
		}
		data, err := os.ReadFile(f.source)
		if err != nil {
			return nil, 0, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(data)), Format: tar.FormatPAX}); err != nil {
			return nil, 0, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, 0, err
	}
	raw := layerTar.Bytes()
	layer := static.NewLayer(raw, types.OCIUncompressedLayer)
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err := mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config: v1.Config{
			Entrypoint: []string{entry},
			Env:        append([]string{defaultPath, "KO_DATA_PATH=/var/run/ko"}, env...),
			WorkingDir: "/",
		},
	})
	if err != nil {
		return nil, 0, err
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, 0, err
	}
	return img, len(raw), nil
}

// push writes img to the registry as ref, over plain HTTP.
func push(ctx context.Context, ref string, img v1.Image) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	return remote.Write(r, img, remote.WithContext(ctx))
}
