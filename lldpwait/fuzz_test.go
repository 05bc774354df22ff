package lldpwait

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParse feeds Parse arbitrary frames. Parse must not panic; it must
// return either a Neighbor or an error matching ErrNotLLDP or ErrMalformed;
// a Neighbor must satisfy the standard's invariants, equal what
// ParseLLDPDU gives for the payload, keep no memory of the frame, and be
// safe to name a port from; rebuilt from the six fields a machine's claim
// carries, it names the same port. The seed corpus is in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add(lldpdFrame)
	f.Add(unifiFrame("Port 5"))
	f.Add(lldpFrame(mandatory("5")))
	f.Add(lldpFrame(cat(mandatory("Port 5"), mgmtTLV(familyIPv4, []byte{192, 0, 2, 1}, 2, 1, []byte{0x2b}), endTLV())))
	f.Add(lldpFrame(rawTLV(tlvChassisID, 511, []byte{4})))
	f.Add(lldpFrame(cat(chassisTLV(ChassisNetworkAddress, []byte{familyIPv4, 192, 0, 2, 1}),
		portTLV(PortInterfaceName, []byte("ge-0/0/5")), ttlTLV(120), textTLV(tlvSystemName, "core-1"))))
	f.Fuzz(func(t *testing.T, frame []byte) {
		orig := bytes.Clone(frame)
		n, err := Parse(frame)
		if !bytes.Equal(frame, orig) {
			t.Fatal("Parse changed its input")
		}
		if err != nil {
			if n != nil {
				t.Fatalf("Parse returned a Neighbor with error %v", err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNotLLDP) {
				t.Fatalf("error matches neither ErrMalformed nor ErrNotLLDP: %v", err)
			}
			return
		}
		if n.ChassisIDSubtype < ChassisComponent || n.ChassisIDSubtype > ChassisLocal ||
			n.PortIDSubtype < PortInterfaceAlias || n.PortIDSubtype > PortLocal {
			t.Fatalf("subtypes %d/%d outside the standard", n.ChassisIDSubtype, n.PortIDSubtype)
		}
		if n.ChassisID == "" || n.PortID == "" || len(n.ChassisIDRaw) == 0 || len(n.PortIDRaw) == 0 ||
			len(n.ChassisIDRaw) > 255 || len(n.PortIDRaw) > 255 {
			t.Fatalf("IDs %q (%d bytes), %q (%d bytes)", n.ChassisID, len(n.ChassisIDRaw), n.PortID, len(n.PortIDRaw))
		}
		for _, s := range []string{n.ChassisID, n.PortID} {
			if !printable([]byte(s)) {
				t.Fatalf("ID %q is not printable", s)
			}
		}
		if !bytes.Equal(n.Destination, frame[:6]) || !bytes.Equal(n.Source, frame[6:12]) {
			t.Fatalf("addresses %v %v", n.Destination, n.Source)
		}
		fromPDU, err := ParseLLDPDU(frame[ethHeaderLen:])
		if err != nil {
			t.Fatalf("Parse accepted the frame, ParseLLDPDU refused its payload: %v", err)
		}
		fromPDU.Source, fromPDU.Destination = n.Source, n.Destination
		opts := cmpopts.EquateComparable(netip.Addr{})
		if diff := cmp.Diff(n, fromPDU, opts); diff != "" {
			t.Fatalf("Parse and ParseLLDPDU differ:\n%s", diff)
		}
		for i := range frame {
			frame[i] ^= 0xff
		}
		if diff := cmp.Diff(n, fromPDU, opts); diff != "" {
			t.Fatalf("the Neighbor changed with its frame:\n%s", diff)
		}
		p, err := Port(n, nil)
		if err == nil && (p < 1 || p > MaxPort) {
			t.Fatalf("Port = %d", p)
		}
		// The claim carries the subtypes as plain uint8s, and strings.
		rebuilt := &Neighbor{
			ChassisIDSubtype: ChassisIDSubtype(uint8(n.ChassisIDSubtype)),
			ChassisID:        n.ChassisID,
			PortIDSubtype:    PortIDSubtype(uint8(n.PortIDSubtype)),
			PortID:           n.PortID,
			PortDescription:  n.PortDescription,
			SystemName:       n.SystemName,
		}
		if q, qerr := Port(rebuilt, nil); q != p || (qerr == nil) != (err == nil) {
			t.Fatalf("Port(rebuilt from the claim's fields) = %d, %v; Port(parsed) = %d, %v", q, qerr, p, err)
		}
		_ = Check(n, 5, nil)
	})
}
