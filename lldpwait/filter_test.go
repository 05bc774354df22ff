package lldpwait

import (
	"testing"

	"golang.org/x/net/bpf"
)

// TestFilterProgram runs the kernel filter in x/net/bpf's interpreter over
// frames it must accept and frames it must drop. The integration tests run
// the same program in the kernel.
func TestFilterProgram(t *testing.T) {
	vm, err := bpf.NewVM(filterInstructions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := filter(); err != nil {
		t.Fatalf("assemble: %v", err)
	}
	tests := []struct {
		name   string
		frame  []byte
		accept bool
	}{
		{"LLDP to the nearest bridge", unifiFrame("Port 5"), true},
		{"lldpd's frame", lldpdFrame, true},
		{"malformed LLDP to the nearest bridge (Wait parses it)", lldpFrame([]byte{0xff}), true},
		{"LLDP header alone", lldpFrame(nil), true},
		{"LLDP to the nearest non-TPMR bridge", ethFrame(dstNonTPMR, mandatory("Port 5")), false},
		{"LLDP to the nearest customer bridge", ethFrame(dstCustomer, mandatory("Port 5")), false},
		{"LLDP to broadcast", ethFrame(dstBcast, mandatory("Port 5")), false},
		{"LLDP to a unicast address", ethFrame(hostMAC, mandatory("Port 5")), false},
		{"LLDP to 01:80:c2:00:01:0e", ethFrame([]byte{0x01, 0x80, 0xc2, 0x00, 0x01, 0x0e}, mandatory("Port 5")), false},
		{"IPv4 to the nearest bridge", cat(dstNearest, switchMAC, []byte{0x08, 0x00}, make([]byte, 46)), false},
		{"ARP broadcast", cat(dstBcast, switchMAC, []byte{0x08, 0x06}, make([]byte, 46)), false},
		{"VLAN-tagged LLDP in the frame", cat(dstNearest, switchMAC, []byte{0x81, 0x00, 0x00, 0x05, 0x88, 0xcc}, mandatory("Port 5")), false},
		{"runt of 13 bytes", lldpFrame(nil)[:13], false},
		{"empty", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keep, err := vm.Run(tt.frame)
			if err != nil {
				t.Fatal(err)
			}
			if got := keep > 0; got != tt.accept {
				t.Errorf("filter keeps %d bytes; accept = %v, want %v", keep, got, tt.accept)
			}
			if tt.accept && keep != maxFrame+1 {
				t.Errorf("filter keeps %d bytes, want %d", keep, maxFrame+1)
			}
		})
	}
}
