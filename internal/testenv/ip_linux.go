package testenv

import (
	"os/exec"
	"strings"
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
