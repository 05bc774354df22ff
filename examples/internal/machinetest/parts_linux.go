package machinetest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/internal/testenv"
)

// StartLLDPD starts lldpd with the command line enter (a program that
// enters the switch's network namespace, its arguments, and lldpd),
// sending every second on each interface of ports, which it names by a
// locally assigned port ID "Port N", as UniFi switches do, until t ends.
// Only the process the test started is stopped.
func StartLLDPD(t *testing.T, enter []string, ports map[string]int) {
	t.Helper()
	conf := fmt.Sprintf("configure system hostname %s\n", SwitchName)
	ifs := slices.Sorted(maps.Keys(ports))
	for _, i := range ifs {
		name := fmt.Sprintf("Port %d", ports[i])
		conf += fmt.Sprintf("configure ports %s lldp portidsubtype local %q description %q\n", i, name, name)
	}
	testenv.StartLLDPD(t, enter, ifs, conf)
}

// ServeTPM and Swtpm start swtpm, as testenv's do.
var ServeTPM, Swtpm = testenv.ServeTPM, testenv.Swtpm

// EKs reads the EK hashes of the TPM served at sock, as the receiving scan
// the runbook asks for would.
func EKs(t testing.TB, sock string) attest.Binding {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	dev := attest.OpenChannel(conn)
	defer dev.Close()
	b, err := attesttest.Approve(dev)
	if err != nil {
		t.Fatalf("read swtpm's EKs: %v", err)
	}
	return b
}

// Digest returns the SHA-256 of the whole of the file p.
func Digest(t testing.TB, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
