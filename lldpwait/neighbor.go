package lldpwait

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// A ChassisIDSubtype says what a chassis ID holds (IEEE 802.1AB-2016,
// 8.5.2.2). Zero is reserved by the standard and never comes out of Parse.
type ChassisIDSubtype uint8

// Chassis ID subtypes.
const (
	ChassisComponent      ChassisIDSubtype = 1 // entPhysicalAlias of a chassis (RFC 6933)
	ChassisInterfaceAlias ChassisIDSubtype = 2 // ifAlias (RFC 2863)
	ChassisPortComponent  ChassisIDSubtype = 3 // entPhysicalAlias of a port or backplane
	ChassisMACAddress     ChassisIDSubtype = 4 // a MAC address (IEEE 802)
	ChassisNetworkAddress ChassisIDSubtype = 5 // an IANA address family octet, then the address
	ChassisInterfaceName  ChassisIDSubtype = 6 // ifName (RFC 2863)
	ChassisLocal          ChassisIDSubtype = 7 // locally assigned
)

// String returns the subtype's name as the standard gives it, or
// "ChassisIDSubtype(N)" for a value outside it.
func (s ChassisIDSubtype) String() string {
	switch s {
	case ChassisComponent:
		return "chassis component"
	case ChassisInterfaceAlias:
		return "interface alias"
	case ChassisPortComponent:
		return "port component"
	case ChassisMACAddress:
		return "MAC address"
	case ChassisNetworkAddress:
		return "network address"
	case ChassisInterfaceName:
		return "interface name"
	case ChassisLocal:
		return "locally assigned"
	}
	return "ChassisIDSubtype(" + strconv.Itoa(int(s)) + ")"
}

// A PortIDSubtype says what a port ID holds (IEEE 802.1AB-2016, 8.5.3.2).
// Zero is reserved by the standard and never comes out of Parse.
type PortIDSubtype uint8

// Port ID subtypes.
const (
	PortInterfaceAlias PortIDSubtype = 1 // ifAlias (RFC 2863)
	PortComponent      PortIDSubtype = 2 // entPhysicalAlias of a port or backplane
	PortMACAddress     PortIDSubtype = 3 // a MAC address (IEEE 802)
	PortNetworkAddress PortIDSubtype = 4 // an IANA address family octet, then the address
	PortInterfaceName  PortIDSubtype = 5 // ifName (RFC 2863)
	PortAgentCircuitID PortIDSubtype = 6 // agent circuit ID (RFC 3046), binary
	PortLocal          PortIDSubtype = 7 // locally assigned
)

// String returns the subtype's name as the standard gives it, or
// "PortIDSubtype(N)" for a value outside it.
func (s PortIDSubtype) String() string {
	switch s {
	case PortInterfaceAlias:
		return "interface alias"
	case PortComponent:
		return "port component"
	case PortMACAddress:
		return "MAC address"
	case PortNetworkAddress:
		return "network address"
	case PortInterfaceName:
		return "interface name"
	case PortAgentCircuitID:
		return "agent circuit ID"
	case PortLocal:
		return "locally assigned"
	}
	return "PortIDSubtype(" + strconv.Itoa(int(s)) + ")"
}

// A Neighbor is what one LLDP frame says about the switch port at the other
// end of the cable.
//
// ChassisID and PortID are text, rendered from the raw value by subtype:
//
//   - MAC address: lowercase hex pairs joined by colons, "aa:bb:cc:dd:ee:ff".
//   - Network address: the address as text for IPv4 ("192.0.2.1") and IPv6
//     ("2001:db8::1"), a MAC address as above for IANA family 6 (802), and
//     for any other family the whole value, family octet first, as colon-joined
//     hex pairs.
//   - Agent circuit ID (port only): colon-joined hex pairs.
//   - Every other subtype is a name ("Port 5", "ge-0/0/5"): the bytes as
//     text, trailing NUL bytes removed. A name that is not printable UTF-8 is
//     rendered as colon-joined hex pairs instead, so an ID can never carry
//     control characters into a log line or a NetBox field.
//
// ChassisIDRaw and PortIDRaw keep the value as it came, subtype octet
// removed.
//
// Port, Check and the rules of a PortConfig read only ChassisIDSubtype,
// ChassisID, PortIDSubtype, PortID, PortDescription and SystemName. A
// Neighbor rebuilt from those six fields alone (as fleetd rebuilds it from a
// machine's claim) names the same port as the Neighbor that Wait returned.
//
// A Neighbor is a plain value: it shares no memory with the frame it was
// parsed from, and is safe to read from many goroutines.
type Neighbor struct {
	ChassisIDSubtype ChassisIDSubtype
	ChassisID        string
	ChassisIDRaw     []byte

	PortIDSubtype PortIDSubtype
	PortID        string
	PortIDRaw     []byte

	// TTL is how long the switch says this information stays valid. A
	// frame with TTL 0 announces that the port is shutting LLDP down; Wait
	// skips such frames.
	TTL time.Duration

	// PortDescription, SystemName and SystemDescription hold the optional
	// TLVs of those names, empty when absent. They are decoded as UTF-8
	// with trailing NUL bytes removed; invalid UTF-8 and control characters
	// become U+FFFD, and tabs and line breaks become spaces.
	PortDescription   string
	SystemName        string
	SystemDescription string

	// Capabilities and EnabledCapabilities are the System Capabilities TLV's
	// two bit maps (IEEE 802.1AB-2016, 8.5.8), zero when absent.
	Capabilities        uint16
	EnabledCapabilities uint16

	// ManagementAddresses lists the Management Address TLVs in frame order.
	ManagementAddresses []ManagementAddress

	// Source and Destination are the Ethernet addresses of the frame; nil
	// when the Neighbor came from ParseLLDPDU.
	Source      net.HardwareAddr
	Destination net.HardwareAddr
}

