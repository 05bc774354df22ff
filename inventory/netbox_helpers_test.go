package inventory

import (
	"net/netip"
	"testing"

	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// noErr fails the test at once when err is not nil.
func noErr(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// The NetBox users of the tests: terraform applies the nodes file and is
// the binding author; fleetd records attestations; alice is an operator.
const (
	userTerraform = "terraform"
	userFleetd    = "fleetd"
	userAlice     = "alice"
)

// fleetTopology is the folly cluster's.
var fleetTopology = Topology{NodeCIDR: netip.MustParsePrefix("10.40.0.0/24"), APIServerIP: netip.MustParseAddr("10.40.0.10")}

// fleetNodes is a nodes file of three nodes: a control plane and two
// workers, the second without an approved binding or disk serial.
const fleetNodes = `models:
  ms-01:
    manufacturer: Minisforum
    name: MS-01
    disk: /dev/nvme0n1
  nuc-13:
    manufacturer: ASUS
    name: NUC 13 Pro
classes:
  controlplane:
    type: controlplane
    installer_image: factory.talos.dev/installer/abc:v1.13.9
  worker:
    type: worker
    installer_image: factory.talos.dev/installer/abc:v1.13.9
nodes:
  cp-01:
    model: ms-01
    serial: MS01-0001
    class: controlplane
    switch_port: 1
    address: 10.40.0.10
    bmc: amt
    disk_serial: S6B0NL0W412345A
    approved_ek_rsa2048: ` + hashA + `
    approved_ek_eccp256: ` + hashB + `
  w-01:
    model: ms-01
    serial: MS01-0002
    class: worker
    switch_port: 5
    address: 10.40.0.21
    bmc: amt
    disk_serial: S6B0NL0W412346B
    approved_ek_rsa2048: ` + hashC + `
  w-02:
    model: nuc-13
    serial: G6NUC13-88121
    class: worker
    switch_port: 6
    address: 10.40.0.22
    bmc: none
    disk: /dev/nvme0n1
`

func parseNodes(t testing.TB, data string) *Inventory {
	t.Helper()
	inv, err := Parse("nodes.yaml", []byte(data), fleetTopology)
	noErr(t, err)
	return inv
}

// fleetNetBox is a netboxtest server with the folly site, a 48-port
// switch "usw" and the test users, checking every exchange against the
// schema when validate is set.
func fleetNetBox(t testing.TB, validate bool) *netboxtest.Server {
	t.Helper()
	cfg := &netboxtest.Config{Users: []string{"admin", userTerraform, userFleetd, userAlice}}
	if validate {
		cfg.Validate = t
	}
	srv := netboxtest.New(cfg)
	t.Cleanup(srv.Close)
	if sw, err := srv.AddSwitch(netboxtest.Switch{Site: "folly", Name: "usw", Ports: 48}); err != nil || sw != uswID {
		t.Fatalf("AddSwitch = %d, %v; want %d", sw, err, uswID)
	}
	return srv
}

// uswID is the ID of fleetNetBox's switch, the first device it makes.
const uswID = 1

// client returns a client of srv as the named user.
func client(t testing.TB, srv *netboxtest.Server, user string, cfg *NetBoxConfig) *NetBox {
	t.Helper()
	c := NetBoxConfig{Site: "folly", Switch: "usw", BindingAuthor: userTerraform}
	if cfg != nil {
		c = *cfg
	}
	nb, err := NewNetBox(srv.URL, srv.Token(user), &c)
	noErr(t, err)
	return nb
}

// applied plans and applies inv as terraform and returns the plan.
func applied(t testing.TB, nb *NetBox, inv *Inventory) *Plan {
	t.Helper()
	p, err := nb.Plan(t.Context(), inv)
	noErr(t, err)
	noErr(t, nb.Apply(t.Context(), p))
	return p
}

// deviceOf reads device id through nb.
func deviceOf(t *testing.T, nb *NetBox, id int64) Device {
	t.Helper()
	d, err := nb.Device(t.Context(), id)
	noErr(t, err)
	return d
}

// byName indexes devices by host name.
func byName(devs []Device) map[string]Device {
	m := map[string]Device{}
	for _, d := range devs {
		m[d.Name] = d
	}
	return m
}

// wideTopology is the cluster of the generated nodes files (nodesFile).
var wideTopology = Topology{NodeCIDR: netip.MustParsePrefix("10.0.0.0/8"), APIServerIP: netip.MustParseAddr("10.0.0.1")}
