package provision

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"

	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// The tests in this file run provision against inventory's NetBox client
// and netboxtest, the in-process NetBox whose every request and answer is
// checked against NetBox 4.3's OpenAPI document.

const follyNodes = `models:
  ms-01: {manufacturer: Minisforum, name: MS-01, disk: /dev/nvme0n1}
classes:
  controlplane: {type: controlplane, installer_image: "factory.talos.dev/installer/def:v1.13.9"}
  worker: {type: worker, installer_image: "factory.talos.dev/installer/abc:v1.13.9"}
nodes:
  cp-02: {model: ms-01, serial: MS01-0002, class: controlplane, switch_port: 2, address: 10.40.0.12, bmc: amt, disk_serial: DS-CP02}
  w-01: {model: ms-01, serial: MS01-0021, class: worker, switch_port: 5, address: 10.40.0.21, bmc: amt, disk_serial: DS-W01}
  w-02: {model: ms-01, serial: MS01-0022, class: worker, switch_port: 6, address: 10.40.0.22, bmc: none}
`

var follyTopology = inventory.Topology{NodeCIDR: netip.MustParsePrefix("10.40.0.0/24"), APIServerIP: netip.MustParseAddr("10.40.0.10")}

type netboxHarness struct {
	*harness
	srv    *netboxtest.Server
	client *inventory.NetBox
	ids    map[string]int64
}

