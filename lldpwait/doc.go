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
// Wait returns the first valid LLDP frame sent to the nearest-bridge
// address, which no bridge forwards, so it comes from the device at the
// other end of the cable; after the wait (DefaultWait, the runbook's 35
// seconds) it returns an error wrapping ErrTimeout. Context cancellation
// and Listener.Close end a blocked Wait.
//
// Parse decodes an Ethernet frame, and ParseLLDPDU an LLDPDU, per IEEE
// 802.1AB-2016. Malformed, truncated or hostile input gives an error
// wrapping ErrMalformed, never a panic or a read outside the input.
//
// Switches name ports differently ("Port 5", "eth4", "ge-0/0/5", or a MAC
// as port ID with the name in the port description): a PortConfig holds
// the ordered Rules that Port applies; DefaultRules covers UniFi switches
// and the common subtypes.
//
// Check and CheckRecorded return nil when the machine is on its declared
// port, and otherwise an error whose text is the runbook's journal line:
// "on port N, expected M" (*PortError, ErrWrongPort), "attested no switch
// port" (ErrNoAttestedPort) or "recorded no attested switch port"
// (ErrNoRecordedPort).
//
// Listen needs CAP_NET_RAW and works on Linux only; elsewhere Listen and
// Wait return an error wrapping errors.ErrUnsupported. Parse, Port and
// Check need no privilege, work everywhere and use no cgo.
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
