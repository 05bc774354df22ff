package firmware

import (
	"os"
	"testing"

	"github.com/fleetkit/fleet/internal/kubetest"
)

// TestMain runs the tests against a real kube-apiserver and etcd, which
// Run stops when they end.
func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m))
}
