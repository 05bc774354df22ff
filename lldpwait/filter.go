package lldpwait

import "golang.org/x/net/bpf"

// maxFrame is the largest frame Wait reads: a jumbo frame. A larger frame
// is skipped whole rather than parsed truncated.
const maxFrame = 9216

// nearestBridge is the nearest-bridge group address, 01:80:c2:00:00:0e
// (IEEE 802.1AB-2016, 7.1). No IEEE 802.1D or 802.1Q bridge forwards a frame
// sent to it, so such a frame comes from the device at the other end of the
// cable: the switch port this machine is plugged into.
var nearestBridge = [6]byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e}

// filterInstructions is the classic BPF program attached to the socket in
// the kernel. It accepts a frame only when its Ethernet type is 0x88cc and
// its destination is the nearest-bridge group address, keeping
// up to maxFrame+1 bytes of it (one more than Wait accepts, so that a
// larger frame shows as too large instead of arriving cut). Every other
// frame is dropped in the kernel, before it is queued to the socket, so it
// never wakes the process. A load past the end of a frame drops the frame.
// The kernel removes an 802.1Q tag before packet sockets and their filters
// see a frame, so an LLDP frame that arrives tagged is accepted as the
// untagged frame it carries; it still comes from the device at the other
// end of the cable.
func filterInstructions() []bpf.Instruction {
	const drop = 7 // index of the "ret #0" instruction
	return []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: 12, Size: 2}, // Ethernet type
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: EtherType, SkipTrue: drop - 2},
		/* 2 */ bpf.LoadAbsolute{Off: 0, Size: 4}, // destination, bytes 0-3
		/* 3 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x0180c200, SkipTrue: drop - 4},
		/* 4 */ bpf.LoadAbsolute{Off: 4, Size: 2}, // destination, bytes 4-5
		/* 5 */ bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x000e, SkipTrue: drop - 6},
		/* 6 */ bpf.RetConstant{Val: maxFrame + 1},
		/* 7 */ bpf.RetConstant{Val: 0},
	}
}

// filter returns filterInstructions assembled for the kernel.
func filter() ([]bpf.RawInstruction, error) {
	return bpf.Assemble(filterInstructions())
}
