package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
)

// ErrNoControlPlanes: RenderClassInputs found no control plane with an
// address.
var ErrNoControlPlanes = errors.New("no control plane in NetBox holds an address")

var dnsNameRE = regexp.MustCompile(`^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)*[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`)

// RenderClassInputs renders the class inputs of the next control plane: a
// Talos machine config patch (a YAML strategic merge patch, as
// `talosctl gen config --config-patch-control-plane` and the Talos root's
// class patches take it) that sets the API server's and the machine's
// certificate SANs to every control plane's address in devices (whatever
// its status: one that joins or leaves keeps a valid certificate; see
// ControlPlaneSANs), then extraSANs (e.g. API_SERVER_IP's DNS name).
// classes says which devices are control planes, as the nodes file
// declares them. The output is stable: the same devices give the same
// bytes, so it can be committed and diffed:
//
//	# fleet render-class-inputs: the class inputs of the next control plane.
//	# Control planes: cp-a 10.0.0.11 (active), cp-b 10.0.0.12 (planned).
//	machine:
//	  certSANs:
//	    - "10.0.0.11"
//	    - "10.0.0.12"
//	cluster:
//	  apiServer:
//	    certSANs:
//	      - "10.0.0.11"
//	      - "10.0.0.12"
//
// errors.Is finds ErrNoControlPlanes when no control plane holds an
// address; an extra SAN that is neither an IP address nor a DNS name is an
// error.
func RenderClassInputs(devices []Device, classes map[string]Class, extraSANs []string) ([]byte, error) {
	cps := ControlPlanes(devices, classes)
	if len(cps) == 0 {
		return nil, ErrNoControlPlanes
	}
	slices.SortFunc(cps, func(a, b Device) int { return a.Address.Addr().Compare(b.Address.Addr()) })
	for _, s := range extraSANs {
		if _, err := netip.ParseAddr(s); err != nil && !dnsNameRE.MatchString(s) {
			return nil, fmt.Errorf("SAN %q is neither an IP address nor a DNS name", s)
		}
	}
	sans := ControlPlaneSANs(cps, classes, extraSANs)
	var b bytes.Buffer
	b.WriteString("# fleet render-class-inputs: the class inputs of the next control plane.\n# Control planes:")
	for i, d := range cps {
		if i > 0 {
			b.WriteByte(',')
		}
		name := d.Name
		if !dnsNameRE.MatchString(name) {
			name = fmt.Sprintf("%q", name)
		}
		fmt.Fprintf(&b, " %s %s (%s)", name, d.Address.Addr(), d.Status)
	}
	b.WriteString(".\nmachine:\n  certSANs:\n")
	for _, s := range sans {
		fmt.Fprintf(&b, "    - %q\n", s)
	}
	b.WriteString("cluster:\n  apiServer:\n    certSANs:\n")
	for _, s := range sans {
		fmt.Fprintf(&b, "      - %q\n", s)
	}
	return b.Bytes(), nil
}
