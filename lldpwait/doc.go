// Package lldpwait learns which switch port a machine is plugged into, from
// the LLDP frame the switch sends down the cable, and checks that port
// against the one the machine's entry declares.
//
// It has two users. On the machine (HookOS), Listen and Wait receive the
// switch's frame and return it as a Neighbor, whose fields the machine
// carries in its attestation claim. In fleetd, Port names the port number
// of a Neighbor (rebuilt from the claim) and Check compares it with the
// declared switch_port, returning the runbook's journal lines as errors.
//
// # Waiting for the frame
//
// Listen opens an AF_PACKET raw socket on one interface, bound to the LLDP
// Ethernet type (0x88cc), with a classic BPF program attached in the kernel
// before the socket is bound. The program accepts only frames of type
// 0x88cc sent to the nearest-bridge group address 01:80:c2:00:00:0e (the
// kernel has removed any VLAN tag by then),
// so other traffic is dropped in the kernel and never wakes the process.
// Bridges do not forward frames sent to that address: the frame Wait
// returns comes from the device at the other end of the cable. Listen joins
// that multicast group on the interface.
//
// Wait returns the first valid frame's Neighbor, or after the configured
// wait (35 seconds by default, as the runbook says) an error wrapping
// ErrTimeout. Context cancellation and Listener.Close end a blocked Wait.
//
// # Parsing
//
// Parse decodes an Ethernet frame, and ParseLLDPDU an LLDPDU, per IEEE
// 802.1AB-2016: chassis ID and port ID with their subtypes, time to live,
// port description, system name and description, capabilities and
// management addresses. The mandatory TLVs (chassis ID, port ID, time to
// live, in that order) are enforced; malformed, truncated or hostile input
// gives an error wrapping ErrMalformed, never a panic or a read outside the
// input. IDs are rendered as text by subtype (see Neighbor).
//
// # Port names
//
// Switches name ports differently: "Port 5" (UniFi), "5", "eth4", "0/5",
// "ge-0/0/5", "GigabitEthernet1/0/5", or a MAC address as port ID with the
// name in the port description. A PortConfig holds an ordered list of Rules,
// each choosing a field, a pattern with one capture group and an offset,
// optionally only for some system names, chassis IDs or port ID subtypes.
// DefaultRules covers UniFi switches and the common subtypes.
//
// # Checking
//
// Check and CheckRecorded return nil when the machine is on its declared
// port, and otherwise errors whose text is the runbook's journal line:
//
//   - "on port N, expected M" (*PortError, ErrWrongPort): the machine is on
//     another port.
//   - "attested no switch port" (ErrNoAttestedPort): the machine's claim
//     carried no port, because HookOS got no LLDP frame within the wait.
//   - "recorded no attested switch port" (ErrNoRecordedPort): fleetd, checking
//     later (e.g. at a desired_action run), finds no attested port recorded
//     for the device.
//
// # Privileges
//
// Listen needs CAP_NET_RAW. Parse, Port and Check need nothing.
//
// # Platforms
//
// Listen and Wait work on Linux only; elsewhere they return an error
// wrapping errors.ErrUnsupported. Parse, Port and Check work everywhere and
// use no cgo.
//
// # Use
//
// On the machine:
//
//	n, err := lldpwait.Wait(ctx, "eth0", nil) // 35 s
//	if errors.Is(err, lldpwait.ErrTimeout) {
//		// claim no switch port
//	}
//
// In fleetd:
//
//	err := lldpwait.Check(n, declaredPort, nil) // n nil: no port attested
//	// err.Error() is the journal line
package lldpwait
