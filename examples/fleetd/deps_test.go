package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

const self = "github.com/fleetkit/fleet/examples/fleetd"

// fleetd links none of the simulated world its demo and tests run in: no
// in-process NetBox, no client-go fakes, no software TPM.
func TestDeps(t *testing.T) {
	deptest.Check(t, self, []string{
		"github.com/fleetkit/fleet/examples/fleetd/internal/sim",
		"github.com/fleetkit/fleet/inventory/netboxtest",
		"github.com/fleetkit/fleet/attest/attesttest",
		"github.com/getkin/kin-openapi",
		"github.com/google/go-tpm-tools",
		"k8s.io/client-go/dynamic/fake",
		"k8s.io/client-go/kubernetes/fake",
		"k8s.io/client-go/discovery/fake",
	})

	// testing and k8s.io/client-go/testing are linked by code fleetd does
	// not own (github.com/containerd/go-cni, through Talos's machinery;
	// client-go's typed clients); none of fleet's packages imports either.
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, self).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", self, err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], "github.com/fleetkit/fleet/") {
			continue
		}
		for _, banned := range []string{"testing", "k8s.io/client-go/testing"} {
			if slices.Contains(f[1:], banned) {
				t.Errorf("%s imports %s, which fleetd must not link", f[0], banned)
			}
		}
	}
}
