package wholemachine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetkit/fleet/internal/kubetest"
)

// The test binary also plays the machine's helpers, by the name it is run
// under (a link to it): the docker CLI and efibootmgr the actions run, and
// machine-enter, which sets up a program's view of the machine. Otherwise
// it runs the tests against a real kube-apiserver and etcd, which Run stops
// when they end.
func TestMain(m *testing.M) {
	if role, ok := roles[filepath.Base(os.Args[0])]; ok {
		os.Exit(role(os.Args[1:]))
	}
	os.Exit(kubetest.Run(m))
}

// roles are the helpers the test binary plays, by program name.
var roles = map[string]func(args []string) int{
	"docker":        dockerMain,
	"efibootmgr":    efibootmgrMain,
	"machine-enter": enterMain,
}
