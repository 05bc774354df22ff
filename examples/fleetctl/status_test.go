package main

import (
	"bytes"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// appliedNetBox starts a netboxtest NetBox (see netBox), applies
// examples/testdata/nodes.yaml to it with fleetctl apply, which says it
// added 32 objects, and returns it with a client for fleetd's user.
func appliedNetBox(t *testing.T) (*netboxtest.Server, *inventory.NetBox) {
	t.Helper()
	srv := netBox(t)
	if stdout := mustRun(t, "apply", "-nodes", "../testdata/nodes.yaml", "-switch", "usw"); !strings.HasSuffix(stdout, "\nApply complete: 32 added, 0 changed.\n") {
		t.Errorf("apply printed:\n%s", stdout)
	}
	fleetd, err := inventory.NewNetBox(srv.URL, srv.AddUser("fleetd"), &inventory.NetBoxConfig{Switch: "usw"})
	if err != nil {
		t.Fatal(err)
	}
	return srv, fleetd
}

// device returns the NetBox device of serial.
func device(t *testing.T, nb *inventory.NetBox, serial string) inventory.Device {
	t.Helper()
	d, err := nb.DeviceBySerial(t.Context(), serial)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// attested records an attestation of d as fleetd does after a pass.
func attested(t *testing.T, nb *inventory.NetBox, d inventory.Device, mac string, at time.Time) {
	t.Helper()
	hw, err := net.ParseMAC(mac)
	if err != nil {
		t.Fatal(err)
	}
	err = nb.RecordAttestation(t.Context(), d.ID, inventory.Attestation{
		MAC: hw, EKHash: d.ApprovedEKHash, EKHashECC: d.ApprovedEKHashECC, SwitchPort: d.SwitchPort, At: at, Verdict: "attested",
	})
	if err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestStatusGolden(t *testing.T) {
	srv, nb := appliedNetBox(t)
	ctx := t.Context()
	at := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

	// cp-01 was bootstrapped by the Talos root; cp-02 attested and waits
	// for desired_action, which the operator set; w-01's run succeeded;
	// w-02's run is in flight; the rest never booted.
	cp1, cp2 := device(t, nb, "MS01-2407-0001"), device(t, nb, "MS01-2407-0002")
	w1, w2 := device(t, nb, "7090-CN0F4K2"), device(t, nb, "7090-CN0F4K3")
	must(t, nb.SetStatus(ctx, cp1.ID, inventory.StatusActive))
	attested(t, nb, cp2, "58:47:ca:70:00:02", at)
	must(t, nb.SetDesiredAction(ctx, cp2.ID, inventory.DesiredActionProvision))
	attested(t, nb, w1, "58:47:ca:70:00:21", at)
	must(t, nb.SetLastRun(ctx, w1.ID, "provision-w-01-1764684000"))
	must(t, nb.SetStatus(ctx, w1.ID, inventory.StatusActive))
	attested(t, nb, w2, "58:47:ca:70:00:22", at.Add(5*time.Minute))
	must(t, nb.SetLastRun(ctx, w2.ID, "provision-w-02-1764684300"))

	srv.ResetRequests()
	golden(t, "testdata/status.golden", runQuiet(t, 0, "status"))
	wroteNothing(t, srv, "status")
	if n := srv.RequestCount(); n != 2 {
		t.Errorf("status made %d NetBox requests, want 2 (devices and interfaces)", n)
	}
	golden(t, "testdata/status.json.golden", runJSON(t, 0, "status", "-o", "json"))
}

// TestStatusRefuses checks what status says of a NetBox that holds no
// node, and that a NetBox, or a cluster at -kubeconfig's address, that
// does not answer is said in one short line, with the cause an operator
// acts on.
func TestStatusRefuses(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed, closedTLS := "http://"+l.Addr().String(), "https://"+l.Addr().String()
	l.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+closedTLS+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	for _, c := range []struct {
		cliCase // {netbox} in stderr is the NetBox's URL
		fault   netboxtest.FaultKind
	}{
		{cliCase: cliCase{name: "an empty NetBox", args: []string{"status"}, code: 0, stdout: "NetBox holds no device of role kubernetes-node.\n"}},
		{cliCase: cliCase{name: "another role", args: []string{"status", "-role", "storage node"}, code: 0, stdout: "NetBox holds no device of role \"storage node\".\n"}},
		{cliCase: cliCase{name: "NetBox down", args: []string{"status", "-timeout", "2s"}, code: 2,
			stderr: "fleetctl status: netbox did not answer at {netbox}: the connection closed without an answer\n"}, fault: netboxtest.Down},
		{cliCase: cliCase{name: "NetBox failing", args: []string{"status"}, code: 2,
			stderr: "fleetctl status: netbox did not answer at {netbox}: it answered 503\n"}, fault: netboxtest.Failing},
		{cliCase: cliCase{name: "NetBox refused the connection", args: []string{"status"}, env: map[string]string{"NETBOX_URL": closed}, code: 2,
			stderr: "fleetctl status: netbox did not answer at " + closed + ": connection refused\n"}},
		{cliCase: cliCase{name: "plan, NetBox refused the connection", args: []string{"plan", "-nodes", "../testdata/nodes.yaml"}, env: map[string]string{"NETBOX_URL": closed}, code: 2,
			stderr: "fleetctl plan: netbox did not answer at " + closed + ": connection refused\n"}},
		{cliCase: cliCase{name: "no such host", args: []string{"status"}, env: map[string]string{"NETBOX_URL": "http://netbox.invalid"}, code: 2,
			stderr: "fleetctl status: netbox did not answer at http://netbox.invalid: lookup netbox.invalid: no such host\n"}},
		{cliCase: cliCase{name: "the cluster refused the connection", args: []string{"status", "-kubeconfig", kubeconfig}, code: 2,
			stderr: "fleetctl status: the Kubernetes API server at " + closedTLS + " did not answer: connection refused\n"}},
		{cliCase: cliCase{name: "a refused token", args: []string{"status"}, env: map[string]string{"NETBOX_TOKEN": "nope"}, code: 2, stderr: "netbox refused the token"}},
		{cliCase: cliCase{name: "no NetBox named", args: []string{"status"}, env: map[string]string{"NETBOX_URL": ""}, code: 2, stderr: "set NETBOX_URL"}},
		{cliCase: cliCase{name: "an argument", args: []string{"status", "w-01"}, code: 2, stderr: "usage: fleetctl status"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := netBox(t)
			srv.Inject(netboxtest.Fault{Kind: c.fault})
			c.stderr = strings.ReplaceAll(c.stderr, "{netbox}", srv.URL)
			c.run(t)
		})
	}
}

// TestStatusCells checks that a value NetBox holds cannot break the table
// or reach the terminal as a control sequence.
func TestStatusCells(t *testing.T) {
	var b bytes.Buffer
	writeStatus(&b, status{devices: sortedDevices([]inventory.Device{
		{ID: 2, Name: "w-02", Serial: "S 2", Status: inventory.StatusPlanned, AttestVerdict: "attested\x1b[2J"},
		{ID: 1, Name: "w-01", Serial: "S1", Status: inventory.StatusActive, LastRun: "provision-w-01-1\tx", DesiredAction: "provision"},
		{ID: 3, Name: "w-01", Serial: "S3", Status: inventory.StatusPlanned},
	})}, "kubernetes-node")
	want := `NAME  SERIAL  STATUS   ADDRESS  MAC  ATTEST_VERDICT     LAST_RUN               DESIRED_ACTION
w-01  S1      active   -        -    -                  "provision-w-01-1\tx"  provision
w-01  S3      planned  -        -    -                  -                      -
w-02  "S 2"   planned  -        -    "attested\x1b[2J"  -                      -

3 devices: 1 active, 2 planned
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestUsageNamesEveryCommand(t *testing.T) {
	code, stdout, _ := fleetctl("help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, cmd := range []string{"check", "plan", "apply", "status", "approve SERIAL", "render-class-inputs"} {
		if !strings.Contains(stdout, "fleetctl "+cmd) {
			t.Errorf("usage lacks fleetctl %s:\n%s", cmd, stdout)
		}
	}
}