// newNetBoxHarness applies follyNodes to a netboxtest NetBox as terraform
// and returns a Provisioner that uses fleetd's client of it.
func newNetBoxHarness(t *testing.T) *netboxHarness {
	t.Helper()
	srv := netboxtest.New(&netboxtest.Config{Validate: t, Users: []string{"terraform", "fleetd", "alice"}})
	t.Cleanup(srv.Close)
	if _, err := srv.AddSwitch(netboxtest.Switch{Site: "folly", Name: "usw", Ports: 48}); err != nil {
		t.Fatal(err)
	}
	cfg := inventory.NetBoxConfig{Site: "folly", Switch: "usw", BindingAuthor: "terraform"}
	inv, err := inventory.Parse("nodes.yaml", []byte(follyNodes), follyTopology)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := inventory.NewNetBox(srv.URL, srv.Token("terraform"), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := tf.Plan(t.Context(), inv)
	if err != nil {
		t.Fatal(err)
	}
	if err := tf.Apply(t.Context(), plan); err != nil {
		t.Fatal(err)
	}
	client, err := inventory.NewNetBox(srv.URL, srv.Token("fleetd"), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Cluster, _ *Config) {
		c.Classes = testClasses("factory.talos.dev/installer/abc:v1.13.9", "factory.talos.dev/installer/def:v1.13.9")
	})
	p, err := New(Deps{NetBox: client, Kube: h.kube, Tink: h.tink, Configs: h.configs}, h.cluster, &h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	devs, err := client.Devices(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for _, d := range devs {
		ids[d.Name] = d.ID
	}
	return &netboxHarness{harness: h, srv: srv, client: client, ids: ids}
}

func (h *netboxHarness) device(name string) inventory.Device {
	h.t.Helper()
	d, err := h.client.Device(context.Background(), h.ids[name])
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// journal reads a device's journal from NetBox, oldest first.
func (h *netboxHarness) journal(name string) []journalLine {
	h.t.Helper()
	req, err := http.NewRequest("GET", h.srv.URL+"/api/extras/journal-entries/?limit=0&assigned_object_type=dcim.device&assigned_object_id="+strconv.FormatInt(h.ids[name], 10), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Token "+h.srv.Token("alice"))
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rsp.Body.Close()
	var page struct {
		Results []journalEntry `json:"results"`
	}
	if err := json.NewDecoder(rsp.Body).Decode(&page); err != nil {
		h.t.Fatal(err)
	}
	slices.SortFunc(page.Results, func(a, b journalEntry) int { return int(a.ID - b.ID) })
	var out []journalLine
	for _, r := range page.Results {
		out = append(out, journalLine{h.ids[name], inventory.JournalKind(r.Kind.Value), r.Comments})
	}
	return out
}

type journalEntry struct {
	ID       int64  `json:"id"`
	Comments string `json:"comments"`
	Kind     struct {
		Value string `json:"value"`
	} `json:"kind"`
}

func (h *netboxHarness) wantNetBoxJournal(name string, want ...journalLine) {
	h.t.Helper()
	if got := h.journal(name); !slices.Equal(got, want) {
		h.t.Errorf("journal of %s:\n got %+v\nwant %+v", name, got, want)
	}
}

func follyClaim(serial string, id int64, port int, addr string) Claim {
	return Claim{
		Serial: serial,
		Attestation: inventory.Attestation{
			MAC: macOf(id), SwitchPort: port, At: t0, Verdict: "attested",
		},
		From:      netip.MustParseAddr(addr),
		CheckPort: portCheck(port),
	}
}

// Plug a machine in, over NetBox: the run starts, NetBox holds its MAC and
// last_run, and the journal the runbook's line; the run's failure is
// journaled once, across a restart.
func TestNetBoxWorkerRun(t *testing.T) {
	h := newNetBoxHarness(t)
	id := h.ids["w-01"]
	d, err := h.p.Admit(t.Context(), follyClaim("MS01-0021", id, 5, "10.40.0.21"))
	if err != nil {
		t.Fatal(err)
	}
	run := d.Run
	if d.Outcome != Provision || !isRunName(run, "provision-w-01-") || d.Code == "" {
		t.Fatalf("Admit = %+v", d)
	}
	started := journalLine{id, inventory.JournalInfo, "started Workflow " + run + "; the machine attested from HookOS at 10.40.0.21"}
	h.wantNetBoxJournal("w-01", started)
	dev := h.device("w-01")
	if dev.LastRun != run || dev.DesiredAction != "" || dev.MAC.String() != macOf(id).String() || dev.AttestedSwitchPort != 5 {
		t.Errorf("device = last_run %q desired_action %q MAC %s port %d", dev.LastRun, dev.DesiredAction, dev.MAC, dev.AttestedSwitchPort)
	}
	cfg, err := configloader.NewFromBytes(h.configs.held[d.Code].config)
	if err != nil {
		t.Fatal(err)
	}
	s := h.secrets()[0]
	if err := Check(cfg, dev, string(s.Data["token-id"])+"."+string(s.Data["token-secret"]), "factory.talos.dev/installer/abc:v1.13.9"); err != nil {
		t.Error(err)
	}
	if got := h.workflow(run).Spec.HardwareMap[ValueInstallDiskSerial]; got != "DS-W01" {
		t.Errorf("install_disk_serial = %q", got)
	}

	h.setStatus(run, func(s *tinkerbell.WorkflowStatus) {
		s.State = tinkerbell.WorkflowStateFailed
		s.Tasks = actions(map[string]tinkerbell.WorkflowState{"wipe-disk": "FAILED"})
	})
	h.reconcile()
	h.p, _ = New(Deps{NetBox: h.client, Kube: h.kube, Tink: h.tink, Configs: h.configs}, h.cluster, &h.cfg) // a restart
	h.reconcile()
	h.wantNetBoxJournal("w-01", started, journalLine{id, inventory.JournalWarning,
		"Workflow " + run + " ended FAILED at action wipe-disk; read its output with journalctl -t hookos HOOKOS_HOST=10.40.0.21"})
}

// "desired_action stays set" over NetBox: a device without
// install_disk_serial is journaled as lacking it and keeps
// desired_action=provision.
func TestNetBoxLacksDiskSerial(t *testing.T) {
	h := newNetBoxHarness(t)
	id := h.ids["w-02"]
	d, err := h.p.Admit(t.Context(), follyClaim("MS01-0022", id, 6, "10.40.0.22"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != Refused || d.Code != "" {
		t.Errorf("Admit = %+v", d)
	}
	h.reconcile()
	h.wantNetBoxJournal("w-02", journalLine{id, inventory.JournalWarning,
		"w-02 lacks install_disk_serial: the run waits for install_disk_serial, and desired_action stays provision"})
	if got := h.device("w-02").DesiredAction; got != inventory.DesiredActionProvision {
		t.Errorf("desired_action = %q", got)
	}
	h.wantNothingCreated()
}

// "The journal says on port N, expected M" over NetBox.
func TestNetBoxWrongPort(t *testing.T) {
	h := newNetBoxHarness(t)
	id := h.ids["w-01"]
	c := follyClaim("MS01-0021", id, 7, "10.40.0.21")
	// portCheck(7) judges the claim against the declared 5 itself.
	if d, err := h.p.Admit(t.Context(), c); err != nil || d.Outcome != Refused {
		t.Fatalf("Admit = %+v, %v", d, err)
	}
	h.wantNetBoxJournal("w-01", journalLine{id, inventory.JournalWarning, "refused a run before rendering anything: on port 7, expected 5"})
	h.wantNothingCreated()
	if got := h.device("w-01").AttestedSwitchPort; got != 7 {
		t.Errorf("attested_switch_port = %d, want the claimed 7 recorded", got)
	}
}

// Provision a control plane over NetBox: the owner sets desired_action, the
// loop starts the netboot run with every control plane in the SANs, and
// clears desired_action.
func TestNetBoxControlPlane(t *testing.T) {
	h := newNetBoxHarness(t)
	id := h.ids["cp-02"]
	d, err := h.p.Admit(t.Context(), follyClaim("MS01-0002", id, 2, "10.40.0.12"))
	if err != nil || d.Outcome != NoProvision || d.Reason != reasonControlPlane {
		t.Fatalf("Admit = %+v, %v", d, err)
	}
	alice, err := inventory.NewNetBox(h.srv.URL, h.srv.Token("alice"), &inventory.NetBoxConfig{Site: "folly", Switch: "usw"})
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.SetDesiredAction(t.Context(), id, inventory.DesiredActionProvision); err != nil {
		t.Fatal(err)
	}
	pass := h.reconcile()
	if len(pass.Started) != 1 || !isRunName(pass.Started[0], "provision-cp-02-") {
		t.Fatalf("pass = %+v", pass)
	}
	run := pass.Started[0]
	if got := h.device("cp-02"); got.DesiredAction != "" || got.LastRun != run {
		t.Errorf("device = desired_action %q last_run %q", got.DesiredAction, got.LastRun)
	}
	h.wantNetBoxJournal("cp-02", journalLine{id, inventory.JournalInfo,
		"started Workflow " + run + "; Rufio power-cycles the machine so that its next attestation from HookOS receives the install code"})
	cfg, err := configloader.NewFromBytes(h.configs.held["SECRETCODE0001"].config)
	if err != nil {
		t.Fatal(err)
	}
	if sans := cfg.RawV1Alpha1().ClusterConfig.APIServerConfig.CertSANs; !contains(sans, "10.40.0.12") {
		t.Errorf("SANs %v lack the node", sans)
	}
	out, err := h.p.ClassInputs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Control planes: cp-02 10.40.0.12 (planned).\n"; !contains(splitLines(string(out)), want[:len(want)-1]) {
		t.Errorf("class inputs:\n%s", out)
	}
}

// NetBox down: no code, nothing created, and the error matches
// inventory.ErrUnavailable so that fleetd answers 503.
func TestNetBoxDown(t *testing.T) {
	h := newNetBoxHarness(t)
	h.srv.Inject(netboxtest.Fault{Kind: netboxtest.Failing})
	_, err := h.p.Admit(t.Context(), follyClaim("MS01-0021", h.ids["w-01"], 5, "10.40.0.21"))
	if !errors.Is(err, inventory.ErrUnavailable) {
		t.Fatalf("Admit error = %v", err)
	}
	h.wantNothingCreated()
	if _, err := h.p.Reconcile(t.Context()); !errors.Is(err, inventory.ErrUnavailable) {
		t.Errorf("Reconcile error = %v", err)
	}
}

// isRunName reports whether name is prefix followed by the unix seconds of
// a time within the last minute: the name of a run started on real time.
func isRunName(name, prefix string) bool {
	secs, err := strconv.ParseInt(strings.TrimPrefix(name, prefix), 10, 64)
	if err != nil || !strings.HasPrefix(name, prefix) {
		return false
	}
	age := time.Since(time.Unix(secs, 0))
	return age >= 0 && age < time.Minute
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}
