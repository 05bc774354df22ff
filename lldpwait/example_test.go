package lldpwait_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"

	"github.com/fleetkit/fleet/lldpwait"
)

// A frame as a UniFi switch sends it from port 5: chassis ID a MAC
// address, port ID locally assigned "Port 5", TTL 120 s, system name.
var unifiFrame, _ = hex.DecodeString("" +
	"0180c200000e" + "7483c2010203" + "88cc" + // to the nearest bridge, from the switch, LLDP
	"020704" + "7483c2010203" + // chassis ID, MAC address
	"040707" + "506f72742035" + // port ID, locally assigned, "Port 5"
	"06020078" + // TTL 120
	"0a0a" + "5553572d50726f2d3234" + // system name "USW-Pro-24"
	"0000") // End

func ExampleParse() {
	n, err := lldpwait.Parse(unifiFrame)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("chassis %s %s\n", n.ChassisIDSubtype, n.ChassisID)
	fmt.Printf("port %s %q\n", n.PortIDSubtype, n.PortID)
	fmt.Println("system", n.SystemName, "TTL", n.TTL)
	port, err := lldpwait.Port(n, nil)
	fmt.Println("switch port", port, err)

	_, err = lldpwait.Parse(unifiFrame[:20])
	fmt.Println(errors.Is(err, lldpwait.ErrMalformed), err)
	// Output:
	// chassis MAC address 74:83:c2:01:02:03
	// port locally assigned "Port 5"
	// system USW-Pro-24 TTL 2m0s
	// switch port 5 <nil>
	// true malformed LLDP frame: TLV type 1 at offset 0 claims 7 bytes, 4 remain
}

func ExampleCheck() {
	n, _ := lldpwait.Parse(unifiFrame) // port 5

	fmt.Println(lldpwait.Check(n, 5, nil))
	fmt.Println(lldpwait.Check(n, 7, nil))
	fmt.Println(lldpwait.Check(nil, 7, nil)) // no LLDP frame within the wait
	// Output:
	// <nil>
	// on port 5, expected 7
	// attested no switch port
}

func ExampleCheckRecorded() {
	fmt.Println(lldpwait.CheckRecorded(5, 5))
	fmt.Println(lldpwait.CheckRecorded(4, 5))
	err := lldpwait.CheckRecorded(0, 5) // NetBox's attested_switch_port is empty
	fmt.Println(err, errors.Is(err, lldpwait.ErrNoRecordedPort))
	// Output:
	// <nil>
	// on port 4, expected 5
	// recorded no attested switch port true
}

// A switch family whose port IDs are ifIndexes 1001, 1002, ... and whose
// system names begin "core-": its own rule first, then the defaults.
func ExamplePortConfig() {
	cfg := &lldpwait.PortConfig{Rules: append([]lldpwait.Rule{{
		Name:           "core ifIndex",
		SystemName:     regexp.MustCompile(`^core-`),
		PortIDSubtypes: []lldpwait.PortIDSubtype{lldpwait.PortLocal},
		Field:          lldpwait.FieldPortID,
		Pattern:        regexp.MustCompile(`^10(\d\d)$`),
	}}, lldpwait.DefaultRules()...)}
	if err := cfg.Validate(); err != nil {
		fmt.Println(err)
		return
	}

	core := &lldpwait.Neighbor{PortIDSubtype: lldpwait.PortLocal, PortID: "1012", SystemName: "core-1"}
	fmt.Println(lldpwait.Port(core, cfg))
	unifi := &lldpwait.Neighbor{PortIDSubtype: lldpwait.PortLocal, PortID: "Port 12", SystemName: "USW-Pro-24"}
	fmt.Println(lldpwait.Port(unifi, cfg))
	// Output:
	// 12 <nil>
	// 12 <nil>
}

// On the machine: listen early, wait when the port is needed. Needs Linux
// and CAP_NET_RAW, so this example is not run.
func ExampleListener() {
	l, err := lldpwait.Listen("eth0", nil) // waits 35 s
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	n, err := l.Wait(context.Background())
	switch {
	case errors.Is(err, lldpwait.ErrTimeout):
		fmt.Println("no switch port to attest")
	case err != nil:
		fmt.Println(err)
	default:
		fmt.Println(n.SystemName, n.PortID)
	}
}
