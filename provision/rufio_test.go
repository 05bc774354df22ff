package provision

import (
	"testing"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/bmc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetkit/fleet/inventory"
)

// Rufio reaches the node's AMT at the node's address: the Machine a run
// creates names it, with the BMC credentials' Secret and AMT's scheme. A
// Machine that names another host (the node's address changed, or it was
// made by hand) is pointed at the node's address before a run relies on
// it; its credentials stay as they were.
func TestRufioMachineAtNodeAddress(t *testing.T) {
	for _, made := range []bool{false, true} {
		t.Run(map[bool]string{false: "created", true: "host corrected"}[made], func(t *testing.T) {
			onClusters(t, func(t *testing.T, c cluster) {
				dev := attested(worker(1, "node-01")) // its BMC is AMT
				dev.DesiredAction = inventory.DesiredActionProvision
				h := c.harness(t, nil, dev)
				creds := corev1.SecretReference{Name: "bmc-auth", Namespace: h.ns}
				if made {
					creds.Name = "amt-node-01"
					old := bmc.Machine{
						ObjectMeta: metav1.ObjectMeta{Name: "node-01", Namespace: h.ns},
						Spec:       bmc.MachineSpec{Connection: bmc.Connection{Host: "192.0.2.77", AuthSecretRef: creds}},
					}
					h.create(MachineResource, bmc.GroupVersion.WithKind("Machine"), &old, nil)
				}
				h.passStarts("provision-node-01-")
				var m bmc.Machine
				h.get(MachineResource, "node-01", &m)
				if got := m.Spec.Connection.Host; got != "10.0.0.21" {
					t.Errorf("Machine host = %q, want the node's address 10.0.0.21", got)
				}
				if got := m.Spec.Connection.AuthSecretRef; got != creds {
					t.Errorf("Machine credentials = %+v, want %+v", got, creds)
				}
				if o := m.Spec.Connection.ProviderOptions; !made && (o == nil || o.IntelAMT == nil || o.IntelAMT.HostScheme != "http") {
					t.Errorf("Machine provider options = %+v, want Intel AMT over http", o)
				}
			})
		})
	}
}
