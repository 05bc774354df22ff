package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// IP runs ip(8) with args, and ends t with ip's output when it fails.
func IP(t testing.TB, args ...string) {
	t.Helper()
	ip := Command(t, "ip", "iproute2")
	if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// Netns adds the network namespace name (ip netns add), with its loopback
// interface up, and removes it, with every interface in it, when t ends.
func Netns(t testing.TB, name string) {
	t.Helper()
	IP(t, "netns", "add", name)
	t.Cleanup(func() {
		ip := Command(t, "ip", "iproute2")
		if out, err := exec.Command(ip, "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("remove network namespace %s: %v: %s", name, err, out)
		}
	})
	IP(t, "-n", name, "link", "set", "lo", "up")
}

var netnsPairs atomic.Int64

// NetnsPair adds two network namespaces as Netns does, named a and b
// followed by the test binary's PID and a count, so that no two tests, of
// one binary or of several at once, share a name.
func NetnsPair(t testing.TB, a, b string) (nsA, nsB string) {
	t.Helper()
	id := fmt.Sprintf("-%d-%d", os.Getpid(), netnsPairs.Add(1))
	nsA, nsB = a+id, b+id
	Netns(t, nsA)
	Netns(t, nsB)
	return nsA, nsB
}

// Veth joins the network namespaces nsA and nsB by a veth pair, its end
// devA in nsA and devB in nsB, both up. Both ends are made inside their
// namespaces: nothing is left in the test's own, and removing the
// namespaces removes them.
func Veth(t testing.TB, nsA, devA, nsB, devB string) {
	t.Helper()
	IP(t, "link", "add", devA, "netns", nsA, "type", "veth", "peer", "name", devB, "netns", nsB)
	IP(t, "-n", nsA, "link", "set", devA, "up")
	IP(t, "-n", nsB, "link", "set", devB, "up")
}
