package inventory_test

import (
	"fmt"

	"github.com/fleetkit/fleet/inventory"
)

func ExampleApprovalLines() {
	fmt.Print(inventory.ApprovalLines(
		"1b5bbe2e96054f7bc34ebe7ba9a4a9eac5611c6879285ceff6094fa556af485c",
		"8fcef54df4c28620c6043ddab91157dcff92bc0d571c008d267674d1228c42fc",
	))
	// Output:
	// approved_ek_rsa2048: 1b5bbe2e96054f7bc34ebe7ba9a4a9eac5611c6879285ceff6094fa556af485c
	// approved_ek_eccp256: 8fcef54df4c28620c6043ddab91157dcff92bc0d571c008d267674d1228c42fc
}

func ExampleParse() {
	topo, err := inventory.ParseTopology("cluster-topology.json",
		[]byte(`{"K8S_NODE_CIDR": "10.40.0.0/24", "API_SERVER_IP": "10.40.0.10"}`))
	if err != nil {
		panic(err)
	}
	_, err = inventory.Parse("nodes.yaml", []byte(`models:
  ms-01: {manufacturer: Minisforum, name: MS-01, disk: /dev/nvme0n1}
classes:
  worker: {type: worker, installer_image: "factory.talos.dev/installer/abc:v1.13.9"}
nodes:
  w-01:
    model: ms-01
    serial: MS01-0001
    class: worker
    switch_port: 5
    address: 10.40.1.21
    bmc: amt
    disk_seral: S6B0NL0W412345A
`), topo)
	fmt.Println(err)
	// Output:
	// nodes.yaml:11:14: node w-01: address 10.40.1.21 is outside K8S_NODE_CIDR 10.40.0.0/24
	// nodes.yaml:13:5: node w-01: unknown field "disk_seral" (did you mean "disk_serial"?)
}
