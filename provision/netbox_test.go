package provision

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// withNetBox is the cluster of newNetBoxHarness: client-go's fakes on
// real time, and NetBox through inventory's client.
var withNetBox = cluster{"netbox", newNetBoxHarness}

// newNetBoxHarness is newHarness with netboxtest, the in-process NetBox
// whose every request and answer is checked against NetBox 4.3's OpenAPI
// document, as the NetBox, and fleetd's client of it as Deps.NetBox.
// terraform applies devs as a nodes file declares them; what a nodes file
// does not (an attestation, a status, a last or desired run) fleetd's
// client writes.
func newNetBoxHarness(t testing.TB, edit func(*Cluster, *Config), devs ...inventory.Device) *harness {
	t.Helper()
	srv := netboxtest.New(&netboxtest.Config{Validate: t, Users: []string{"terraform", "fleetd", "alice"}})
	t.Cleanup(srv.Close)
	if _, err := srv.AddSwitch(netboxtest.Switch{Site: "folly", Name: "usw", Ports: 48}); err != nil {
		t.Fatal(err)
	}
	classes := testCluster(t).Classes
	var nodes strings.Builder
	fmt.Fprintf(&nodes, "models:\n  nuc13: {manufacturer: Intel, name: NUC 13, disk: /dev/nvme0n1}\nclasses:\n")
	for _, c := range []string{ClassWorker, ClassControlPlane} {
		fmt.Fprintf(&nodes, "  %s: {type: %s, installer_image: %q}\n", c, classes[c].Type, classes[c].InstallerImage)
	}
	nodes.WriteString("nodes:\n")
	for _, d := range devs {
		fmt.Fprintf(&nodes, "  %s: {model: nuc13, serial: %s, class: %s, switch_port: %d, address: %s, bmc: %s", d.Name, d.Serial, d.Class, d.SwitchPort, d.Address.Addr(), d.BMC)
		if d.InstallDiskSerial != "" {
			fmt.Fprintf(&nodes, ", disk_serial: %s", d.InstallDiskSerial)
		}
		nodes.WriteString("}\n")
	}
	topo := inventory.Topology{NodeCIDR: netip.MustParsePrefix("10.0.0.0/24"), APIServerIP: netip.MustParseAddr("10.0.0.10")}
	inv, err := inventory.Parse("nodes.yaml", []byte(nodes.String()), topo)
	if err != nil {
		t.Fatal(err)
	}
	cfg := inventory.NetBoxConfig{Site: "folly", Switch: "usw", BindingAuthor: "terraform"}
	tf, err := inventory.NewNetBox(srv.URL, srv.Token("terraform"), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := tf.Plan(context.Background(), inv)
	if err == nil {
		err = tf.Apply(context.Background(), plan)
	}
	if err != nil {
		t.Fatal(err)
	}
	client, err := inventory.NewNetBox(srv.URL, srv.Token("fleetd"), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := &netBoxView{t: t, srv: srv, client: client, ids: map[int64]int64{}}
	for _, d := range devs {
		nb, err := client.DeviceBySerial(context.Background(), d.Serial)
		if err != nil {
			t.Fatal(err)
		}
		v.ids[d.ID] = nb.ID
		if err := v.write(nb.ID, d); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, nil)
	h.nb, h.nbAPI, h.mem = v, client, nil
	h.setConfig(edit)
	return h
}

// netBoxView is a netboxView of netboxtest: it reads through fleetd's
// client, and writes as terraform or the device's owner (alice) would.
type netBoxView struct {
	t      testing.TB
	srv    *netboxtest.Server
	client *inventory.NetBox
	ids    map[int64]int64 // NetBox's ID by the test's
}

// write writes what a nodes file does not declare of d to device id.
func (v *netBoxView) write(id int64, d inventory.Device) error {
	ctx := context.Background()
	var err error
	if d.MAC != nil {
		if err = v.client.RecordMAC(ctx, id, d.MAC); err == nil {
			err = v.client.UpdateDevice(ctx, id, inventory.Update{Attestation: &inventory.Attestation{
				SwitchPort: d.AttestedSwitchPort, At: d.AttestedAt, Verdict: d.AttestVerdict,
			}})
		}
	}
	if err == nil && d.Status != inventory.StatusPlanned {
		err = v.client.SetStatus(ctx, id, d.Status)
	}
	if err == nil && d.LastRun != "" {
		err = v.client.SetLastRun(ctx, id, d.LastRun)
	}
	if err == nil && d.DesiredAction != "" {
		err = v.client.SetDesiredAction(ctx, id, d.DesiredAction)
	}
	return err
}

func (v *netBoxView) id(id int64) int64 { return v.ids[id] }

func (v *netBoxView) fail() { v.srv.Inject(netboxtest.Fault{Kind: netboxtest.Failing}) }

func (v *netBoxView) dev(id int64) inventory.Device {
	v.t.Helper()
	d, err := v.client.Device(context.Background(), v.ids[id])
	if err != nil {
		v.t.Fatal(err)
	}
	d.ID = id
	return d
}

// set edits a device as its owner does in NetBox's UI: only its
// desired_action and install_disk_serial.
func (v *netBoxView) set(id int64, f func(*inventory.Device)) {
	v.t.Helper()
	old := v.dev(id)
	d := old
	f(&d)
	for field, val := range map[string][2]string{
		"desired_action":      {old.DesiredAction, d.DesiredAction},
		"install_disk_serial": {old.InstallDiskSerial, d.InstallDiskSerial},
	} {
		if val[0] != val[1] {
			if err := v.srv.EditCustomField("alice", v.ids[id], field, val[1]); err != nil {
				v.t.Fatal(err)
			}
		}
	}
	old.DesiredAction, old.InstallDiskSerial = d.DesiredAction, d.InstallDiskSerial
	if fmt.Sprint(old) != fmt.Sprint(d) {
		v.t.Fatalf("netBoxView.set edits desired_action and install_disk_serial alone: %+v", d)
	}
}

// lines reads every device's journal from NetBox, oldest first.
func (v *netBoxView) lines() []journalLine {
	var out []journalLine
	for _, e := range v.srv.Journal(0) {
		for id, nb := range v.ids {
			if nb == e.Device {
				out = append(out, journalLine{id, inventory.JournalKind(e.Kind), e.Text})
			}
		}
	}
	return out
}