// A ManagementAddress is one Management Address TLV (IEEE 802.1AB-2016,
// 8.5.9). Like its Neighbor, it is a plain value that shares no memory with
// the frame.
type ManagementAddress struct {
	// Family is the IANA address family number: 1 IPv4, 2 IPv6, 6 802 (MAC).
	Family uint8
	// Addr is the address when Family is IPv4 or IPv6, else the zero Addr.
	Addr netip.Addr
	// Raw is the address as sent, family octet removed.
	Raw []byte
	// InterfaceSubtype says how InterfaceNumber counts: 1 unknown,
	// 2 ifIndex, 3 system port number.
	InterfaceSubtype uint8
	InterfaceNumber  uint32
	// OID is the object identifier as sent (BER), nil when empty.
	OID []byte
}

// IANA address family numbers used by network-address IDs and management
// addresses.
const (
	familyIPv4 = 1
	familyIPv6 = 2
	family802  = 6
)

// renderChassisID returns the text form of a chassis ID.
func renderChassisID(s ChassisIDSubtype, v []byte) (string, error) {
	switch s {
	case ChassisMACAddress:
		return renderMAC(v)
	case ChassisNetworkAddress:
		return renderNetworkAddress(v)
	}
	return renderName(v), nil
}

// renderPortID returns the text form of a port ID.
func renderPortID(s PortIDSubtype, v []byte) (string, error) {
	switch s {
	case PortMACAddress:
		return renderMAC(v)
	case PortNetworkAddress:
		return renderNetworkAddress(v)
	case PortAgentCircuitID:
		return hexColon(v), nil
	}
	return renderName(v), nil
}

func renderMAC(v []byte) (string, error) {
	if len(v) != 6 && len(v) != 8 {
		return "", fmt.Errorf("a MAC address of %d bytes, want 6 or 8", len(v))
	}
	return hexColon(v), nil
}

func renderNetworkAddress(v []byte) (string, error) {
	// Callers guarantee len(v) >= 1: an ID value is never empty.
	family, addr := v[0], v[1:]
	switch family {
	case familyIPv4:
		if len(addr) != 4 {
			return "", fmt.Errorf("an IPv4 address of %d bytes, want 4", len(addr))
		}
		return netip.AddrFrom4([4]byte(addr)).String(), nil
	case familyIPv6:
		if len(addr) != 16 {
			return "", fmt.Errorf("an IPv6 address of %d bytes, want 16", len(addr))
		}
		return netip.AddrFrom16([16]byte(addr)).String(), nil
	case family802:
		return renderMAC(addr)
	}
	return hexColon(v), nil
}

// renderName returns a name-like ID as text, or as hex when it is not
// printable.
func renderName(v []byte) string {
	t := bytes.TrimRight(v, "\x00")
	if len(t) > 0 && printable(t) {
		return string(t)
	}
	return hexColon(v)
}

// printable reports whether b is UTF-8 made only of printable characters
// (spaces included).
func printable(b []byte) bool {
	for len(b) > 0 {
		c := b[0]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			b = b[1:]
			continue
		}
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		if !unicode.IsPrint(r) {
			return false
		}
		b = b[n:]
	}
	return true
}

// hexColon renders bytes as lowercase hex pairs joined by colons.
func hexColon(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	buf := make([]byte, 0, len(v)*3-1)
	for i, c := range v {
		if i > 0 {
			buf = append(buf, ':')
		}
		buf = hex.AppendEncode(buf, []byte{c})
	}
	return string(buf)
}

// decodeText decodes a descriptive TLV (port description, system name,
// system description) for display.
func decodeText(v []byte) string {
	v = bytes.TrimRight(v, "\x00")
	plain := true
	for _, c := range v {
		if c < 0x20 || c >= 0x7f {
			plain = false
			break
		}
	}
	if plain {
		return string(v)
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return ' '
		case unicode.IsControl(r):
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(string(v), string(utf8.RuneError)))
}
