package lldpwait

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func nb(sub PortIDSubtype, id, desc string) *Neighbor {
	return &Neighbor{
		ChassisIDSubtype: ChassisMACAddress,
		ChassisID:        "74:83:c2:01:02:03",
		PortIDSubtype:    sub,
		PortID:           id,
		PortDescription:  desc,
	}
}

// TestPortDefaultRules names ports by the default rules; want 0: no port
// is named.
func TestPortDefaultRules(t *testing.T) {
	const mac = "74:83:c2:01:02:03"
	tests := []struct {
		name string
		n    *Neighbor
		want int
	}{
		// UniFi switches: port ID subtype local "Port N".
		{"UniFi Port N", nb(PortLocal, "Port 5", "Port 5"), 5},
		{"UniFi Port N, port renamed", nb(PortLocal, "Port 38", "4_R03_S43"), 38},
		{"UniFi Port N, renamed like an interface", nb(PortLocal, "Port 7", "node5"), 7},
		{"Port N any case, no space", nb(PortLocal, "port12", ""), 12},
		{"Port N as interface name", nb(PortInterfaceName, "PORT 3", ""), 3},
		{"bare number, local", nb(PortLocal, "5", ""), 5},
		{"bare number, local, described Port N", nb(PortLocal, "5", "Port 5"), 5},
		{"bare number, local, described by name", nb(PortLocal, "5", "ceph-a"), 5},

		// Interface names.
		{"eth4 is port 5", nb(PortInterfaceName, "eth4", ""), 5},
		{"eth0 is port 1", nb(PortInterfaceName, "eth0", ""), 1},
		{"0/5", nb(PortInterfaceName, "0/5", ""), 5},
		{"1/0/5", nb(PortInterfaceName, "1/0/5", ""), 5},
		{"ge-0/0/5", nb(PortInterfaceName, "ge-0/0/5", ""), 5},
		{"xe-0/0/48", nb(PortInterfaceName, "xe-0/0/48", ""), 48},
		{"Ethernet5", nb(PortInterfaceName, "Ethernet5", ""), 5},
		{"Ethernet1/5", nb(PortInterfaceName, "Ethernet1/5", ""), 5},
		{"GigabitEthernet1/0/5", nb(PortInterfaceName, "GigabitEthernet1/0/5", ""), 5},
		{"Gi1/0/5", nb(PortInterfaceName, "Gi1/0/5", ""), 5},
		{"swp5", nb(PortInterfaceName, "swp5", ""), 5},
		{"interface name 5", nb(PortInterfaceName, "5", ""), 5},
		{"port component 1/5", nb(PortComponent, "1/5", ""), 5},
		{"interface name unreadable, description Port N", nb(PortInterfaceName, "uplink", "Port 3"), 3},
		{"interface name with alias description", nb(PortInterfaceName, "eth4", "rack2 node5"), 5},

		// MAC address as port ID, name in the description (lldpd's default).
		{"MAC port ID, description eth4", nb(PortMACAddress, mac, "eth4"), 5},
		{"MAC port ID, description GigabitEthernet1/0/7", nb(PortMACAddress, mac, "GigabitEthernet1/0/7"), 7},
		{"MAC port ID, description Port 9", nb(PortMACAddress, mac, "Port 9"), 9},
		{"network address port ID, description 0/2", nb(PortNetworkAddress, "192.0.2.1", "0/2"), 2},

		// Locally assigned IDs that are not port numbers.
		{"Juniper ifIndex, description ge-0/0/5", nb(PortLocal, "506", "ge-0/0/5"), 5},
		{"local interface name g1", nb(PortLocal, "g1", ""), 1},
		{"local Ethernet112, description not a name", nb(PortLocal, "Ethernet112", "ARISTA01T1:Ethernet1"), 112},
		{"local eth4", nb(PortLocal, "eth4", ""), 5},

		// No port named: ErrPortUnnamed, quoting the port ID.
		{"MAC port ID, no description", nb(PortMACAddress, "74:83:c2:01:02:03", ""), 0},
		{"interface name not a port", nb(PortInterfaceName, "uplink", ""), 0},
		{"interface alias is not read as a name", nb(PortInterfaceAlias, "server-5", ""), 0},
		{"agent circuit ID", nb(PortAgentCircuitID, "01:04:00:05", ""), 0},
		{"port 0", nb(PortLocal, "Port 0", ""), 0},
		{"Ethernet0", nb(PortInterfaceName, "Ethernet0", ""), 0},
		{"port number above MaxPort", nb(PortLocal, "Port 65536", ""), 0},
		{"port number overflowing int", nb(PortLocal, "Port 99999999999999999999999", ""), 0},
		{"trailing text", nb(PortLocal, "Port 5 (uplink)", ""), 0},
		{"breakout suffix", nb(PortInterfaceName, "xe-0/0/5:1", ""), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Port(tt.n, nil)
			switch {
			case tt.want == 0 && !errors.Is(err, ErrPortUnnamed):
				t.Fatalf("Port = %d, %v; want ErrPortUnnamed", got, err)
			case tt.want == 0 && !strings.Contains(err.Error(), `port ID "`+tt.n.PortID+`"`):
				t.Errorf("error %q does not quote the port ID", err)
			case tt.want != 0 && (err != nil || got != tt.want):
				t.Errorf("Port(%s %q, description %q) = %d, %v; want %d", tt.n.PortIDSubtype, tt.n.PortID, tt.n.PortDescription, got, err, tt.want)
			}
		})
	}
}

