package provision

import (
	"net"
	"net/netip"
	"testing"

	"github.com/fleetkit/fleet/inventory"
)

// A device's Hardware says it boots by UEFI: Tinkerbell's controller
// takes a netboot Job's efiBoot from dhcp.uefi, and every fleet node
// boots Talos by UEFI.
func TestHardwareBootsUEFI(t *testing.T) {
	p := &Provisioner{cfg: Config{Namespace: "tinkerbell"}}
	dev := inventory.Device{
		ID:          7,
		Name:        "node-07",
		MAC:         net.HardwareAddr{0x02, 0, 0, 0, 0, 7},
		Address:     netip.MustParsePrefix("10.0.0.27/24"),
		InstallDisk: "/dev/nvme0n1",
	}
	hw := p.hardware(dev)
	if len(hw.Spec.Interfaces) != 1 || hw.Spec.Interfaces[0].DHCP == nil {
		t.Fatalf("Hardware interfaces = %+v, want one with DHCP", hw.Spec.Interfaces)
	}
	if dhcp := hw.Spec.Interfaces[0].DHCP; !dhcp.UEFI || dhcp.MAC != "02:00:00:00:00:07" {
		t.Errorf("Hardware DHCP = %+v, want UEFI true for MAC 02:00:00:00:00:07", dhcp)
	}
}
