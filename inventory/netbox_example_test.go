package inventory_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// Plan and apply a nodes file to NetBox, then do what fleetd does after an
// attestation: read the binding, record what the attestation proved.
func ExampleNetBox() {
	ctx := context.Background()
	srv := netboxtest.New(&netboxtest.Config{Users: []string{"terraform", "fleetd"}})
	defer srv.Close()
	if _, err := srv.AddSwitch(netboxtest.Switch{Site: "folly", Name: "usw", Ports: 8}); err != nil {
		panic(err)
	}
	topo, err := inventory.ParseTopology("cluster-topology.json", []byte(`{"K8S_NODE_CIDR": "10.40.0.0/24", "API_SERVER_IP": "10.40.0.10"}`))
	if err != nil {
		panic(err)
	}
	inv, err := inventory.Parse("nodes.yaml", []byte(`models:
  ms-01: {manufacturer: Minisforum, name: MS-01, disk: /dev/nvme0n1}
classes:
  worker: {type: worker, installer_image: "factory.talos.dev/installer/abc:v1.13.9"}
nodes:
  w-01:
    model: ms-01
    serial: MS01-0001
    class: worker
    switch_port: 5
    address: 10.40.0.21
    bmc: amt
    disk_serial: S6B0NL0W412345A
    approved_ek_rsa2048: 1b5bbe2e96054f7bc34ebe7ba9a4a9eac5611c6879285ceff6094fa556af485c
`), topo)
	if err != nil {
		panic(err)
	}

	// fleetctl apply, as the binding author.
	terraform, err := inventory.NewNetBox(srv.URL, srv.Token("terraform"), &inventory.NetBoxConfig{Site: "folly", Switch: "usw"})
	if err != nil {
		panic(err)
	}
	plan, err := terraform.Plan(ctx, inv)
	if err != nil {
		panic(err)
	}
	add, change := plan.Counts()
	fmt.Printf("plan: %d to add, %d to change\n", add, change)
	if err := terraform.Apply(ctx, plan); err != nil {
		panic(err)
	}

	// fleetd, which trusts the bindings terraform writes.
	fleetd, err := inventory.NewNetBox(srv.URL, srv.Token("fleetd"), &inventory.NetBoxConfig{BindingAuthor: "terraform", Switch: "usw"})
	if err != nil {
		panic(err)
	}
	b, err := fleetd.BindingBySerial(ctx, "MS01-0001")
	if err != nil {
		panic(err)
	}
	fmt.Printf("binding of %s: %s... authored %v\n", b.Name, b.ApprovedEKHash[:8], b.Authored)
	mac, _ := net.ParseMAC("58:47:ca:71:0a:01")
	err = fleetd.RecordAttestation(ctx, b.ID, inventory.Attestation{
		MAC: mac, EKHash: b.ApprovedEKHash, SwitchPort: 5, At: time.Now(), Verdict: "attested",
	})
	if err != nil {
		panic(err)
	}
	d, err := fleetd.DeviceBySerial(ctx, "MS01-0001")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %s, %s, port %d, MAC %s, %s\n", d.Name, d.Status, d.Address, d.SwitchPort, d.MAC, d.AttestVerdict)
	// Output:
	// plan: 19 to add, 0 to change
	// binding of w-01: 1b5bbe2e... authored true
	// w-01: planned, 10.40.0.21/24, port 5, MAC 58:47:ca:71:0a:01, attested
}
