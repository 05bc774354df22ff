package provision_test

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
	"github.com/fleetkit/fleet/provision"
)

// configs holds rendered configs by install code, as configserve.Server
// does in fleetd.
type configs struct {
	mu   sync.Mutex
	n    int
	held map[string]string // code -> run
}

func (c *configs) NewCode() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return fmt.Sprintf("example-code-%d", c.n), nil
}

func (c *configs) Hold(_ context.Context, code string, _ []byte, _ inventory.Device, run string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held[code] = run
	return nil
}

func (c *configs) Drop(_ context.Context, run string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for code, r := range c.held {
		if r == run {
			delete(c.held, code)
		}
	}
	return nil
}

// A worker declared in NetBox attests from HookOS: Admit records what the
// attestation proved, renders the node's Talos config under a new install
// code, and starts its Workflow. fleetd does the same for every attested
// proof, with configserve as Configs and the Provisioner's loop running.
func ExampleProvisioner_Admit() {
	ctx := context.Background()

	// NetBox, with the node declared by its nodes file.
	srv := netboxtest.New(&netboxtest.Config{Users: []string{"fleetd"}})
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
  w-01: {model: ms-01, serial: MS01-0001, class: worker, switch_port: 5, address: 10.40.0.21, bmc: amt, disk_serial: S6B0NL0W412345A}
`), topo)
	if err != nil {
		panic(err)
	}
	nb, err := inventory.NewNetBox(srv.URL, srv.Token("fleetd"), &inventory.NetBoxConfig{Site: "folly", Switch: "usw"})
	if err != nil {
		panic(err)
	}
	plan, err := nb.Plan(ctx, inv)
	if err != nil {
		panic(err)
	}
	if err := nb.Apply(ctx, plan); err != nil {
		panic(err)
	}

	// The clusters: client-go's fakes here; in fleetd, the cluster the
	// nodes join and Tinkerbell's.
	tink := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		provision.WorkflowResource: "WorkflowList",
		provision.HardwareResource: "HardwareList",
		provision.MachineResource:  "MachineList",
		provision.JobResource:      "JobList",
		provision.TaskResource:     "TaskList",
	})
	bundle, err := secrets.NewBundle(secrets.NewFixedClock(time.Now()), nil)
	if err != nil {
		panic(err)
	}
	held := &configs{held: map[string]string{}}
	p, err := provision.New(
		provision.Deps{NetBox: nb, Kube: kubefake.NewClientset(), Tink: tink, Configs: held},
		provision.Cluster{Name: "folly", Endpoint: "https://10.40.0.10:6443", Bundle: bundle, Classes: inv.Classes},
		&provision.Config{Namespace: "tinkerbell", AutoProvision: true},
	)
	if err != nil {
		panic(err)
	}

	// What attest proved of the machine, and the port its LLDP frame named.
	mac, _ := net.ParseMAC("58:47:ca:71:0a:01")
	d, err := p.Admit(ctx, provision.Claim{
		Serial: "MS01-0001",
		Attestation: inventory.Attestation{
			MAC: mac, SwitchPort: 5, At: time.Now(), Verdict: "attested",
		},
		CheckPort: func(declared int) error {
			if declared != 5 {
				return fmt.Errorf("on port 5, expected %d", declared)
			}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	runName := regexp.MustCompile(`-[0-9]+$`)
	fmt.Println(d.Outcome, runName.ReplaceAllString(d.Run, "-<unix seconds>"))
	fmt.Println("code answered:", d.Code, "config held for", runName.ReplaceAllString(held.held[d.Code], "-<unix seconds>"))

	dev, err := nb.DeviceBySerial(ctx, "MS01-0001")
	if err != nil {
		panic(err)
	}
	line := "started Workflow " + d.Run + "; the machine attested from HookOS at 10.40.0.21"
	has, err := nb.JournalHas(ctx, dev.ID, inventory.JournalInfo, line)
	if err != nil {
		panic(err)
	}
	fmt.Println("journal:", runName.ReplaceAllString(strings.SplitN(line, ";", 2)[0], "-<unix seconds>")+";"+strings.SplitN(line, ";", 2)[1], has)
	fmt.Println("device:", dev.Status, dev.LastRun == d.Run, dev.MAC)
	// Output:
	// provision provision-w-01-<unix seconds>
	// code answered: example-code-1 config held for provision-w-01-<unix seconds>
	// journal: started Workflow provision-w-01-<unix seconds>; the machine attested from HookOS at 10.40.0.21 true
	// device: planned true 58:47:ca:71:0a:01
}
