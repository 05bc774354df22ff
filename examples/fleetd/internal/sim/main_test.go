package sim

import (
	"os"
	"testing"

	"github.com/fleetkit/fleet/internal/kubetest"
)

// The end-to-end tests run fleetd against a real kube-apiserver and etcd
// (internal/kubetest), which Run stops when the tests end.
func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }
