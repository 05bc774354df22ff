package sim

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/spentlease"
	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/provision"
)

// Three fleetd processes behind one balancer: one runs the loop; a claim
// and its proof on two replicas attest; the proof replayed to each replica
// is refused; the config, held by the replica that rendered it, is fetched
// through another and served once; an approver asking any replica sees a
// claim that waits on another; an unknown code is unknown everywhere.
// A replica writes a run's journal lines before a replica killed right
// after it answered could lose them: the started line before the install
// code is answered, the served line as soon as the node acknowledged the
// config, not after the journal queue's linger (200 ms).
func TestReplicas(t *testing.T) {
	settings := func(_ int, s map[string]string) {
		s["FLEET_CONTROL_PLANES"], s["FLEET_APPROVER_TOKEN"] = "true", approverToken
	}
	r := newProcFleet(t, procFleetConfig{replicas: 3, settings: settings}, testNode{name: "w-01", class: "worker", approve: true},
		testNode{name: "w-02", class: "worker"}, testNode{name: "cp-03", class: "controlplane", approve: true})
	urls := r.urls()
	r.wait("one replica leads", func() bool { return len(r.leaders()) == 1 })
	time.Sleep(time.Second)
	if l := r.leaders(); len(l) != 1 {
		t.Fatalf("replicas leading: %v, want one", l)
	}

	// The machines' clients reach the replicas through the balancer, a
	// new connection each request.
	lb := r.machines["w-01"].client
	res, proof := r.attestAt("w-01", r.url)
	if res.InstallCode == "" {
		t.Fatalf("w-01 through the balancer: %+v", res)
	}
	if len(r.journalWith("w-01", "info: started Workflow provision-w-01-")) == 0 {
		t.Errorf("when w-01 held its install code, its journal held no started line: %q", r.journalOf("w-01"))
	}
	leases, err := r.kube.CoordinationV1().Leases(r.settings.Namespace).List(r.ctx, metav1.ListOptions{LabelSelector: spentlease.LabelSpent + "=true"})
	if err != nil || len(leases.Items) != 1 {
		t.Errorf("spent session Leases: %v, %v; want the one session's", leases, err)
	}
	r.wantReplayRefused(proof, res.InstallCode, false)

	// The node fetches its config through the balancer until one answer
	// carries it; then every replica says it was served.
	var served int
	for try := 0; try < len(urls); try++ {
		status, n, err := fetch(r.ctx, lb, r.url+configserve.PathPrefix+res.InstallCode)
		if err != nil {
			t.Fatal(err)
		}
		if status == http.StatusOK && n > 0 {
			served++
			if err := eventually(r.ctx, 150*time.Millisecond, func() (bool, error) {
				return len(r.journalWith("w-01", "success: fleetd served the config of provision-w-01-")) > 0, nil
			}); err != nil {
				t.Errorf("150 ms after w-01's config was fetched, its journal held no served line: %q", r.journalOf("w-01"))
			}
		} else if status != http.StatusGone {
			t.Errorf("fetch %d through the balancer: %d", try, status)
		}
	}
	if served != 1 {
		t.Errorf("%d fetches through the balancer got the config, want 1", served)
	}
	r.wantAtEach(res.InstallCode, http.StatusGone, "a fetch after the config was served")
	line := r.waitJournal("w-01", "fleetd served the config of ")
	if n := len(r.journalWith("w-01", line)); n != 1 {
		t.Errorf("%q journaled %d times, want once", line, n)
	}
	if status, _, err := fetch(r.ctx, lb, r.url+configserve.PathPrefix+configserve.NewCode()); err != nil || status != http.StatusNotFound {
		t.Errorf("an unknown code through the balancer: %d, %v; want 404", status, err)
	}

	// w-02's EKs are not approved: its claim waits on the replica its
	// proof reached, and an approver asking any replica sees it.
	if res, _ := r.attestAt("w-02", r.url); res.Verdict != attest.PendingApproval {
		t.Fatalf("w-02: verdict %q, want pending-approval", res.Verdict)
	}
	for i, u := range urls {
		rsp, claims := claimsAt(t, r.client, u, "SN-w-02", approverToken)
		if rsp.StatusCode != http.StatusOK || len(claims) != 1 || rsp.Header.Get("Fleet-Replicas-Unanswered") != "" {
			t.Errorf("claims of SN-w-02 at fleetd-%d: %d %v; want the one waiting claim", i, rsp.StatusCode, claims)
		}
	}

	// A control plane waits for the operator, who asks for its run: the
	// leader's loop starts it, and cp-03's attestation at another replica
	// gets that run's code from the leader: the run is not replaced.
	if res, _ := r.attestAt("cp-03", urls[0]); res.InstallCode != "" {
		t.Fatalf("cp-03 before the operator asked: %+v, want no code", res)
	}
	r.setDesiredAction("cp-03")
	run3 := runOf(r.waitJournal("cp-03", "; Rufio power-cycles the machine so that its next attestation from HookOS receives the install code"))
	wfs := r.tink.Resource(provision.WorkflowResource).Namespace(r.settings.Namespace)
	before, err := wfs.Get(r.ctx, run3, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := r.leaders()
	if len(l) != 1 {
		t.Fatalf("replicas leading: %v", l)
	}
	res3, _ := r.attestAt("cp-03", urls[(l[0]+1)%len(urls)])
	if res3.InstallCode == "" || res3.Reason != "install code issued" {
		t.Errorf("cp-03 at a replica that did not start its run: %+v; want run %s's code", res3, run3)
	}
	list, err := wfs.List(r.ctx, metav1.ListOptions{
		LabelSelector: fmt.Sprintf("%s=%d", provision.LabelDeviceID, r.devices["cp-03"].ID)})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetUID() != before.GetUID() {
		t.Errorf("cp-03's Workflows after its attestation: %d, %v; want %s (uid %s) alone, not replaced", len(list.Items), err, run3, before.GetUID())
	}
	if status, n, err := fetch(r.ctx, lb, r.url+configserve.PathPrefix+res3.InstallCode); err != nil || status != http.StatusOK || n == 0 {
		t.Errorf("cp-03's config through the balancer: %d, %d bytes, %v; want it served", status, n, err)
	}

	// The peers' API answers replicas only: the peers' token without the
	// replicas' certificate, or with another, is refused, and so is the
	// certificate without the token; the machines' listener does not
	// answer its paths at all.
	// The peers' bearer token fleetd derives from the sealing key: what a
	// replica sends.
	mac := hmac.New(sha256.New, r.settings.SealingKey)
	mac.Write([]byte("fleetd peers"))
	token := hex.EncodeToString(mac.Sum(nil))
	lend := func(c *http.Client, url, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/peers/lend", strings.NewReader(`{"code":"`+configserve.NewCode()+`"}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rsp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rsp.Body.Close()
		return rsp.StatusCode
	}
	other, err := testcert.New("fleetd.demo", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		client *http.Client
		token  string
	}{
		"the token without a client certificate":       {r.client, token},
		"the token with another certificate":           {withCert(r.client, other.TLS), token},
		"the replicas' certificate without the token":  {withCert(r.client, r.cert), ""},
		"the replicas' certificate with a wrong token": {withCert(r.client, r.cert), strings.Repeat("0", 64)},
	} {
		if status := lend(c.client, "https://"+r.replicas[1].peers, c.token); status != http.StatusUnauthorized {
			t.Errorf("a lend with %s: %d, want 401", name, status)
		}
	}
	if status := lend(withCert(r.client, r.cert), "https://"+r.replicas[1].peers, token); status != http.StatusNotFound {
		t.Errorf("a lend of an unknown code with the token and the certificate: %d, want 404 (not held)", status)
	}
	for i, u := range urls {
		if status := lend(withCert(r.client, r.cert), u, token); status != http.StatusNotFound {
			t.Errorf("a lend at fleetd-%d's machines' listener, with the token and the certificate: %d, want 404", i, status)
		}
	}
}

// A flood of made-up install codes from one address at fleetd-2 costs the
// other replicas a few lend requests, not one per code: once the address's
// fetches found their codes held nowhere 8 times in a minute, its next
// fetches of unknown codes are answered 404 without asking. Then a run
// replaced before its node fetched its config leaves nothing to fetch or
// join with: w-01 attests at fleetd-0, which renders run A and holds its
// config; the operator asks for a new run, and w-01's next attestation, at
// fleetd-1, starts run B. A's code then gets 404 at every replica, A's
// bootstrap token is gone, and B's config, fetched by the node from its
// own address at the flooded fleetd-2, is borrowed and served.
func TestReplacedRunConfigDropped(t *testing.T) {
	r := newProcFleet(t, procFleetConfig{replicas: 3}, testNode{name: "w-01", class: "worker", approve: true})
	urls := r.urls()
	lends := func() float64 {
		n := 0.0
		for _, i := range []int{0, 1} {
			n += metricValue(r.replicas[i].scrape(r.ctx), `fleet_peer_requests_total{path="lend",result="answered"}`)
		}
		return n
	}
	flooder := boundClient(r.world, "127.0.0.66")
	const flood = 200
	for i := range flood {
		if status, _, err := fetch(r.ctx, flooder, urls[2]+configserve.PathPrefix+configserve.NewCode()); err != nil || status != http.StatusNotFound {
			t.Fatalf("made-up code %d: %d, %v; want 404", i, status, err)
		}
	}
	if got := lends(); got > 2*8 {
		t.Errorf("%d fetches of made-up codes cost the other replicas %v lend requests, want at most %d", flood, got, 2*8)
	}

	// w-01 attests at fleetd-0, then at fleetd-1; an admission that raced
	// the leader's loop (both start a run at once, and one gives way) is
	// decided on the client's next try (attest.ErrAdmitLater).
	hasToken := func(run string) bool { return len(r.runTokens(run)) > 0 }
	a, _ := r.attestAt("w-01", urls[0])
	if a.InstallCode == "" {
		t.Fatalf("w-01 at fleetd-0: %+v, want a code", a)
	}
	runA := r.startedRun("w-01")
	if !hasToken(runA) {
		t.Fatalf("no bootstrap token of run A (%s)", runA)
	}
	r.setDesiredAction("w-01")
	b, _ := r.attestAt("w-01", urls[1])
	if b.InstallCode == "" || b.InstallCode == a.InstallCode {
		t.Fatalf("w-01 at fleetd-1 after run A: %+v; want the new run's code", b)
	}
	r.wantAtEach(a.InstallCode, http.StatusNotFound, "run A's code after run B started")
	var runB string
	for _, l := range r.journalOf("w-01") {
		if run := runOf(l); run != "" && run != runA {
			runB = run
		}
	}
	if hasToken(runA) || !hasToken(runB) {
		t.Errorf("bootstrap tokens after run B (%s): A's %v, B's %v; want B's alone", runB, hasToken(runA), hasToken(runB))
	}
	r.wantServed(boundClient(r.world, nodeAddr(0)), urls[2]+configserve.PathPrefix+b.InstallCode, "run B's config")
}

// attestAt runs the machine's attestation at url (a replica's, or the
// balancer's) from its node's address, trying again after 500 ms, and
// returns its result and the last proof it sent; it ends the test when
// the attestation gets no verdict.
func (pf *procFleet) attestAt(name, url string) (attest.Result, []byte) {
	pf.t.Helper()
	m := pf.machines[name]
	var proof []byte
	keep := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if strings.HasSuffix(req.URL.Path, "/proof") && req.Body != nil {
			b, err := io.ReadAll(req.Body)
			if err != nil {
				return nil, err
			}
			proof, req.Body = b, io.NopCloser(bytes.NewReader(b))
		}
		return m.client.Transport.RoundTrip(req)
	})
	var console strings.Builder
	res, err := attest.Run(pf.ctx, url+"/attest", m.tpm, m.claim(), &attest.ClientConfig{
		HTTPClient: &http.Client{Transport: keep, Timeout: 30 * time.Second}, Console: &console,
		Backoff: func(int) time.Duration { return 500 * time.Millisecond },
	})
	if err != nil {
		pf.t.Fatalf("%s at %s: %+v, %v\n%s", name, url, res, err, console.String())
	}
	return res, proof
}

