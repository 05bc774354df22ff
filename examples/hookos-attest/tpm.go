package main

import (
	"fmt"
	"net"
	"os"

	"github.com/fleetkit/fleet/attest"
)

// openTPM opens the TPM at path: a character device such as /dev/tpmrm0
// (attest.OpenTPM), or, when path is a unix socket, the TPM server that
// listens on it, such as swtpm (swtpm socket --server type=unixio,path=...),
// spoken to in the TPM's command stream (attest.OpenChannel). A TPM server
// must be started before the agent runs (swtpm's --flags startup-clear):
// the agent sends no TPM2_Startup and uses no control channel. Errors wrap
// attest.ErrTPM.
func openTPM(path string) (tpmDevice, error) {
	if path == "" {
		path = attest.DefaultDevice
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		conn, err := net.Dial("unix", path)
		if err != nil {
			return nil, fmt.Errorf("%w: the TPM server at %s: %w", attest.ErrTPM, path, err)
		}
		return attest.OpenChannel(conn), nil
	}
	return attest.OpenTPM(path)
}
