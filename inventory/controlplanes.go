package inventory

import (
	"net/netip"
	"slices"
	"strings"
)

// isControlPlane reports whether dev's class is a control plane class.
func isControlPlane(dev Device, classes map[string]Class) bool {
	cl, ok := classes[dev.Class]
	return ok && cl.Type == ControlPlane
}

// ControlPlanes returns the devices whose class is a control plane class
// in classes (as the nodes file declares them) and that hold an address,
// in the order given.
func ControlPlanes(devices []Device, classes map[string]Class) []Device {
	var out []Device
	for _, d := range devices {
		if isControlPlane(d, classes) && d.Address.IsValid() {
			out = append(out, d)
		}
	}
	return out
}

// ControlPlaneSANs returns the API server certificate SANs a control plane
// gets: the address of every control plane in devices (whatever its status,
// so a node that joins or leaves keeps a valid certificate), sorted, then
// extra, in order, without duplicates or empty entries.
func ControlPlaneSANs(devices []Device, classes map[string]Class, extra []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	var addrs []netip.Addr
	for _, d := range ControlPlanes(devices, classes) {
		addrs = append(addrs, d.Address.Addr())
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	for _, a := range addrs {
		add(a.String())
	}
	for _, e := range extra {
		add(e)
	}
	return out
}