// wantReplayRefused replays proof to each replica, and fails the test
// unless each refuses it without code: 409 (spent), or, when gone, 410 (a
// replica whose clock runs ahead finds the session expired).
func (pf *procFleet) wantReplayRefused(proof []byte, code string, gone bool) {
	pf.t.Helper()
	for _, p := range pf.replicas {
		rsp, err := pf.client.Post("https://"+p.addr+"/attest/proof", "application/json", bytes.NewReader(proof))
		if err != nil {
			pf.t.Fatal(err)
		}
		body, _ := io.ReadAll(rsp.Body)
		rsp.Body.Close()
		if rsp.StatusCode != http.StatusConflict && (!gone || rsp.StatusCode != http.StatusGone) || code != "" && bytes.Contains(body, []byte(code)) {
			pf.t.Errorf("the proof replayed to %s: %d %s; want 409 (or 410: %v) and no code", p.name, rsp.StatusCode, body, gone)
		}
	}
}

// wantAtEach fetches the config of code at each replica, from the first
// node's address, and fails the test unless each answers status; what
// names the fetch.
func (pf *procFleet) wantAtEach(code string, status int, what string) {
	pf.t.Helper()
	for i, u := range pf.urls() {
		if got, _, err := fetch(pf.ctx, boundClient(pf.world, nodeAddr(0)), u+configserve.PathPrefix+code); err != nil || got != status {
			pf.t.Errorf("%s at fleetd-%d: %d, %v; want %d", what, i, got, err, status)
		}
	}
}
