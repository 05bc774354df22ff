package lldpwait

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestParseLLDPD decodes lldpd's frames, with each port ID it was
// configured to send, and checks that the Neighbor shares no memory with
// its frame: Wait reuses its buffer for the next frame. ParseLLDPDU decodes
// a frame's payload alike, with no addresses.
func TestParseLLDPD(t *testing.T) {
	mac := net.HardwareAddr{0x12, 0x0e, 0x7d, 0x9e, 0x51, 0x8d}
	for _, tt := range []struct {
		name   string
		portID string // the port ID TLV, as lldpdFrameWith takes it
		sub    PortIDSubtype
		id     string
		raw    []byte
	}{
		{"default: MAC port ID, name in the description", lldpdPortMAC, PortMACAddress, "12:0e:7d:9e:51:8d", mac},
		{"port ID interface name", lldpdPortIfname, PortInterfaceName, "eth4", []byte("eth4")},
		{"port ID locally assigned, UniFi style", lldpdPortLocal7, PortLocal, "Port 7", []byte("Port 7")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			frame := lldpdFrameWith(tt.portID)
			n := mustParse(t, frame)
			want := &Neighbor{
				ChassisIDSubtype:    ChassisMACAddress,
				ChassisID:           "12:0e:7d:9e:51:8d",
				ChassisIDRaw:        mac,
				PortIDSubtype:       tt.sub,
				PortID:              tt.id,
				PortIDRaw:           tt.raw,
				TTL:                 4 * time.Second,
				PortDescription:     "eth4",
				SystemName:          "sw-test",
				SystemDescription:   "Debian GNU/Linux 12 (bookworm) Linux 6.18.44-fc-v1045 #1 SMP PREEMPT_DYNAMIC @0 x86_64",
				Capabilities:        0x009c,
				EnabledCapabilities: 0x0080,
				ManagementAddresses: []ManagementAddress{{
					Family:           familyIPv6,
					Addr:             netip.MustParseAddr("fe80::100e:7dff:fe9e:518d"),
					Raw:              netip.MustParseAddr("fe80::100e:7dff:fe9e:518d").AsSlice(),
					InterfaceSubtype: 2,
					InterfaceNumber:  6,
				}},
				Source:      mac,
				Destination: net.HardwareAddr(dstNearest),
			}
			if diff := cmp.Diff(want, n, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("Parse(lldpd frame) (-want +got):\n%s", diff)
			}
			fromPDU, err := ParseLLDPDU(frame[ethHeaderLen:])
			for i := range frame {
				frame[i] = 0xff
			}
			if diff := cmp.Diff(want, n, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("the Neighbor changed with its frame (-want +got):\n%s", diff)
			}
			want.Source, want.Destination = nil, nil
			if diff := cmp.Diff(want, fromPDU, cmpopts.EquateComparable(netip.Addr{})); err != nil || diff != "" {
				t.Errorf("ParseLLDPDU(lldpd frame's payload): %v (-want +got):\n%s", err, diff)
			}
		})
	}
	if _, err := ParseLLDPDU(lldpdFrame); !errors.Is(err, ErrMalformed) {
		t.Errorf("ParseLLDPDU(whole frame) = %v, want ErrMalformed", err)
	}
}

