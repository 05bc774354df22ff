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

// Switch makes the network namespace ns a switch: its bridge joins ports
// (interfaces in ns) to an uplink whose other end, up, is in the test's
// namespace with the address uplink/24. With lldp, lldpd announces each of
// ports every second, naming it by a locally assigned port ID "Port N" (N
// its number in ports), as UniFi switches do, until t ends.
func Switch(t testing.TB, ns, up, uplink string, ports map[string]int, lldp bool) {
	t.Helper()
	// The test's end goes with the switch's namespace.
	testenv.IP(t, "link", "add", up, "type", "veth", "peer", "name", "uplink", "netns", ns)
	testenv.IP(t, "-n", ns, "link", "add", "br0", "type", "bridge")
	ifs := slices.Sorted(maps.Keys(ports))
	for _, l := range append([]string{"uplink"}, ifs...) {
		testenv.IP(t, "-n", ns, "link", "set", l, "master", "br0")
		testenv.IP(t, "-n", ns, "link", "set", l, "up")
	}
	testenv.IP(t, "-n", ns, "link", "set", "br0", "up")
	testenv.IP(t, "addr", "add", uplink+"/24", "dev", up)
	testenv.IP(t, "link", "set", up, "up")
	if !lldp {
		return
	}
	conf := fmt.Sprintf("configure system hostname %s\n", SwitchName)
	for _, i := range ifs {
		name := fmt.Sprintf("Port %d", ports[i])
		conf += fmt.Sprintf("configure ports %s lldp portidsubtype local %q description %q\n", i, name, name)
	}
	enter := []string{testenv.Command(t, "ip", "iproute2"), "netns", "exec", ns, testenv.Command(t, "lldpd", "lldpd")}
	testenv.StartLLDPD(t, enter, ifs, conf)
}

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
