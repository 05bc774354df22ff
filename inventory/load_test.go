package inventory

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/internal/deptest"
)

func FuzzLoad(f *testing.F) {
	f.Add([]byte(header + node("w-01", "approved_ek_rsa2048: "+hashA)))
	f.Add([]byte(header + node("w-01") + node("w-01")))
	f.Add([]byte("nodes:\n  a: &x {model: m}\n  b: *x\n  c:\n    <<: [*x, *x]\n"))
	f.Add([]byte("models: [1]\nclasses: 5\nnodes: ~\n"))
	f.Add([]byte("a: 'b''c'\n\"d\": e # f\n"))
	f.Add([]byte(strings.Replace(header, "    type: worker\n", "    type: worker\n    secure_boot: required\n", 1) + node("w-01")))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := Parse("nodes.yaml", data, fleetTopology)
		if (inv == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v: want exactly one of them", inv, err)
		}
		if err != nil {
			for _, p := range err.(Problems) {
				if p.File != "nodes.yaml" || p.Text == "" {
					t.Fatalf("malformed problem %#v", p)
				}
			}
			return
		}
		// What validates holds what validation promises.
		seen := map[netip.Addr]bool{}
		for _, n := range inv.Nodes {
			if !validHostName(n.Name) || !fleetTopology.NodeCIDR.Contains(n.Address) || seen[n.Address] {
				t.Fatalf("validated node %+v breaks a rule", n)
			}
			seen[n.Address] = true
			if _, ok := inv.Models[n.Model]; !ok {
				t.Fatalf("node %s has unknown model %q", n.Name, n.Model)
			}
		}
	})
}

// nodesFile generates a valid nodes file of n nodes, in the shape of the
// example inventory.
func nodesFile(n int) []byte {
	var sb strings.Builder
	sb.WriteString(strings.Replace(header,
		"  controlplane: {type: controlplane, installer_image: \"factory.talos.dev/installer/abc:v1.13.9\"}\n",
		"  controlplane:\n    type: controlplane\n    installer_image: factory.talos.dev/installer/abc:v1.13.9\n", 1))
	for i := range n {
		fmt.Fprintf(&sb, `  node-%05d:
    model: ms-01
    serial: SN%08d
    class: worker
    switch_port: %d
    address: 10.%d.%d.%d
    bmc: amt
    disk: /dev/nvme0n1
    disk_serial: DS%08d
    approved_ek_rsa2048: %064x
    approved_ek_eccp256: %064x
`, i, i, i+1, 40+(i+1)>>16, ((i+1)>>8)&0xff, (i+1)&0xff, i, 2*i+1, 2*i+2)
	}
	return []byte(sb.String())
}

func TestLoadGenerated(t *testing.T) {
	data := nodesFile(300)
	if _, ok := scanBlockYAML(data); !ok {
		t.Fatal("the generated file is outside the fast scanner's subset")
	}
	inv, err := Parse("nodes.yaml", data, wideTopology)
	noErr(t, err)
	if len(inv.Nodes) != 300 {
		t.Fatalf("%d nodes", len(inv.Nodes))
	}
}

// BenchmarkLoad parses and validates a generated 10,000-node file.
func BenchmarkLoad(b *testing.B) {
	data := nodesFile(10000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		inv, err := Parse("nodes.yaml", data, wideTopology)
		if err != nil || len(inv.Nodes) != 10000 {
			b.Fatal(err)
		}
	}
}

func TestDeps(t *testing.T) {
	deptest.Check(t, "github.com/fleetkit/fleet/inventory", []string{
		"k8s.io", "sigs.k8s.io",
		"github.com/siderolabs",
		"github.com/tinkerbell",
		"github.com/google/go-tpm",
		"github.com/google/go-attestation",
		"github.com/mdlayher",
		"github.com/fleetkit/fleet/attest",
		"github.com/fleetkit/fleet/lldpwait",
		"github.com/fleetkit/fleet/disksafe",
		"github.com/fleetkit/fleet/configserve",
		"github.com/fleetkit/fleet/provision",
	})
}