// TestParseShapes decodes frames of each shape the standard allows.
func TestParseShapes(t *testing.T) {
	type ids struct {
		chassisSub ChassisIDSubtype
		chassis    string
		portSub    PortIDSubtype
		port       string
	}
	macID := ids{ChassisMACAddress, "74:83:c2:01:02:03", PortLocal, "Port 5"}
	chassisIs := func(sub ChassisIDSubtype, id string) ids { return ids{sub, id, PortLocal, "Port 5"} }
	portIs := func(sub PortIDSubtype, id string) ids { return ids{ChassisMACAddress, "74:83:c2:01:02:03", sub, id} }
	withPort := func(sub PortIDSubtype, v []byte) []byte {
		return lldpFrame(cat(chassisTLV(ChassisMACAddress, switchMAC), portTLV(sub, v), ttlTLV(120), endTLV()))
	}
	withChassis := func(sub ChassisIDSubtype, v []byte) []byte {
		return lldpFrame(cat(chassisTLV(sub, v), portTLV(PortLocal, []byte("Port 5")), ttlTLV(120), endTLV()))
	}
	v6 := netip.MustParseAddr("2001:db8::1").AsSlice()
	tests := []struct {
		name  string
		frame []byte
		want  ids
		check func(t *testing.T, n *Neighbor)
	}{
		{name: "UniFi shape", frame: unifiFrame("Port 5"), want: macID, check: func(t *testing.T, n *Neighbor) {
			if n.PortDescription != "Port 5" || n.SystemName != "USW-Pro-24" || n.TTL != 120*time.Second {
				t.Errorf("got description %q, name %q, TTL %v", n.PortDescription, n.SystemName, n.TTL)
			}
			if len(n.ManagementAddresses) != 1 || n.ManagementAddresses[0].Addr != netip.MustParseAddr("192.0.2.10") {
				t.Errorf("management addresses %+v", n.ManagementAddresses)
			}
			if n.Capabilities != 4 || n.EnabledCapabilities != 4 {
				t.Errorf("capabilities %#x/%#x, want 0x4/0x4", n.Capabilities, n.EnabledCapabilities)
			}
		}},

		// Chassis ID subtypes (8.5.2.2).
		{name: "chassis component", frame: withChassis(ChassisComponent, []byte("chassis-1")), want: chassisIs(ChassisComponent, "chassis-1")},
		{name: "chassis interface alias", frame: withChassis(ChassisInterfaceAlias, []byte("uplink to core")), want: chassisIs(ChassisInterfaceAlias, "uplink to core")},
		{name: "chassis port component", frame: withChassis(ChassisPortComponent, []byte("backplane 2")), want: chassisIs(ChassisPortComponent, "backplane 2")},
		{name: "chassis MAC", frame: withChassis(ChassisMACAddress, switchMAC), want: macID},
		{name: "chassis MAC EUI-64", frame: withChassis(ChassisMACAddress, []byte{1, 2, 3, 4, 5, 6, 7, 8}), want: chassisIs(ChassisMACAddress, "01:02:03:04:05:06:07:08")},
		{name: "chassis network address IPv4", frame: withChassis(ChassisNetworkAddress, []byte{familyIPv4, 192, 0, 2, 1}), want: chassisIs(ChassisNetworkAddress, "192.0.2.1")},
		{name: "chassis network address IPv6", frame: withChassis(ChassisNetworkAddress, withSubtype(familyIPv6, v6)), want: chassisIs(ChassisNetworkAddress, "2001:db8::1")},
		{name: "chassis network address 802", frame: withChassis(ChassisNetworkAddress, withSubtype(family802, switchMAC)), want: chassisIs(ChassisNetworkAddress, "74:83:c2:01:02:03")},
		{name: "chassis network address other family", frame: withChassis(ChassisNetworkAddress, []byte{16, 0xde, 0xad}), want: chassisIs(ChassisNetworkAddress, "10:de:ad")},
		{name: "chassis interface name", frame: withChassis(ChassisInterfaceName, []byte("vlan1")), want: chassisIs(ChassisInterfaceName, "vlan1")},
		{name: "chassis local", frame: withChassis(ChassisLocal, []byte("sw-rack2")), want: chassisIs(ChassisLocal, "sw-rack2")},

		// Port ID subtypes (8.5.3.2).
		{name: "port interface alias", frame: withPort(PortInterfaceAlias, []byte("server 5")), want: portIs(PortInterfaceAlias, "server 5")},
		{name: "port component", frame: withPort(PortComponent, []byte("1/5")), want: portIs(PortComponent, "1/5")},
		{name: "port MAC", frame: withPort(PortMACAddress, hostMAC), want: portIs(PortMACAddress, "02:00:00:00:00:01")},
		{name: "port network address", frame: withPort(PortNetworkAddress, []byte{familyIPv4, 198, 51, 100, 7}), want: portIs(PortNetworkAddress, "198.51.100.7")},
		{name: "port interface name", frame: withPort(PortInterfaceName, []byte("ge-0/0/5")), want: portIs(PortInterfaceName, "ge-0/0/5")},
		{name: "port agent circuit ID", frame: withPort(PortAgentCircuitID, []byte{0x01, 0x04, 0x00, 0x05}), want: portIs(PortAgentCircuitID, "01:04:00:05")},
		{name: "port local", frame: withPort(PortLocal, []byte("Port 5")), want: macID},
		{name: "port local NUL-terminated", frame: withPort(PortLocal, []byte("Port 5\x00")), want: macID},
		{name: "port local not printable", frame: withPort(PortLocal, []byte{'P', 0x07, 0xff}), want: portIs(PortLocal, "50:07:ff")},
		{name: "port local only NUL", frame: withPort(PortLocal, []byte{0}), want: portIs(PortLocal, "00")},
		{name: "port local UTF-8", frame: withPort(PortLocal, []byte("Anschluss 5 – Gerät")), want: portIs(PortLocal, "Anschluss 5 – Gerät")},

		// Optional TLVs and the end of the LLDPDU.
		{name: "mandatory TLVs only, End missing", frame: lldpFrame(mandatory("Port 5")), want: macID},
		{name: "End missing, Ethernet padding", frame: lldpFrame(cat(mandatory("Port 5"), make([]byte, 20))), want: macID},
		{name: "bytes after End are ignored", frame: lldpFrame(cat(mandatory("Port 5"), endTLV(), []byte{0xde, 0xad, 0xbe})), want: macID},
		{name: "zero-length port description and system name",
			frame: lldpFrame(cat(mandatory("Port 5"), textTLV(tlvPortDescription, ""), textTLV(tlvSystemName, ""), textTLV(tlvSystemDesc, ""), endTLV())),
			want:  macID, check: func(t *testing.T, n *Neighbor) {
				if n.PortDescription != "" || n.SystemName != "" || n.SystemDescription != "" {
					t.Errorf("got %q %q %q, want empty", n.PortDescription, n.SystemName, n.SystemDescription)
				}
			}},
		{name: "descriptions with control characters and bad UTF-8",
			frame: lldpFrame(cat(mandatory("Port 5"), textTLV(tlvPortDescription, "rack 2\tnode\x1b[31m5\xff\x00\x00"), textTLV(tlvSystemDesc, "line 1\nline 2"), endTLV())),
			want:  macID, check: func(t *testing.T, n *Neighbor) {
				if want := "rack 2 node\uFFFD[31m5\uFFFD"; n.PortDescription != want {
					t.Errorf("PortDescription %q, want %q", n.PortDescription, want)
				}
				if n.SystemDescription != "line 1 line 2" {
					t.Errorf("SystemDescription %q", n.SystemDescription)
				}
			}},
		{name: "TLVs after the mandatory ones in any order, unknown and organizational skipped",
			frame: lldpFrame(cat(mandatory("Port 5"),
				tlv(127, 0x00, 0x12, 0x0f, 0x01, 0x03, 0x6c, 0x00, 0x00, 0x10),
				textTLV(tlvSystemName, "core-1"),
				tlv(9, 1, 2, 3),
				tlv(126),
				mgmtTLV(familyIPv6, v6, 3, 5, []byte{0x2b, 0x06, 0x01}),
				textTLV(tlvPortDescription, "GigabitEthernet1/0/5"),
				mgmtTLV(familyIPv4, []byte{192, 0, 2, 1}, 2, 10, nil),
				mgmtTLV(family802, switchMAC, 1, 0, nil),
				endTLV())),
			want: macID, check: func(t *testing.T, n *Neighbor) {
				want := []ManagementAddress{
					{Family: familyIPv6, Addr: netip.MustParseAddr("2001:db8::1"), Raw: v6, InterfaceSubtype: 3, InterfaceNumber: 5, OID: []byte{0x2b, 0x06, 0x01}},
					{Family: familyIPv4, Addr: netip.MustParseAddr("192.0.2.1"), Raw: []byte{192, 0, 2, 1}, InterfaceSubtype: 2, InterfaceNumber: 10},
					{Family: family802, Raw: switchMAC, InterfaceSubtype: 1},
				}
				if diff := cmp.Diff(want, n.ManagementAddresses, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
					t.Errorf("management addresses (-want +got):\n%s", diff)
				}
				if n.SystemName != "core-1" || n.PortDescription != "GigabitEthernet1/0/5" {
					t.Errorf("name %q, description %q", n.SystemName, n.PortDescription)
				}
			}},
		{name: "TTL 0 (shutdown) parses", frame: lldpFrame(cat(chassisTLV(ChassisMACAddress, switchMAC), portTLV(PortLocal, []byte("Port 5")), ttlTLV(0), endTLV())),
			want: macID, check: func(t *testing.T, n *Neighbor) {
				if n.TTL != 0 {
					t.Errorf("TTL %v, want 0", n.TTL)
				}
			}},
		{name: "longest IDs and description (255 bytes), longest TLV (511 bytes)",
			frame: lldpFrame(cat(chassisTLV(ChassisLocal, bytes.Repeat([]byte("c"), 255)), portTLV(PortLocal, bytes.Repeat([]byte("p"), 255)), ttlTLV(1),
				textTLV(tlvPortDescription, strings.Repeat("d", 255)), tlv(tlvOrgSpecific, bytes.Repeat([]byte("o"), 511)...))),
			want: ids{ChassisLocal, strings.Repeat("c", 255), PortLocal, strings.Repeat("p", 255)}, check: func(t *testing.T, n *Neighbor) {
				if n.PortDescription != strings.Repeat("d", 255) {
					t.Errorf("PortDescription of %d bytes, want 255", len(n.PortDescription))
				}
			}},
		{name: "any destination", frame: ethFrame(dstBcast, mandatory("Port 5")), want: macID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := mustParse(t, tt.frame)
			got := ids{n.ChassisIDSubtype, n.ChassisID, n.PortIDSubtype, n.PortID}
			if got != tt.want {
				t.Errorf("IDs %+v, want %+v", got, tt.want)
			}
			if !bytes.Equal(n.Source, switchMAC) || !bytes.Equal(n.Destination, tt.frame[:6]) {
				t.Errorf("Source %v, Destination %v", n.Source, n.Destination)
			}
			if tt.check != nil {
				tt.check(t, n)
			}
		})
	}
}

