package lldpwait

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/mdlayher/packet"
)

// listen opens an AF_PACKET raw socket on ifname, bound to the LLDP
// Ethernet type, with the kernel filter attached before the bind (so no
// other frame is ever queued to it), and joins the nearest-bridge group so
// the interface accepts frames sent to it.
func listen(ifname string) (conn, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("lldpwait: interface %s: %w", ifname, err)
	}
	prog, err := filter()
	if err != nil {
		return nil, fmt.Errorf("lldpwait: assemble the BPF filter: %w", err)
	}
	c, err := packet.Listen(ifi, packet.Raw, EtherType, &packet.Config{Filter: prog})
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("lldpwait: raw socket on %s needs CAP_NET_RAW: %w", ifname, err)
		}
		return nil, fmt.Errorf("lldpwait: raw socket on %s: %w", ifname, err)
	}
	if err := c.JoinGroup(net.HardwareAddr(nearestBridge[:])); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("lldpwait: join %s on %s: %w", net.HardwareAddr(nearestBridge[:]), ifname, err)
	}
	return c, nil
}
