package wholemachine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetkit/fleet/internal/kubetest"
)

// The test binary also plays machine-enter, which sets up a program's view
// of the machine, when it runs under that name (a link to it). Otherwise
// it runs the tests against a real kube-apiserver and etcd, which Run
// stops when they end.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == enterName {
		os.Exit(enterMain(os.Args[1:]))
	}
	os.Exit(kubetest.Run(m))
}