// TestParseErrors feeds frames that break the standard, and checks each is
// refused with the right error and a reason.
func TestParseErrors(t *testing.T) {
	chassis := chassisTLV(ChassisMACAddress, switchMAC)
	port := portTLV(PortLocal, []byte("Port 5"))
	ttl := ttlTLV(120)
	tests := []struct {
		name   string
		frame  []byte
		target error
		reason string // a part of the error text
	}{
		{"empty frame", nil, ErrMalformed, "shorter than an Ethernet header"},
		{"13 bytes", make([]byte, 13), ErrMalformed, "shorter than an Ethernet header"},
		{"IPv4 frame", cat(dstBcast, switchMAC, []byte{0x08, 0x00}, mandatory("Port 5")), ErrNotLLDP, "Ethernet type 0x0800"},
		{"VLAN-tagged LLDP", cat(dstNearest, switchMAC, []byte{0x81, 0x00, 0x00, 0x05, 0x88, 0xcc}, mandatory("Port 5")), ErrNotLLDP, "0x8100"},
		{"empty LLDPDU", lldpFrame(nil), ErrMalformed, "ends after 0 TLVs"},
		{"only End", lldpFrame(endTLV()), ErrMalformed, "TLV 1 (offset 0) is type 0, want chassis ID"},
		{"port ID first", lldpFrame(cat(port, chassis, ttl)), ErrMalformed, "TLV 1 (offset 0) is type 2, want chassis ID"},
		{"port ID missing", lldpFrame(cat(chassis, ttl, endTLV())), ErrMalformed, "is type 3, want port ID"},
		{"TTL missing, End", lldpFrame(cat(chassis, port, endTLV())), ErrMalformed, "is type 0, want time to live"},
		{"TTL missing, no End", lldpFrame(cat(chassis, port)), ErrMalformed, "ends after 2 TLVs"},
		{"TTL before port ID", lldpFrame(cat(chassis, ttl, port)), ErrMalformed, "want port ID"},
		{"system name before TTL", lldpFrame(cat(chassis, port, textTLV(tlvSystemName, "sw"), ttl)), ErrMalformed, "want time to live"},
		{"chassis ID TLV of length 0", lldpFrame(cat(tlv(tlvChassisID), port, ttl)), ErrMalformed, "chassis ID TLV has length 0"},
		{"chassis ID with subtype only", lldpFrame(cat(tlv(tlvChassisID, 4), port, ttl)), ErrMalformed, "chassis ID TLV has length 1, want 2 to 256"},
		{"chassis ID of 256 bytes", lldpFrame(cat(chassisTLV(ChassisLocal, bytes.Repeat([]byte("c"), 256)), port, ttl)), ErrMalformed, "chassis ID TLV has length 257, want 2 to 256"},
		{"chassis ID subtype 0", lldpFrame(cat(chassisTLV(0, []byte("x")), port, ttl)), ErrMalformed, "chassis ID subtype 0 is reserved"},
		{"chassis ID subtype 8", lldpFrame(cat(chassisTLV(8, []byte("x")), port, ttl)), ErrMalformed, "chassis ID subtype 8 is reserved"},
		{"chassis MAC of 5 bytes", lldpFrame(cat(chassisTLV(ChassisMACAddress, switchMAC[:5]), port, ttl)), ErrMalformed, "chassis ID (MAC address): a MAC address of 5 bytes"},
		{"chassis IPv4 of 3 bytes", lldpFrame(cat(chassisTLV(ChassisNetworkAddress, []byte{familyIPv4, 1, 2, 3}), port, ttl)), ErrMalformed, "IPv4 address of 3 bytes"},
		{"chassis IPv6 of 4 bytes", lldpFrame(cat(chassisTLV(ChassisNetworkAddress, []byte{familyIPv6, 1, 2, 3, 4}), port, ttl)), ErrMalformed, "IPv6 address of 4 bytes"},
		{"port ID TLV of length 0", lldpFrame(cat(chassis, tlv(tlvPortID), ttl)), ErrMalformed, "port ID TLV has length 0, want 2 to 256"},
		{"port ID with subtype only", lldpFrame(cat(chassis, tlv(tlvPortID, 7), ttl)), ErrMalformed, "port ID TLV has length 1"},
		{"port ID subtype 0", lldpFrame(cat(chassis, portTLV(0, []byte("5")), ttl)), ErrMalformed, "port ID subtype 0 is reserved"},
		{"port ID of 256 bytes", lldpFrame(cat(chassis, portTLV(PortLocal, bytes.Repeat([]byte("p"), 256)), ttl)), ErrMalformed, "port ID TLV has length 257, want 2 to 256"},
		{"port ID subtype 8", lldpFrame(cat(chassis, portTLV(8, []byte("5")), ttl)), ErrMalformed, "port ID subtype 8 is reserved"},
		{"port ID subtype 255", lldpFrame(cat(chassis, portTLV(255, []byte("5")), ttl)), ErrMalformed, "port ID subtype 255 is reserved"},
		{"port MAC of 7 bytes", lldpFrame(cat(chassis, portTLV(PortMACAddress, append(hostMAC, 0)), ttl)), ErrMalformed, "MAC address of 7 bytes"},
		{"port 802 address of 2 bytes", lldpFrame(cat(chassis, portTLV(PortNetworkAddress, []byte{family802, 1, 2}), ttl)), ErrMalformed, "MAC address of 2 bytes"},
		{"TTL of length 1", lldpFrame(cat(chassis, port, tlv(tlvTTL, 0))), ErrMalformed, "time to live TLV has length 1"},
		{"TTL of length 0", lldpFrame(cat(chassis, port, tlv(tlvTTL))), ErrMalformed, "time to live TLV has length 0"},
		{"TLV length past the frame", lldpFrame(cat(chassis, port, rawTLV(tlvTTL, 2, []byte{0}))), ErrMalformed, "claims 2 bytes, 1 remain"},
		{"chassis ID length past the frame", lldpFrame(rawTLV(tlvChassisID, 200, []byte{4, 1, 2, 3, 4, 5, 6})), ErrMalformed, "claims 200 bytes, 7 remain"},
		{"largest TLV length past the frame", lldpFrame(cat(mandatory("5"), rawTLV(tlvSystemDesc, 511, []byte("x")))), ErrMalformed, "TLV type 6 at offset 17 claims 511 bytes, 1 remain"},
		{"half a TLV header", lldpFrame(cat(mandatory("Port 5"), []byte{0x0a})), ErrMalformed, "1 byte left at offset 22, too short for a TLV header"},
		{"End with length 1", lldpFrame(cat(mandatory("Port 5"), tlv(tlvEnd, 0))), ErrMalformed, "End Of LLDPDU TLV at offset 22 has length 1"},
		{"second chassis ID", lldpFrame(cat(mandatory("Port 5"), chassis)), ErrMalformed, "a second chassis ID (1) TLV"},
		{"second port ID", lldpFrame(cat(mandatory("Port 5"), port)), ErrMalformed, "a second port ID (2) TLV"},
		{"second TTL", lldpFrame(cat(mandatory("Port 5"), ttl)), ErrMalformed, "a second time to live (3) TLV"},
		{"second port description", lldpFrame(cat(mandatory("Port 5"), textTLV(tlvPortDescription, "a"), textTLV(tlvPortDescription, "b"))), ErrMalformed, "a second port description TLV"},
		{"second system name", lldpFrame(cat(mandatory("Port 5"), textTLV(tlvSystemName, "a"), textTLV(tlvSystemName, "b"))), ErrMalformed, "a second system name TLV"},
		{"port description of 256 bytes", lldpFrame(cat(mandatory("Port 5"), textTLV(tlvPortDescription, strings.Repeat("d", 256)))), ErrMalformed, "port description TLV has length 256, want at most 255"},
		{"system name of 300 bytes", lldpFrame(cat(mandatory("Port 5"), textTLV(tlvSystemName, strings.Repeat("n", 300)))), ErrMalformed, "system name TLV has length 300"},
		{"system description of 400 bytes", lldpFrame(cat(mandatory("Port 5"), textTLV(tlvSystemDesc, strings.Repeat("n", 400)))), ErrMalformed, "system description TLV has length 400, want at most 255"},
		{"capabilities of 3 bytes", lldpFrame(cat(mandatory("Port 5"), tlv(tlvCapabilities, 0, 4, 0))), ErrMalformed, "system capabilities TLV has length 3"},
		{"management address of 8 bytes", lldpFrame(cat(mandatory("Port 5"), tlv(tlvManagementAddr, 5, 1, 192, 0, 2, 1, 2, 0))), ErrMalformed, "length 8, want 9 to 167"},
		{"management address string length 1", lldpFrame(cat(mandatory("Port 5"), tlv(tlvManagementAddr, 1, 1, 2, 0, 0, 0, 1, 0, 0))), ErrMalformed, "address string length 1"},
		{"management address string past the TLV", lldpFrame(cat(mandatory("Port 5"), tlv(tlvManagementAddr, 9, 1, 192, 0, 2, 1, 2, 0, 0))), ErrMalformed, "leaves no room"},
		{"management address IPv4 of 5 bytes", lldpFrame(cat(mandatory("Port 5"), mgmtTLV(familyIPv4, []byte{1, 2, 3, 4, 5}, 2, 1, nil))), ErrMalformed, "IPv4 address of 5 bytes"},
		{"management address OID length past the TLV", lldpFrame(cat(mandatory("Port 5"), tlv(tlvManagementAddr, 5, 1, 192, 0, 2, 1, 2, 0, 0, 0, 1, 3, 0x2b))), ErrMalformed, "OID string length 3, but 1 bytes remain"},
		{"management address with bytes after the OID", lldpFrame(cat(mandatory("Port 5"), tlv(tlvManagementAddr, 5, 1, 192, 0, 2, 1, 2, 0, 0, 0, 1, 0, 0xee))), ErrMalformed, "OID string length 0, but 1 bytes remain"},
		{"management address OID of 129 bytes", lldpFrame(cat(mandatory("Port 5"), tlv(tlvManagementAddr, append([]byte{5, 1, 192, 0, 2, 1, 2, 0, 0, 0, 1, 129}, make([]byte, 129)...)...))), ErrMalformed, "OID string length 129"},
		{"organizational TLV of 3 bytes", lldpFrame(cat(mandatory("Port 5"), tlv(tlvOrgSpecific, 0, 0x12, 0x0f))), ErrMalformed, "organizationally specific TLV at offset 22 has length 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Parse(tt.frame)
			if !errors.Is(err, tt.target) {
				t.Fatalf("Parse = %+v, %v; want an error matching %v", n, err, tt.target)
			}
			if n != nil {
				t.Errorf("Parse returned a Neighbor with its error: %+v", n)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not say %q", err, tt.reason)
			}
		})
	}
}

func TestSubtypeStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{ChassisMACAddress.String(), "MAC address"},
		{ChassisLocal.String(), "locally assigned"},
		{ChassisIDSubtype(0).String(), "ChassisIDSubtype(0)"},
		{PortInterfaceName.String(), "interface name"},
		{PortAgentCircuitID.String(), "agent circuit ID"},
		{PortIDSubtype(9).String(), "PortIDSubtype(9)"},
		{FieldPortID.String(), "port ID"},
		{Field(0).String(), "Field(0)"},
	} {
		if tt.got != tt.want {
			t.Errorf("String() = %q, want %q", tt.got, tt.want)
		}
	}
}