func TestPortCustomRules(t *testing.T) {
	// A switch family that sends ifIndex 1001.. as a local port ID, with
	// no useful description, and a chassis whose ports count from 0.
	cfg := &PortConfig{Rules: append([]Rule{
		{
			Name:           "core ifIndex",
			SystemName:     regexp.MustCompile(`^core-`),
			PortIDSubtypes: []PortIDSubtype{PortLocal},
			Field:          FieldPortID,
			Pattern:        regexp.MustCompile(`^10(\d\d)$`),
		},
		{
			Name:      "zero-based chassis",
			ChassisID: regexp.MustCompile(`^00:11:22:`),
			Field:     FieldPortDescription,
			Pattern:   regexp.MustCompile(`^p(\d+)$`),
			Offset:    1,
		},
	}, DefaultRules()...)}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	core := nb(PortLocal, "1005", "")
	core.SystemName = "core-1"
	other := nb(PortLocal, "1005", "")
	other.SystemName = "edge-1"
	zero := nb(PortMACAddress, "00:11:22:33:44:55", "p0")
	zero.ChassisID = "00:11:22:aa:bb:cc"
	elsewhere := nb(PortMACAddress, "00:11:22:33:44:55", "p0")
	// Without the defaults, only the custom rules apply; an empty
	// PortConfig means the defaults. No frame names no port.
	only := &PortConfig{Rules: cfg.Rules[:2]}
	for _, tt := range []struct {
		name string
		cfg  *PortConfig
		n    *Neighbor
		want int
		err  error
	}{
		{"system name matches", cfg, core, 5, nil},
		{"system name differs, defaults apply", cfg, other, 1005, nil},
		{"chassis matches, offset applied", cfg, zero, 1, nil},
		{"UniFi still named by the defaults", cfg, nb(PortLocal, "Port 8", ""), 8, nil},
		{"chassis differs", cfg, elsewhere, 0, ErrPortUnnamed},
		{"custom rules only", only, nb(PortLocal, "Port 8", ""), 0, ErrPortUnnamed},
		{"empty PortConfig", &PortConfig{}, nb(PortLocal, "Port 8", ""), 8, nil},
		{"no neighbour, default rules", nil, nil, 0, ErrNoAttestedPort},
	} {
		if got, err := Port(tt.n, tt.cfg); got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("%s: Port = %d, %v; want %d, %v", tt.name, got, err, tt.want, tt.err)
		}
	}
}

func TestPortBadRules(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
		says string
	}{
		{"zero Field", Rule{Name: "r", Pattern: regexp.MustCompile(`(\d+)`)}, `"r": Field 0`},
		{"no Pattern", Rule{Name: "r", Field: FieldPortID}, `"r": no Pattern`},
		{"no capture group", Rule{Field: FieldPortID, Pattern: regexp.MustCompile(`^\d+$`)}, `has 0 capture groups`},
		{"two capture groups", Rule{Field: FieldPortDescription, Pattern: regexp.MustCompile(`^(\d+)/(\d+)$`)}, `has 2 capture groups`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &PortConfig{Rules: []Rule{tt.rule}}
			err := cfg.Validate()
			if !errors.Is(err, ErrBadRule) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Validate = %v; want ErrBadRule saying %q", err, tt.says)
			}
			if _, err := Port(nb(PortLocal, "5", ""), cfg); !errors.Is(err, ErrBadRule) {
				t.Errorf("Port = %v; want ErrBadRule", err)
			}
			if err := Check(nb(PortLocal, "5", ""), 5, cfg); !errors.Is(err, ErrBadRule) {
				t.Errorf("Check = %v; want ErrBadRule", err)
			}
		})
	}
	var nilCfg *PortConfig
	if err := nilCfg.Validate(); err != nil {
		t.Errorf("nil PortConfig: Validate = %v", err)
	}
}

func TestDefaultRulesFresh(t *testing.T) {
	r := DefaultRules()
	r[0].Pattern = regexp.MustCompile(`^(x)$`)
	r[0].PortIDSubtypes[0] = PortMACAddress
	if got, err := Port(nb(PortLocal, "Port 5", ""), nil); got != 5 || err != nil {
		t.Errorf("after changing a DefaultRules result, Port = %d, %v; want 5", got, err)
	}
	if DefaultRules()[0].Pattern.String() == `^(x)$` || DefaultRules()[0].PortIDSubtypes[0] != PortLocal {
		t.Error("DefaultRules returned a changed rule")
	}
}
