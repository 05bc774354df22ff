package lldpwait

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// EtherType is LLDP's Ethernet type.
const EtherType = 0x88cc

// ethHeaderLen is the length of an untagged Ethernet header: destination,
// source, type.
const ethHeaderLen = 14

// TLV types of IEEE 802.1AB-2016, 8.4.
const (
	tlvEnd             = 0
	tlvChassisID       = 1
	tlvPortID          = 2
	tlvTTL             = 3
	tlvPortDescription = 4
	tlvSystemName      = 5
	tlvSystemDesc      = 6
	tlvCapabilities    = 7
	tlvManagementAddr  = 8
	tlvOrgSpecific     = 127
)

var (
	// ErrNotLLDP is returned by Parse for a frame that is not an LLDP
	// frame: its Ethernet type is not 0x88cc.
	ErrNotLLDP = errors.New("not an LLDP frame")

	// ErrMalformed is returned by Parse and ParseLLDPDU for an LLDP frame
	// that breaks IEEE 802.1AB: truncated, mandatory TLVs missing or out of
	// order, a length outside the standard's bounds, a repeated TLV that may
	// appear once. The error's text says what is wrong and where.
	ErrMalformed = errors.New("malformed LLDP frame")
)

// Parse decodes an Ethernet frame, as an AF_PACKET raw socket reads it
// (destination, source, Ethernet type, LLDPDU; no frame check sequence),
// into a Neighbor.
//
// The frame must be untagged (as the kernel hands frames to a packet
// socket), with Ethernet type 0x88cc; errors.Is finds ErrNotLLDP otherwise. Parse accepts any destination address; Wait accepts
// only frames to the nearest-bridge group address 01:80:c2:00:00:0e. The
// LLDPDU is decoded as ParseLLDPDU does; errors.Is finds ErrMalformed for
// every way it can break the standard. Parse never reads outside frame and
// never panics, whatever frame holds; the Neighbor shares no memory with it.
func Parse(frame []byte) (*Neighbor, error) {
	if len(frame) < ethHeaderLen {
		return nil, fmt.Errorf("%w: %d bytes, shorter than an Ethernet header", ErrMalformed, len(frame))
	}
	if t := binary.BigEndian.Uint16(frame[12:14]); t != EtherType {
		return nil, fmt.Errorf("%w: Ethernet type %#04x, want %#04x", ErrNotLLDP, t, EtherType)
	}
	n, err := ParseLLDPDU(frame[ethHeaderLen:])
	if err != nil {
		return nil, err
	}
	n.Destination = bytes.Clone(frame[0:6])
	n.Source = bytes.Clone(frame[6:12])
	return n, nil
}

// ParseLLDPDU decodes an LLDPDU, the payload of an LLDP frame, into a
// Neighbor (whose Source and Destination stay nil).
//
// It enforces IEEE 802.1AB-2016, clause 8: the first three TLVs are Chassis
// ID, Port ID and Time To Live, in that order, each exactly once; chassis
// and port IDs carry a subtype the standard defines and 1 to 255 bytes of
// ID; a MAC address ID has 6 (or 8) bytes and an IPv4 or IPv6 network
// address ID its address's length; Port Description, System Name, System
// Description and System Capabilities appear at most once; every TLV fits in
// the LLDPDU; an End Of LLDPDU TLV, when present, has length 0 and ends the
// LLDPDU (bytes after it, such as Ethernet padding, are ignored). The End
// TLV itself may be missing, as the 2016 revision allows. Reserved TLV types
// (9 to 126) and organizationally specific TLVs are skipped. Every failure
// wraps ErrMalformed.
func ParseLLDPDU(pdu []byte) (*Neighbor, error) {
	n := new(Neighbor)
	if err := parseTLVs(n, pdu); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return n, nil
}

