package deptest

import (
	"slices"
	"testing"
)

func TestDepsListsTransitiveImports(t *testing.T) {
	deps, err := Deps("github.com/fleetkit/fleet/internal/deptest")
	if err != nil {
		t.Fatal(err)
	}
	// os/exec is imported directly, internal/syscall/execenv through os/exec.
	for _, want := range []string{"os/exec", "internal/syscall/execenv", "github.com/fleetkit/fleet/internal/deptest"} {
		if !slices.Contains(deps, want) {
			t.Errorf("Deps misses %s", want)
		}
	}
}

func TestViolations(t *testing.T) {
	deps := []string{"net", "net/http", "network/x", "k8s.io/api/core/v1", "strings"}
	got := Violations(deps, []string{"net", "k8s.io/"})
	want := []string{"net", "net/http", "k8s.io/api/core/v1"}
	if !slices.Equal(got, want) {
		t.Errorf("Violations = %q, want %q", got, want)
	}
}

func TestDepsUnknownPackage(t *testing.T) {
	if _, err := Deps("github.com/fleetkit/fleet/no/such/package"); err == nil {
		t.Fatal("Deps of a missing package gave no error")
	}
}

func TestLeafBanned(t *testing.T) {
	got := leafBanned("github.com/fleetkit/fleet/attest/attesttest", []string{"golang.org/x/crypto"})
	for _, want := range []string{"k8s.io", "github.com/netbox-community", "golang.org/x/crypto",
		"github.com/fleetkit/fleet/inventory", "github.com/fleetkit/fleet/provision"} {
		if !slices.Contains(got, want) {
			t.Errorf("leafBanned misses %s", want)
		}
	}
	if slices.Contains(got, "github.com/fleetkit/fleet/attest") {
		t.Error("leafBanned bans attesttest's own package, attest")
	}
}
