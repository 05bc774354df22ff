package sim

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
	"github.com/fleetkit/fleet/provision"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// wantNoSecrets fails when an install code a machine received appears in
// fleetd's log.
func (f *testFleet) wantNoSecrets() {
	f.t.Helper()
	logs := f.audit.String()
	for _, m := range f.machines {
		for _, c := range m.receivedCodes() {
			if strings.Contains(logs, c) || strings.Contains(logs, c[:12]) {
				f.t.Errorf("fleetd's log holds %s's install code", m.name)
			}
		}
	}
}

// auditLines returns fleetd's audit records with the message msg.
func (f *testFleet) auditLines(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(f.audit.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// readDevice reads a device from NetBox, and fails the test when NetBox
// does not answer.
func (f *testFleet) readDevice(name string) inventory.Device {
	f.t.Helper()
	d, err := f.device(f.ctx, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func (f *testFleet) status(name string) inventory.Status {
	f.t.Helper()
	return f.readDevice(name).Status
}

// The runbook's "Plug a machine in" for a worker, from the nodes file to an
// active node over real HTTPS: attest: PASSED, the Workflow starts with the
// note that the machine attested from HookOS, the installed Talos fetches
// its config once, and NetBox holds the node active. The install code
// reaches only the machine: once the run started, and again once the node
// is active, no object in either cluster carries it (wantNoCodeInCluster).
// The node's Rufio Machine refers to the Secret FLEET_BMC_SECRET names, in
// Tinkerbell's namespace.
func TestProvisionANode(t *testing.T) {
	f := newTestFleet(t, func(s *daemon.Settings) { s.BMCSecret = "bmc-lab" }, testNode{name: "w-01", class: "worker", approve: true})
	f.startTinkerbell()
	f.waitTemplates()
	f.powerOn("w-01")
	res := f.attested("w-01")
	if res.Verdict != attest.Attested || res.InstallCode == "" {
		t.Fatalf("attestation = %+v, want attested with a code", res)
	}
	f.wantNoCodeInCluster()
	d := f.provisioned("w-01", "127.0.0.21")
	m := f.machines["w-01"]
	if d.MAC.String() != m.mac.String() || d.AttestVerdict != "attested" || d.AttestedSwitchPort != 1 || !strings.HasPrefix(d.LastRun, "provision-w-01-") {
		t.Errorf("NetBox holds %+v", d)
	}
	for _, msg := range []string{"attest.verdict", "attest.install", "fleet.render"} {
		if len(f.auditLines(msg)) == 0 {
			t.Errorf("no %s audit line", msg)
		}
	}
	if v := f.auditLines("attest.verdict")[0]; v["verdict"] != "attested" || v["serial"] != "SN-w-01" {
		t.Errorf("attest.verdict = %v", v)
	}
	if tokens := f.runTokens(d.LastRun); len(tokens) != 1 {
		t.Errorf("%d bootstrap token Secrets of %s, want one", len(tokens), d.LastRun)
	} else if tokens[0].Type != "bootstrap.kubernetes.io/token" {
		t.Errorf("Secret %s is of type %s", tokens[0].Name, tokens[0].Type)
	}
	if !strings.Contains(f.metrics(), `fleet_attest_verdicts_total{verdict="attested"} 1`) {
		t.Error("the verdict is not counted")
	}
	if l := f.list(provision.MachineResource); len(l) != 1 {
		t.Errorf("%d Machines, want the node's", len(l))
	} else if ref, _, _ := unstructured.NestedStringMap(l[0].Object, "spec", "connection", "authSecretRef"); ref["name"] != "bmc-lab" || ref["namespace"] != f.settings.Namespace {
		t.Errorf("Machine %s names the Secret %v, want bmc-lab in %s", l[0].GetName(), ref, f.settings.Namespace)
	}
	f.wantNoCodeInCluster()
	f.wantNoSecrets()
}

// The runbook's "Provision a control plane": it waits in HookOS after
// attestation until desired_action=provision; Rufio power-cycles it so its
// next attestation receives the code, which no object in either cluster
// carries, then or once the node is active; it ends active.
func TestProvisionAControlPlane(t *testing.T) {
	f := newTestFleet(t, nil, testNode{name: "cp-02", class: "controlplane", approve: true})
	f.startTinkerbell()
	f.powerOn("cp-02")
	res := f.attested("cp-02")
	if res.Verdict != attest.Attested || res.InstallCode != "" || res.Reason != "no provision: a control plane waits for desired_action=provision" {
		t.Fatalf("attestation = %+v", res)
	}
	f.setDesiredAction("cp-02")
	f.waitJournal("cp-02", "Rufio power-cycles the machine so that its next attestation from HookOS receives the install code")
	f.wait("cp-02 receives its code", func() bool { return len(f.machines["cp-02"].receivedCodes()) > 0 })
	f.wantNoCodeInCluster()
	f.wait("cp-02 active", func() bool { return f.status("cp-02") == inventory.StatusActive })
	m := f.machines["cp-02"]
	m.mu.Lock()
	boots := m.boots
	m.mu.Unlock()
	if boots != 2 {
		t.Errorf("cp-02 booted %d times, want 2 (power on, Rufio's cycle)", boots)
	}
	if d := f.readDevice("cp-02"); d.DesiredAction != "" {
		t.Errorf("desired_action = %q after the run started", d.DesiredAction)
	}
	f.wantNoCodeInCluster()
	f.wantNoSecrets()
}

// wantNoCodeInCluster fails when an install code a machine received, or the
// config URL that carries it, is in any object of the Tinkerbell cluster
// (Workflows, Hardware, Templates, Rufio Machines and Jobs), or in any
// Secret but a bootstrap token or any ConfigMap of the node cluster.
func (f *testFleet) wantNoCodeInCluster() {
	f.t.Helper()
	var codes []string
	for _, m := range f.machines {
		codes = append(codes, m.receivedCodes()...)
	}
	if len(codes) == 0 {
		f.t.Fatal("no machine received an install code")
	}
	objects := map[string]any{}
	for _, gvr := range []schema.GroupVersionResource{provision.WorkflowResource, provision.HardwareResource, provision.MachineResource, provision.JobResource, daemon.TemplateResource} {
		l, err := f.tink.Resource(gvr).Namespace(metav1.NamespaceAll).List(f.ctx, metav1.ListOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, u := range l.Items {
			objects[gvr.Resource+"/"+u.GetNamespace()+"/"+u.GetName()] = u.Object
		}
	}
	secrets, err := f.kube.CoreV1().Secrets(metav1.NamespaceAll).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if s.Type != "bootstrap.kubernetes.io/token" {
			objects["secrets/"+s.Namespace+"/"+s.Name] = s
		}
	}
	cms, err := f.kube.CoreV1().ConfigMaps(metav1.NamespaceAll).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, c := range cms.Items {
		objects["configmaps/"+c.Namespace+"/"+c.Name] = c
	}
	for name, o := range objects {
		b, err := json.Marshal(o)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, c := range codes {
			if strings.Contains(string(b), c) || strings.Contains(string(b), f.url+"/config/"+c) {
				f.t.Errorf("%s carries an install code", name)
			}
		}
	}
}

// "The node polls its config URL and gets 503": NetBox does not answer;
// the config stays and is served once NetBox answers.
func TestConfigWhileNetBoxDown(t *testing.T) {
	f, url := attestedWorker(t, nil)
	f.nbsrv.Inject(netboxtest.Fault{Kind: netboxtest.Failing})
	status, _, err := fetch(f.ctx, f.machines["w-01"].client, url)
	if err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("fetch with NetBox down = %d, %v; want 503", status, err)
	}
	f.nbsrv.Inject(netboxtest.Fault{Kind: netboxtest.Healthy})
	f.wantServed(f.machines["w-01"].client, url, "fetch with NetBox back")
	f.waitJournal("w-01", "fleetd served the config of provision-w-01-")
	f.wait("w-01 active", func() bool { return f.status("w-01") == inventory.StatusActive })
}

// wantServed fails f's test unless a fetch of url over c gets the config
// whole; what names the fetch.
func (f *testFleet) wantServed(c *http.Client, url, what string) {
	f.t.Helper()
	if status, n, err := fetch(f.ctx, c, url); err != nil || status != http.StatusOK || n == 0 {
		f.t.Fatalf("%s = %d (%d bytes), %v; want the config", what, status, n, err)
	}
}

// refetch fetches the config at url as the machine's node, and again: the
// second fetch, while the first answer's acknowledgement is still being
// checked, is told to retry (503); the node does, and is told the code is
// spent (410), and the device's journal says so.
func (f *testFleet) refetch(name, url string) {
	f.t.Helper()
	c := f.machines[name].client
	if status, _, err := fetch(f.ctx, c, url); err != nil || status != http.StatusOK {
		f.t.Fatalf("%s's first fetch = %d, %v", name, status, err)
	}
	var status int
	f.wait("an answer to "+name+"'s second fetch", func() bool {
		s, _, err := fetch(f.ctx, c, url)
		status = s
		return err == nil && s != http.StatusServiceUnavailable
	})
	if status != http.StatusGone {
		f.t.Fatalf("%s's second fetch = %d; want 410", name, status)
	}
	f.waitJournal(name, "warning: the node asked again for the Talos config fleetd served it")
}

// A fleetd restart mid-run: the run is picked up from the cluster and
// journaled to its end; the waiting config is gone, so the node's fetch
// finds none, the journal says so on the node's device, and the metric of
// FleetInstallConfigMissing names it. A fleetd told to stop while it
// starts (before its Templates exist) stops cleanly, as after a SIGTERM at
// any other time.
func TestRestartMidRun(t *testing.T) {
	f := newTestFleet(t, nil, testNode{name: "w-01", class: "worker", approve: true})
	f.powerOn("w-01")
	f.attested("w-01")
	f.waitJournal("w-01", "started Workflow provision-w-01-")
	if err := f.restart(); err != nil {
		t.Fatal(err)
	}
	f.startTinkerbell()
	f.waitJournal("w-01", "ended SUCCESS")
	f.waitJournal("w-01", "warning: the node asked for its Talos config, and fleetd holds none for it")
	if m := f.metrics(); !strings.Contains(m, `fleet_install_config_missing_last_timestamp_seconds{node="w-01"}`) {
		t.Errorf("no missing-config metric for w-01:\n%s", grep(m, "fleet_install_config"))
	}
	if got := f.status("w-01"); got != inventory.StatusPlanned {
		t.Errorf("status %s, want planned: the node never got its config", got)
	}
	m := f.machines["w-01"]
	m.mu.Lock()
	statuses := slices.Clone(m.statuses)
	m.mu.Unlock()
	if len(statuses) == 0 || statuses[0] != http.StatusNotFound {
		t.Errorf("the node's fetches were answered %v, want 404", statuses)
	}

	d, err := daemon.New(f.settings, f.parts)
	if err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Serve(stopped, daemon.Listeners{HTTPS: listen(t)}); err != nil {
		t.Errorf("serve stopped while starting: %v, want a clean stop", err)
	}
}

// "The journal says a Workflow never reported its first action within its
// global timeout": fleetd deletes it.
func TestWorkflowNeverStarts(t *testing.T) {
	// The run's global timeout passes a few seconds after it starts.
	f := newTestFleet(t, func(s *daemon.Settings) { s.RunTimeout = 3 * time.Second }, testNode{name: "w-01", class: "worker", approve: true})
	f.powerOn("w-01")
	f.attested("w-01")
	run := f.startedRun("w-01")
	f.waitJournal("w-01", "Workflow "+run+" never reported its first action within its global timeout")
	// fleetd journals the line, then deletes the Workflow.
	f.wait("Workflow "+run+" deleted", func() bool {
		_, err := f.tink.Resource(provision.WorkflowResource).Namespace(f.settings.Namespace).Get(f.ctx, run, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// "attest: FAILED with ek-binding-unauthored": another NetBox user cleared
// the binding; the machine is refused, no claim waits for approval (as one
// would for an entry that approves no EK), and the device's journal says
// why. That a binding another user edited is unauthored too is
// TestBindingAuthorship's (package inventory) and TestJudge's (package
// attest): the refusal's effects here are the same.
func TestBindingUnauthored(t *testing.T) {
	f := newTestFleet(t, nil, testNode{name: "w-01", class: "worker", approve: true})
	d := f.devices["w-01"]
	for _, field := range []string{"approved_ek_hash", "approved_ek_hash_ecc"} {
		if err := f.nbsrv.EditCustomField(userOperator, d.ID, field, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.powerOn("w-01")
	if res := f.attested("w-01"); res.Verdict != attest.EKBindingUnauthored || res.InstallCode != "" {
		t.Fatalf("attestation = %+v", res)
	}
	f.waitJournal("w-01", "warning: attest: FAILED ek-binding-unauthored")
	if dev := f.readDevice("w-01"); len(dev.MAC) != 0 || dev.AttestVerdict != "" {
		t.Errorf("a refusal wrote the attestation: %+v", dev)
	}
	if c := f.d.Attest().Waiting("SN-w-01"); len(c) != 0 {
		t.Errorf("an unauthored binding's claim waits for approval: %+v", c)
	}
}

// Two NetBox devices hold the machine's serial: fleetd refuses the claim
// and says why (the console says attest: FAILED and the fault, and the
// machine does not try again), the attest.verdict audit line names the
// devices, each device's journal says so once for two refusals in a row,
// and nothing else is written to NetBox. (That a refusal 10 minutes later
// journals again is TestDuplicateSerialJournalEvery's, in package daemon,
// on a clock a test can move.)
func TestDuplicateSerial(t *testing.T) {
	f := newTestFleet(t, nil, testNode{name: "w-01", class: "worker", approve: true}, testNode{name: "w-02", class: "worker", approve: true})
	w1, w2 := f.devices["w-01"], f.devices["w-02"]
	// An operator gives w-02 the serial of w-01's machine.
	if err := f.nbsrv.Update(userOperator, "/api/dcim/devices/", map[string]any{"id": w2.ID, "serial": "SN-w-01"}); err != nil {
		t.Fatal(err)
	}
	m := f.machines["w-01"]
	reason := `NetBox holds more than one device with serial "SN-w-01"`
	refused := func() {
		t.Helper()
		var console strings.Builder
		backoffs := 0
		res, err := attest.Run(f.ctx, f.url+"/attest", m.tpm, attest.Machine{Serial: m.serial, MAC: m.mac}, &attest.ClientConfig{
			HTTPClient: m.client,
			Backoff:    func(int) time.Duration { backoffs++; return 0 },
			Console:    &console,
		})
		if !errors.Is(err, attest.ErrRefused) || res.Tries != 1 || backoffs != 0 || res.Reason != reason {
			t.Fatalf("Run: %+v, %v after %d backoffs; want refused at once", res, err, backoffs)
		}
		if want := "attest: FAILED\nattest: " + reason + "\n"; console.String() != want {
			t.Errorf("console:\n%s\nwant:\n%s", console.String(), want)
		}
	}
	devices := fmt.Sprintf("w-01 (id %d), w-02 (id %d)", w1.ID, w2.ID)
	line := fmt.Sprintf("warning: attest: FAILED: %s: %s; fleetd cannot tell which one's approved EK binding to judge", reason, devices)
	journaled := func(want int) {
		t.Helper()
		for _, name := range []string{"w-01", "w-02"} {
			f.wait(fmt.Sprintf("%d journal lines of %s", want, name), func() bool {
				return len(f.journalWith(name, line)) == want
			})
		}
	}

	refused()
	journaled(1)
	audit := f.auditLines("attest.verdict")
	if len(audit) != 1 {
		t.Fatalf("attest.verdict lines: %v, want 1", audit)
	}
	a := audit[0]
	if a["serial"] != "SN-w-01" || a["reason"] != reason || !strings.Contains(fmt.Sprint(a["error"]), "w-01 (id") || !strings.Contains(fmt.Sprint(a["error"]), "w-02 (id") || a["verdict"] != nil {
		t.Errorf("attest.verdict line %v, want the serial, the reason, the devices in error, and no verdict", a)
	}

	// Any machine can claim the serial: a second refusal journals nothing
	// new.
	refused()
	if err := f.d.Journal().Flush(f.ctx); err != nil {
		t.Fatal(err)
	}
	journaled(1)
	if n := len(f.auditLines("attest.verdict")); n != 2 {
		t.Errorf("%d attest.verdict lines for 2 refusals", n)
	}
	for _, name := range []string{"w-01", "w-02"} {
		dev := f.readDevice(name)
		if len(dev.MAC) != 0 || dev.AttestVerdict != "" || dev.Status != inventory.StatusPlanned || len(f.journalOf(name)) != 1 {
			t.Errorf("a refusal wrote more than its journal lines on %s: %+v, journal %q", name, dev, f.journalOf(name))
		}
	}
	// Every verdict's counter is exported from the start, at zero.
	for _, l := range strings.Split(f.metrics(), "\n") {
		if strings.HasPrefix(l, "fleet_attest_verdicts_total{") && !strings.HasSuffix(l, " 0") {
			t.Errorf("a refused claim was counted as a verdict: %s", l)
		}
	}
}

// The waiting-claims API answers approvers only. Another TPM claiming the
// waiting machine's serial does not replace its claim: the API answers
// both, the machine's first.
func TestApproverAPI(t *testing.T) {
	ca, client, err := testcert.NewClient("alice")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := newTestFleet(t, func(s *daemon.Settings) { s.ApproverCA = caFile }, testNode{name: "w-04", class: "worker"})
	f.powerOn("w-04")
	if res := f.attested("w-04"); res.Verdict != attest.PendingApproval {
		t.Fatalf("verdict %s", res.Verdict)
	}
	get := func(c *http.Client, token string) (int, attest.WaitingClaim) {
		t.Helper()
		rsp, wcs := claimsAt(t, c, f.url, "SN-w-04", token)
		if rsp.StatusCode != http.StatusOK {
			return rsp.StatusCode, attest.WaitingClaim{}
		}
		if len(wcs) != 1 {
			t.Fatalf("the answer is %d claims; want a list of one", len(wcs))
		}
		return rsp.StatusCode, wcs[0]
	}
	if code, _ := get(f.client, ""); code != http.StatusUnauthorized {
		t.Errorf("anonymous: %d, want 401", code)
	}
	if code, _ := get(f.client, "wrong-token-wrong-token"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	code, wc := get(f.client, approverToken)
	if code != http.StatusOK || wc.Serial != "SN-w-04" || !inventoryHash(wc.RSA2048) || !inventoryHash(wc.ECCP256) || !strings.Contains(wc.Text, wc.RSA2048) {
		t.Errorf("approver token: %d %+v", code, wc)
	}
	if code, wc := get(withCert(f.client, client.TLS), ""); code != http.StatusOK || wc.Serial != "SN-w-04" {
		t.Errorf("approver certificate: %d", code)
	}
	if rsp, _ := claimsAt(t, f.client, f.url, "SN-none", approverToken); rsp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown serial: %s", rsp.Status)
	}
	if len(f.auditLines("fleet.approve")) != 5 {
		t.Errorf("fleet.approve lines: %v", f.auditLines("fleet.approve"))
	}

	impostor, err := attesttest.NewSoftTPM(nil)
	if err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x66}
	res, err := attest.Run(f.ctx, f.url+"/attest", impostor, attest.Machine{Serial: "SN-w-04", MAC: mac}, &attest.ClientConfig{HTTPClient: f.client})
	if err != nil || res.Verdict != attest.PendingApproval {
		t.Fatalf("the impostor's claim: %v, %v", res.Verdict, err)
	}
	rsp, wcs := claimsAt(t, f.client, f.url, "SN-w-04", approverToken)
	if rsp.StatusCode != http.StatusOK {
		t.Fatal(rsp.Status)
	}
	machine, _ := attesttest.Approve(f.machines["w-04"].tpm)
	other, _ := attesttest.Approve(impostor)
	if len(wcs) != 2 || wcs[0].RSA2048 != machine.RSA2048 || wcs[0].ECCP256 != machine.ECCP256 ||
		wcs[1].RSA2048 != other.RSA2048 || wcs[1].MAC != mac.String() || !strings.Contains(wcs[1].Text, other.ECCP256) {
		t.Errorf("claims of SN-w-04: %+v; want the machine's, then the impostor's", wcs)
	}
}

// claimsAt asks the approvers' API at url, over c, for the claims that
// wait with serial, with the bearer token ("": none), and returns its
// answer (its body read) and, when it is 200, the claims.
func claimsAt(t testing.TB, c *http.Client, url, serial, token string) (*http.Response, []attest.WaitingClaim) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+daemon.ClaimsPath+serial, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rsp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	var wcs []attest.WaitingClaim
	if rsp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(rsp.Body).Decode(&wcs); err != nil {
			t.Fatalf("the claims of %s at %s: %v", serial, url, err)
		}
	}
	io.Copy(io.Discard, rsp.Body)
	return rsp, wcs
}

func inventoryHash(s string) bool { return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == "" }

// withCert is a client like c that presents cert.
func withCert(c *http.Client, cert tls.Certificate) *http.Client {
	tr := c.Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// configURL is the config URL of the device's first run: fleetd's, with
// the install code the machine's attestation received, which the run's
// Workflow names by its SHA-256.
func (f *testFleet) configURL(name string) string {
	f.t.Helper()
	m := f.machines[name]
	f.wait(name+"'s install code", func() bool { return len(m.receivedCodes()) > 0 })
	code, run := m.receivedCodes()[0], f.startedRun(name)
	wf, err := f.tink.Resource(provision.WorkflowResource).Namespace(f.settings.Namespace).Get(f.ctx, run, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if hm, _, _ := unstructured.NestedStringMap(wf.Object, "spec", "hardwareMap"); hm[provision.ValueInstallCodeSHA256] != provision.CodeSHA256(code) {
		f.t.Fatalf("Workflow %s names the install code's SHA-256 %q, want %s's", run, hm[provision.ValueInstallCodeSHA256], name)
	}
	return f.url + "/config/" + code
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The demo runs the runbook on the example inventory and every machine ends
// as expected.
func TestDemo(t *testing.T) {
	var out strings.Builder
	ok, err := demo(context.Background(), "../../../..", &out)
	if err != nil || !ok {
		t.Fatalf("demo = %v, %v\n%s", ok, err, out.String())
	}
	for _, want := range []string{
		"console   attest: PASSED",
		"console   attest: FAILED ek-hash-mismatch",
		"console   attest: FAILED pending-approval",
		"journal   warning: refused a run before rendering anything: on port 12, expected 6",
		"attest: no provision: a control plane waits for desired_action=provision",
		"approved_ek_rsa2048: ",
		"every machine ended as expected",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}