// parseTLVs decodes the TLVs of pdu into n, checking their order and
// count as ParseLLDPDU says.
func parseTLVs(n *Neighbor, pdu []byte) error {
	var (
		count int    // TLVs read
		seen  uint16 // bit t set once a TLV of type t (1 to 7) was read
	)
	for off := 0; off < len(pdu); {
		t, err := nextTLV(pdu, off)
		if err != nil {
			return err
		}
		off = t.offset + 2 + len(t.value)
		count++
		if want := mandatoryAt(count); want >= 0 && t.typ != want {
			return fmt.Errorf("TLV %d (offset %d) is type %d, want %s", count, t.offset, t.typ, tlvName(want))
		}
		if t.typ >= tlvChassisID && t.typ <= tlvCapabilities {
			bit := uint16(1) << t.typ
			if seen&bit != 0 {
				return fmt.Errorf("a second %s TLV at offset %d", tlvName(t.typ), t.offset)
			}
			seen |= bit
		}
		if t.typ == tlvEnd {
			if len(t.value) != 0 {
				//lint:ignore ST1005 "End Of LLDPDU" is the TLV's name in IEEE 802.1AB
				return fmt.Errorf("End Of LLDPDU TLV at offset %d has length %d, want 0", t.offset, len(t.value))
			}
			return nil // what follows is padding
		}
		if err := decodeTLV(n, t); err != nil {
			return err
		}
	}
	if count < 3 {
		return fmt.Errorf("LLDPDU ends after %d TLVs; chassis ID, port ID and time to live are mandatory", count)
	}
	return nil
}

// tlvAt is one TLV of an LLDPDU: its type, the offset of its header, and
// its value, which shares the LLDPDU's memory.
type tlvAt struct {
	typ    int
	offset int
	value  []byte
}

// nextTLV returns the TLV whose header is at offset off of pdu, which must
// hold all of it.
func nextTLV(pdu []byte, off int) (tlvAt, error) {
	if len(pdu)-off < 2 {
		return tlvAt{}, fmt.Errorf("1 byte left at offset %d, too short for a TLV header", off)
	}
	h := binary.BigEndian.Uint16(pdu[off:])
	typ, length := int(h>>9), int(h&0x1ff)
	if length > len(pdu)-off-2 {
		return tlvAt{}, fmt.Errorf("TLV type %d at offset %d claims %d bytes, %d remain", typ, off, length, len(pdu)-off-2)
	}
	return tlvAt{typ: typ, offset: off, value: pdu[off+2 : off+2+length]}, nil
}

// decodeTLV decodes t, a TLV other than End Of LLDPDU, into n. Reserved
// types are skipped, and so are organizationally specific TLVs, whose
// length it checks.
func decodeTLV(n *Neighbor, t tlvAt) error {
	v := t.value
	var err error
	switch t.typ {
	case tlvChassisID:
		n.ChassisIDSubtype, n.ChassisID, n.ChassisIDRaw, err = decodeChassisID(v)
	case tlvPortID:
		n.PortIDSubtype, n.PortID, n.PortIDRaw, err = decodePortID(v)
	case tlvTTL:
		if len(v) < 2 {
			return fmt.Errorf("time to live TLV has length %d, want 2", len(v))
		}
		n.TTL = time.Duration(binary.BigEndian.Uint16(v)) * time.Second
	case tlvPortDescription:
		n.PortDescription, err = decodeTextTLV(t)
	case tlvSystemName:
		n.SystemName, err = decodeTextTLV(t)
	case tlvSystemDesc:
		n.SystemDescription, err = decodeTextTLV(t)
	case tlvCapabilities:
		if len(v) != 4 {
			return fmt.Errorf("system capabilities TLV has length %d, want 4", len(v))
		}
		n.Capabilities = binary.BigEndian.Uint16(v[0:2])
		n.EnabledCapabilities = binary.BigEndian.Uint16(v[2:4])
	case tlvManagementAddr:
		a, err := parseManagementAddress(v)
		if err != nil {
			return fmt.Errorf("management address TLV at offset %d: %v", t.offset, err)
		}
		n.ManagementAddresses = append(n.ManagementAddresses, a)
	case tlvOrgSpecific:
		if len(v) < 4 {
			return fmt.Errorf("organizationally specific TLV at offset %d has length %d, want at least 4", t.offset, len(v))
		}
	}
	return err
}

// decodeChassisID decodes the value of a Chassis ID TLV: a subtype the
// standard defines and 1 to 255 bytes of ID, which it renders (and
// copies).
func decodeChassisID(v []byte) (ChassisIDSubtype, string, []byte, error) {
	if len(v) < 2 || len(v) > 256 {
		return 0, "", nil, fmt.Errorf("chassis ID TLV has length %d, want 2 to 256", len(v))
	}
	s := ChassisIDSubtype(v[0])
	if s < ChassisComponent || s > ChassisLocal {
		return 0, "", nil, fmt.Errorf("chassis ID subtype %d is reserved", v[0])
	}
	id, err := renderChassisID(s, v[1:])
	if err != nil {
		return 0, "", nil, fmt.Errorf("chassis ID (%s): %v", s, err)
	}
	return s, id, bytes.Clone(v[1:]), nil
}

