package attest_test

import (
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

func TestDeps(t *testing.T) {
	// The server's crypto is the standard library's and go-tpm's; the
	// simulator (cgo) is for tests: attest itself never links it.
	deptest.CheckLeaf(t, "github.com/fleetkit/fleet/attest", "golang.org/x/crypto", "github.com/google/go-tpm-tools")
	deptest.CheckLeaf(t, "github.com/fleetkit/fleet/attest/attesttest", "golang.org/x/crypto")
}
