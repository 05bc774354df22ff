package firmware

import (
	"testing"

	"github.com/fleetkit/fleet/examples/internal/machinetest"
)

// build builds the programs the test runs: fleetd, as a user deploys it,
// and, static (the initramfs holds no C library), hookos-attest,
// guestinit, fleet's actions (wipe-disk, install, next-boot), the stand-in
// installer, and the runner (tools/tinkerbell/runner, a module of its own),
// into a directory removed when t ends.
func build(t *testing.T) machinetest.Binaries {
	t.Helper()
	static := []string{"CGO_ENABLED=0"}
	return machinetest.BuildAll(t,
		machinetest.Build{Module: ".", Args: []string{"./examples/fleetd"}},
		machinetest.Build{Module: ".", Env: static, Args: []string{"-trimpath", "-ldflags=-s -w", "./examples/hookos-attest", "./examples/internal/firmware/guestinit",
			"./examples/wipe-disk", "./examples/install", "./examples/next-boot", "./internal/imagetest/standin/installer"}},
		machinetest.Build{Module: "tools/tinkerbell", Env: static, Args: []string{"-trimpath", "-ldflags=-s -w", "./runner"}},
	)
}