// decodePortID decodes the value of a Port ID TLV: a subtype the standard
// defines and 1 to 255 bytes of ID, which it renders (and copies).
func decodePortID(v []byte) (PortIDSubtype, string, []byte, error) {
	if len(v) < 2 || len(v) > 256 {
		return 0, "", nil, fmt.Errorf("port ID TLV has length %d, want 2 to 256", len(v))
	}
	s := PortIDSubtype(v[0])
	if s < PortInterfaceAlias || s > PortLocal {
		return 0, "", nil, fmt.Errorf("port ID subtype %d is reserved", v[0])
	}
	id, err := renderPortID(s, v[1:])
	if err != nil {
		return 0, "", nil, fmt.Errorf("port ID (%s): %v", s, err)
	}
	return s, id, bytes.Clone(v[1:]), nil
}

// decodeTextTLV decodes a Port Description, System Name or System
// Description TLV: at most 255 bytes of text.
func decodeTextTLV(t tlvAt) (string, error) {
	if len(t.value) > 255 {
		return "", fmt.Errorf("%s TLV has length %d, want at most 255", tlvName(t.typ), len(t.value))
	}
	return decodeText(t.value), nil
}

// mandatoryAt returns the TLV type the standard requires as the i-th TLV
// (counting from 1), or -1 when any type may stand there.
func mandatoryAt(i int) int {
	switch i {
	case 1:
		return tlvChassisID
	case 2:
		return tlvPortID
	case 3:
		return tlvTTL
	}
	return -1
}

func tlvName(t int) string {
	switch t {
	case tlvEnd:
		return "End Of LLDPDU"
	case tlvChassisID:
		return "chassis ID (1)"
	case tlvPortID:
		return "port ID (2)"
	case tlvTTL:
		return "time to live (3)"
	case tlvPortDescription:
		return "port description"
	case tlvSystemName:
		return "system name"
	case tlvSystemDesc:
		return "system description"
	case tlvCapabilities:
		return "system capabilities"
	}
	return fmt.Sprintf("type %d", t)
}

// parseManagementAddress decodes the value of a Management Address TLV:
// address string length (subtype octet plus address, 2 to 32), address
// subtype, address, interface numbering subtype, interface number (4 bytes),
// OID string length (0 to 128), OID.
func parseManagementAddress(v []byte) (ManagementAddress, error) {
	var a ManagementAddress
	if len(v) < 9 || len(v) > 167 {
		return a, fmt.Errorf("length %d, want 9 to 167", len(v))
	}
	alen := int(v[0])
	if alen < 2 || alen > 32 {
		return a, fmt.Errorf("address string length %d, want 2 to 32", alen)
	}
	p := 1 + alen
	if p+6 > len(v) {
		return a, fmt.Errorf("address string of %d bytes leaves no room for the interface number and OID", alen)
	}
	a.Family = v[1]
	a.Raw = bytes.Clone(v[2:p])
	switch {
	case a.Family == familyIPv4 && len(a.Raw) == 4:
		a.Addr = netip.AddrFrom4([4]byte(a.Raw))
	case a.Family == familyIPv6 && len(a.Raw) == 16:
		a.Addr = netip.AddrFrom16([16]byte(a.Raw))
	case a.Family == familyIPv4:
		return a, fmt.Errorf("an IPv4 address of %d bytes, want 4", len(a.Raw))
	case a.Family == familyIPv6:
		return a, fmt.Errorf("an IPv6 address of %d bytes, want 16", len(a.Raw))
	}
	a.InterfaceSubtype = v[p]
	a.InterfaceNumber = binary.BigEndian.Uint32(v[p+1 : p+5])
	olen := int(v[p+5])
	p += 6
	if olen > 128 {
		return a, fmt.Errorf("OID string length %d, want at most 128", olen)
	}
	if p+olen != len(v) {
		return a, fmt.Errorf("OID string length %d, but %d bytes remain", olen, len(v)-p)
	}
	if olen > 0 {
		a.OID = bytes.Clone(v[p:])
	}
	return a, nil
}
