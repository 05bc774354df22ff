package provision

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/fleetkit/fleet/inventory"
)

// Every refusal comes back as a *RefusalError in Decision.Refusal: its
// Error is the Reason, Journal the line the device's journal holds, and
// errors.Is finds its cause. (A started run has none:
// TestAdmitWorkerStartsRun.)
func TestAdmitRefusalTyped(t *testing.T) {
	errPort := errors.New("on port 7, expected 1")
	for _, tc := range []struct {
		name  string
		edit  func(*Cluster, *Config)
		dev   func(*inventory.Device)
		port  error
		cause error
	}{
		{name: "switch port", port: errPort, cause: errPort},
		{name: "lacks a field", dev: func(d *inventory.Device) { d.InstallDiskSerial = "" }, cause: ErrLacks},
		{name: "node name", dev: func(d *inventory.Device) { d.Name = "Node_01" }, cause: ErrNodeName},
		{name: "unknown class", dev: func(d *inventory.Device) { d.Class = "gpu" }, cause: ErrClass},
		// A control plane without control-plane support or the CA keys:
		// TestControlPlaneRefused.
		{name: "first control plane", dev: func(d *inventory.Device) {
			d.Class = ClassControlPlane
			d.DesiredAction = inventory.DesiredActionProvision
			d.Address = netip.MustParsePrefix("10.0.0.10/24") // the Endpoint's host
		}, cause: ErrFirstControlPlane},
		{name: "first control plane, retired", dev: func(d *inventory.Device) {
			d.Class = ClassControlPlane
			d.Status = inventory.StatusDecommissioning
			d.Address = netip.MustParsePrefix("10.0.0.10/24")
		}, cause: ErrFirstControlPlane},
		{name: "first control plane, lacking a field", dev: func(d *inventory.Device) {
			d.Class = ClassControlPlane
			d.DesiredAction = inventory.DesiredActionProvision
			d.InstallDiskSerial = ""
			d.Address = netip.MustParsePrefix("10.0.0.10/24")
		}, cause: ErrFirstControlPlane},
		{name: "first control plane, set", edit: func(c *Cluster, _ *Config) {
			c.Endpoint = "https://api.folly.example:6443"
			c.FirstControlPlane = netip.MustParseAddr("10.0.0.21") // node-01's
		}, cause: ErrFirstControlPlane},
	} {
		inBubble(t, tc.name, func(t *testing.T) {
			dev := worker(1, "node-01")
			if tc.dev != nil {
				tc.dev(&dev)
			}
			h := newHarness(t, tc.edit, dev)
			c := claimOf(dev)
			if tc.port != nil {
				c.CheckPort = func(int) error { return tc.port }
			}
			d := h.admit(c)
			ref := d.Refusal
			if d.Outcome != Refused || ref == nil {
				t.Fatalf("Admit = %+v, want a refusal", d)
			}
			if !errors.Is(ref, tc.cause) || ref.Node != dev.Name || ref.Error() != d.Reason {
				t.Errorf("Refusal = %#v (%v), want cause %v, node %s, reason %q", ref, ref, tc.cause, dev.Name, d.Reason)
			}
			lines := h.nb.lines()
			if len(lines) != 1 || lines[0].Text != ref.Journal() {
				t.Errorf("journal %+v, want the refusal's line %q", lines, ref.Journal())
			}
			h.wantNothingCreated()
			if errors.Is(ref, ErrFirstControlPlane) {
				want := fmt.Sprintf("refused a run before rendering anything: node-01 is at API_SERVER_IP %s: the cluster's first control plane, which the Talos root bootstraps, never installs this way; no run starts, nothing is wiped", dev.Address.Addr())
				if ref.Journal() != want {
					t.Errorf("journal line %q, want %q", ref.Journal(), want)
				}
			}
		})
	}
}
