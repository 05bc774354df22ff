package lldpwait

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
)

// Frames for tests, built from IEEE 802.1AB-2016 clause 8.

var (
	switchMAC   = []byte{0x74, 0x83, 0xc2, 0x01, 0x02, 0x03}
	hostMAC     = []byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	dstNearest  = nearestBridge[:]
	dstNonTPMR  = []byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x03}
	dstCustomer = []byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x00}
	dstBcast    = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// rawTLV returns a TLV whose header claims length, whatever len(v) is.
func rawTLV(typ, length int, v []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(typ)<<9|uint16(length)&0x1ff)
	return append(b, v...)
}

// tlv returns a TLV of type typ holding v.
func tlv(typ int, v ...byte) []byte { return rawTLV(typ, len(v), v) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func withSubtype(sub byte, v []byte) []byte { return append([]byte{sub}, v...) }

func chassisTLV(sub ChassisIDSubtype, v []byte) []byte {
	return tlv(tlvChassisID, withSubtype(byte(sub), v)...)
}

func portTLV(sub PortIDSubtype, v []byte) []byte {
	return tlv(tlvPortID, withSubtype(byte(sub), v)...)
}

func ttlTLV(seconds uint16) []byte {
	return tlv(tlvTTL, binary.BigEndian.AppendUint16(nil, seconds)...)
}

func textTLV(typ int, s string) []byte { return tlv(typ, []byte(s)...) }

func endTLV() []byte { return []byte{0, 0} }

// mgmtTLV returns a Management Address TLV.
func mgmtTLV(family byte, addr []byte, ifSub byte, ifNum uint32, oid []byte) []byte {
	v := []byte{byte(1 + len(addr)), family}
	v = append(v, addr...)
	v = append(v, ifSub)
	v = binary.BigEndian.AppendUint32(v, ifNum)
	v = append(v, byte(len(oid)))
	v = append(v, oid...)
	return tlv(tlvManagementAddr, v...)
}

// mandatory returns chassis MAC, port ID local name, TTL 120.
func mandatory(port string) []byte {
	return cat(chassisTLV(ChassisMACAddress, switchMAC), portTLV(PortLocal, []byte(port)), ttlTLV(120))
}

// ethFrame wraps an LLDPDU in an untagged Ethernet header.
func ethFrame(dst []byte, pdu []byte) []byte {
	return cat(dst, switchMAC, []byte{0x88, 0xcc}, pdu)
}

// lldpFrame wraps an LLDPDU for the nearest-bridge address.
func lldpFrame(pdu []byte) []byte { return ethFrame(dstNearest, pdu) }

// unifiFrame is shaped like a UniFi switch's frame: chassis MAC, port ID
// subtype local "Port N", port description, system name, capabilities, an
// IPv4 management address, End.
func unifiFrame(port string) []byte {
	return lldpFrame(cat(
		mandatory(port),
		textTLV(tlvPortDescription, port),
		textTLV(tlvSystemName, "USW-Pro-24"),
		textTLV(tlvSystemDesc, "USW-Pro-24-PoE, 7.1.26.15869"),
		tlv(tlvCapabilities, 0x00, 0x04, 0x00, 0x04),
		mgmtTLV(familyIPv4, []byte{192, 0, 2, 10}, 2, 1, nil),
		endTLV(),
	))
}

// lldpdFrameWith is a frame lldpd 1.0.16 sent from interface eth4 with
// "configure lldp tx-interval 1" and "configure system hostname sw-test",
// as an AF_PACKET socket read it, with the port ID TLV portID (in hex):
// lldpdPortMAC by default, lldpdPortIfname after "configure lldp
// portidsubtype ifname", lldpdPortLocal7 after "configure ports eth4 lldp
// portidsubtype local Port 7". The interface name is in the port
// description whatever the port ID.
func lldpdFrameWith(portID string) []byte {
	return mustHex(strings.Join([]string{
		"0180c200000e120e7d9e518d88cc",
		"020704120e7d9e518d", portID, "06020004",
		"0a0773772d74657374",
		"0c5644656269616e20474e552f4c696e75782031322028626f6f6b776f726d29204c696e757820362e31382e34342d66632d763130343520233120534d5020505245454d50545f44594e414d4943204030207838365f3634",
		"0e04009c0080",
		"10181102fe80000000000000100e7dfffe9e518d020000000600",
		"080465746834",
		"fe0900120f030100000000", "fe0900120f010080000036",
		"0000",
	}, ""))
}

// Port ID TLVs lldpd sends (lldpdFrameWith).
const (
	lldpdPortMAC    = "040703120e7d9e518d" // MAC address
	lldpdPortIfname = "04050565746834"     // interface name "eth4"
	lldpdPortLocal7 = "040707506f72742037" // locally assigned "Port 7"
)

// lldpdFrame is the frame lldpd sends by default: port ID subtype MAC,
// interface name in the port description.
var lldpdFrame = lldpdFrameWith(lldpdPortMAC)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// mustParse parses frame, failing t if Parse refuses it.
func mustParse(t *testing.T, frame []byte) *Neighbor {
	t.Helper()
	n, err := Parse(frame)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return n
}
