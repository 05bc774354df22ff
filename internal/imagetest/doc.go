// Package imagetest builds fleet's Tinkerbell actions as real container
// images and serves them from a registry on loopback, so that a test's
// Tinkerbell agent and dockerd pull and run them as a machine does in
// HookOS.
//
// # What runs
//
// StartRegistry serves go-containerregistry's registry (pkg/registry,
// blobs in memory) from an httptest server on a free port of 127.0.0.1,
// over plain HTTP, and counts the manifests clients fetch from it (Pulls),
// so a test can tell that an image was pulled.
// Hold makes the pulls of a repository wait until the test releases them.
//
// Build runs go build (CGO_ENABLED=0, -trimpath, GOOS=linux) on a main
// package of this repository into a temporary directory, lays the binary
// into one uncompressed layer (application/vnd.oci.image.layer.v1.tar,
// which dockerd pulls like a gzipped one) with no Dockerfile and no base
// image, and pushes the OCI image (pkg/v1/remote) to the registry. The layout is ko's, as
// .ko.yaml builds fleet's images: the binary at /ko-app/<name> and the
// image's entrypoint, PATH holding /ko-app, KO_DATA_PATH set. Fleet's
// Templates name no command for their actions, so the entrypoint is what
// runs; an action's command is passed to it as arguments. Config.Programs
// copies programs of this machine, with the shared libraries ldd names,
// into the same layer: what .ko.yaml's base images would give the binary.
//
// Action builds one of fleet's actions from examples/<name> as
// <host>/fleet/<name>:v1, so a test gives fleetd's image settings
// (FLEET_IMAGE_WIPE_DISK, ...) that name in a registry host it resolves
// to Registry.Host, such as registry.example/fleet/<name>:v1. wipe-disk and install get
// this machine's docker CLI (.ko.yaml's base is docker:28-cli), next-boot
// its efibootmgr.
//
// Installer builds the stand-in for Talos's installer image, which cannot
// be pulled here, as <host>/siderolabs/installer:v1.13.9: one program at
// /bin/installer (internal/imagetest/standin/installer), where fleet's
// install action runs Talos's, that writes package standin's recognisable
// Talos disk layout and installs nothing that boots.
//
// SlowInstaller builds the same stand-in, tagged v1.13.9-slow, that takes
// 10 minutes between writing the partition table and its marks unless it
// is stopped: a test stops the machine or its agent while it writes.
//
// WaitDaemon builds the stand-in for Tinkerbell's waitdaemon image, which
// fleet's fleet-provision Template runs as its reboot action
// (ghcr.io/jacobweinstock/waitdaemon:0.2.0), as
// <host>/jacobweinstock/waitdaemon:0.2.0: one program at /waitdaemon
// (internal/imagetest/standin/waitdaemon) that checks its inputs, says
// what it would run, and exits 0 at once. The real one cannot be pulled
// here, and would reboot the test's host: it runs reboot in alpine in the
// host's PID namespace. Rebooting the machine is the test's.
//
// These two are the only parts of a machine's side that these images
// stand in for.
//
// # Lifetime
//
// The registry serves until the test that started it ends; its images
// live in its memory and go with it. Build's binaries are in the test's
// temporary directory. Nothing is left behind.
//
// # When it cannot run
//
// Build ends the test through internal/testenv when the go command is
// missing (a skip with the reason by hand, a failure with
// FLEET_REQUIRE_INTEGRATION=1), and Action when the program its image
// needs is missing, naming the Debian package (docker.io, efibootmgr). A
// package that does not build or an image that does not push fails the
// test. Neither needs root.
//
// # Cost
//
// With Go's build cache warm, go build of an action takes about 0.5 s (the
// link, mostly). Layering and pushing its image over loopback takes 0.02
// to 0.2 s for the stand-in installer (3.4 MB) and 0.7 to 1.2 s for an
// image with the docker CLI and glibc (about 42 MB of its 45 to 48 MB);
// under -race, where the registry and the push run instrumented, 0.4 s
// and 6 to 9 s (gzipped layers took 14 to 18 s there, so none is). A cold
// build compiles fleet's packages the program imports first: 30 s for the
// stand-in installer (Talos's machinery) on two cores.
//
// go-containerregistry is linked only into this package and the tests
// that use it: no package a user of fleet imports links it (TestDeps).
//
// # Use
//
//	reg := imagetest.StartRegistry(t)
//	wipe := imagetest.Action(t, reg, "wipe-disk")     // 127.0.0.1:PORT/fleet/wipe-disk:v1
//	installer := imagetest.Installer(t, reg)          // 127.0.0.1:PORT/siderolabs/installer:v1.13.9
//	reboot := imagetest.WaitDaemon(t, reg)            // 127.0.0.1:PORT/jacobweinstock/waitdaemon:0.2.0
//	// ... a Template whose actions name wipe; dockerd pulls it ...
//	if reg.Pulls("fleet/wipe-disk") == 0 { ... }
package imagetest
