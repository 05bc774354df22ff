package lldpwait

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

func TestNextTLV(t *testing.T) {
	pdu := cat(ttlTLV(120), rawTLV(tlvSystemDesc, 511, []byte("x")))
	tests := []struct {
		name   string
		pdu    []byte
		off    int
		typ    int
		value  []byte
		reason string
	}{
		{name: "first", pdu: pdu, off: 0, typ: tlvTTL, value: []byte{0, 120}},
		{name: "empty value", pdu: endTLV(), off: 0, typ: tlvEnd, value: []byte{}},
		{name: "the largest length", pdu: rawTLV(tlvSystemDesc, 511, bytes.Repeat([]byte("x"), 511)), typ: tlvSystemDesc, value: bytes.Repeat([]byte("x"), 511)},
		{name: "past the end", pdu: pdu, off: 4, reason: "TLV type 6 at offset 4 claims 511 bytes, 1 remain"},
		{name: "half a header", pdu: []byte{0x0a}, off: 0, reason: "1 byte left at offset 0, too short for a TLV header"},
		{name: "one byte left", pdu: cat(ttlTLV(1), []byte{0}), off: 4, reason: "1 byte left at offset 4, too short for a TLV header"},
	}
	for _, tt := range tests {
		got, err := nextTLV(tt.pdu, tt.off)
		if tt.reason != "" {
			if err == nil || err.Error() != tt.reason {
				t.Errorf("%s: nextTLV = %+v, %v; want %q", tt.name, got, err, tt.reason)
			}
			continue
		}
		if err != nil || got.typ != tt.typ || got.offset != tt.off || !bytes.Equal(got.value, tt.value) {
			t.Errorf("%s: nextTLV = %+v, %v; want type %d at %d, value %x", tt.name, got, err, tt.typ, tt.off, tt.value)
		}
	}
}

func TestDecodeIDs(t *testing.T) {
	s, id, raw, err := decodeChassisID(withSubtype(byte(ChassisMACAddress), switchMAC))
	if err != nil || s != ChassisMACAddress || id != net.HardwareAddr(switchMAC).String() || !bytes.Equal(raw, switchMAC) {
		t.Errorf("decodeChassisID(MAC) = %v, %q, %x, %v", s, id, raw, err)
	}
	ps, pid, praw, err := decodePortID(withSubtype(byte(PortInterfaceName), []byte("Ethernet5")))
	if err != nil || ps != PortInterfaceName || pid != "Ethernet5" || string(praw) != "Ethernet5" {
		t.Errorf("decodePortID(name) = %v, %q, %q, %v", ps, pid, praw, err)
	}
	for _, tt := range []struct {
		name   string
		decode func([]byte) error
		v      []byte
		reason string
	}{
		{"chassis, subtype only", chassisErr, []byte{4}, "chassis ID TLV has length 1, want 2 to 256"},
		{"chassis, 256 bytes of ID", chassisErr, withSubtype(7, bytes.Repeat([]byte("c"), 256)), "chassis ID TLV has length 257, want 2 to 256"},
		{"chassis, 255 bytes of ID", chassisErr, withSubtype(7, bytes.Repeat([]byte("c"), 255)), ""},
		{"chassis, subtype 8", chassisErr, []byte{8, 'x'}, "chassis ID subtype 8 is reserved"},
		{"chassis, a short MAC", chassisErr, withSubtype(byte(ChassisMACAddress), switchMAC[:5]), "chassis ID (MAC address): "},
		{"port, nothing", portErr, nil, "port ID TLV has length 0, want 2 to 256"},
		{"port, subtype 8", portErr, []byte{8, 'x'}, "port ID subtype 8 is reserved"},
		{"port, subtype 7", portErr, []byte{7, 'x'}, ""},
	} {
		err := tt.decode(tt.v)
		if tt.reason == "" && err != nil || tt.reason != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.reason)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.reason)
		}
	}
}

func chassisErr(v []byte) error { _, _, _, err := decodeChassisID(v); return err }
func portErr(v []byte) error    { _, _, _, err := decodePortID(v); return err }

func TestDecodeTextTLV(t *testing.T) {
	for _, tt := range []struct {
		typ    int
		v      string
		want   string
		reason string
	}{
		{tlvSystemName, "leaf-01", "leaf-01", ""},
		{tlvPortDescription, strings.Repeat("d", 255), strings.Repeat("d", 255), ""},
		{tlvPortDescription, strings.Repeat("d", 256), "", "port description TLV has length 256, want at most 255"},
		{tlvSystemDesc, strings.Repeat("d", 511), "", "system description TLV has length 511, want at most 255"},
	} {
		got, err := decodeTextTLV(tlvAt{typ: tt.typ, value: []byte(tt.v)})
		if got != tt.want || (err == nil) != (tt.reason == "") || err != nil && err.Error() != tt.reason {
			t.Errorf("decodeTextTLV(type %d, %d bytes) = %q, %v; want %q, %q", tt.typ, len(tt.v), got, err, tt.want, tt.reason)
		}
	}
}
