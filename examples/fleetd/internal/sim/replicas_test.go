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
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/spentlease"
	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/internal/testcert"
	"github.com/fleetkit/fleet/provision"
)

// proofRecorder keeps the last proof a client sent.
type proofRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	body []byte
}

func (p *proofRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/proof") && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.body = b
		p.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	return p.next.RoundTrip(req)
}

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
	m := r.machines["w-01"]
	lb := m.client
	rec := &proofRecorder{next: lb.Transport}
	var console strings.Builder
	res, err := attest.Run(r.ctx, r.url+"/attest", m.tpm, m.claim(),
		&attest.ClientConfig{HTTPClient: &http.Client{Transport: rec, Timeout: 30 * time.Second}, Console: &console})
	if err != nil || res.InstallCode == "" {
		t.Fatalf("w-01 through the balancer: %+v, %v\n%s", res, err, console.String())
	}
	if len(r.journalWith("w-01", "info: started Workflow provision-w-01-")) == 0 {
		t.Errorf("when w-01 held its install code, its journal held no started line: %q", r.journalOf("w-01"))
	}
	leases, err := r.kube.CoordinationV1().Leases(r.settings.Namespace).List(r.ctx, metav1.ListOptions{LabelSelector: spentlease.LabelSpent + "=true"})
	if err != nil || len(leases.Items) != 1 {
		t.Errorf("spent session Leases: %v, %v; want the one session's", leases, err)
	}
	for i, u := range urls {
		rsp, err := r.client.Post(u+"/attest/proof", "application/json", bytes.NewReader(rec.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rsp.Body)
		rsp.Body.Close()
		if rsp.StatusCode != http.StatusConflict || bytes.Contains(body, []byte(res.InstallCode)) {
			t.Errorf("the proof replayed to fleetd-%d: %d %s; want 409 and no code", i, rsp.StatusCode, body)
		}
	}

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
	for i, u := range urls {
		if status, _, err := fetch(r.ctx, boundClient(r.world, nodeAddr(0)), u+configserve.PathPrefix+res.InstallCode); err != nil || status != http.StatusGone {
			t.Errorf("a fetch at fleetd-%d after the config was served: %d, %v; want 410", i, status, err)
		}
	}
	line := r.waitJournal("w-01", "fleetd served the config of ")
	if n := len(r.journalWith("w-01", line)); n != 1 {
		t.Errorf("%q journaled %d times, want once", line, n)
	}
	if status, _, err := fetch(r.ctx, lb, r.url+configserve.PathPrefix+configserve.NewCode()); err != nil || status != http.StatusNotFound {
		t.Errorf("an unknown code through the balancer: %d, %v; want 404", status, err)
	}

	// w-02's EKs are not approved: its claim waits on the replica its
	// proof reached, and an approver asking any replica sees it.
	m2 := r.machines["w-02"]
	if res, _ := attest.Run(r.ctx, r.url+"/attest", m2.tpm, m2.claim(),
		&attest.ClientConfig{HTTPClient: m2.client, Console: io.Discard}); res.Verdict != attest.PendingApproval {
		t.Fatalf("w-02: verdict %q, want pending-approval", res.Verdict)
	}
	for i, u := range urls {
		rsp, claims := claimsAt(t, r.client, u, m2.serial, approverToken)
		if rsp.StatusCode != http.StatusOK || len(claims) != 1 || rsp.Header.Get("Fleet-Replicas-Unanswered") != "" {
			t.Errorf("claims of %s at fleetd-%d: %d %v; want the one waiting claim", m2.serial, i, rsp.StatusCode, claims)
		}
	}

	// A control plane waits for the operator, who asks for its run: the
	// leader's loop starts it, and cp-03's attestation at another replica
	// gets that run's code from the leader: the run is not replaced.
	m3 := r.machines["cp-03"]
	cp := func(url string) attest.Result {
		t.Helper()
		res, err := attest.Run(r.ctx, url+"/attest", m3.tpm, m3.claim(),
			&attest.ClientConfig{HTTPClient: boundClient(r.world, nodeAddr(2)), Console: io.Discard})
		if err != nil {
			t.Fatalf("cp-03 at %s: %+v, %v", url, res, err)
		}
		return res
	}
	if res := cp(urls[0]); res.InstallCode != "" {
		t.Fatalf("cp-03 before the operator asked: %+v, want no code", res)
	}
	r.setDesiredAction("cp-03")
	const startedBy = "; Rufio power-cycles the machine so that its next attestation from HookOS receives the install code"
	started := r.waitJournal("cp-03", startedBy)
	_, run3, _ := strings.Cut(strings.TrimSuffix(started, startedBy), "started Workflow ")
	wfs := r.tink.Resource(provision.WorkflowResource).Namespace(r.settings.Namespace)
	before, err := wfs.Get(r.ctx, run3, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := r.leaders()
	if len(l) != 1 {
		t.Fatalf("replicas leading: %v", l)
	}
	res3 := cp(urls[(l[0]+1)%len(urls)])
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

	m := r.machines["w-01"]
	// The machine attests at replica i; an admission that raced the
	// leader's loop (both start a run at once, and one gives way) is
	// decided on the client's next try (attest.ErrAdmitLater).
	at := func(i int) attest.Result {
		t.Helper()
		res, err := attest.Run(r.ctx, urls[i]+"/attest", m.tpm, m.claim(),
			&attest.ClientConfig{HTTPClient: boundClient(r.world, nodeAddr(0)), Console: io.Discard,
				Backoff: func(int) time.Duration { return 500 * time.Millisecond }})
		if err != nil || res.InstallCode == "" {
			t.Fatalf("w-01 at fleetd-%d: %+v, %v", i, res, err)
		}
		return res
	}
	// A run's Workflow names its bootstrap token's Secret (the test API
	// server's kube-system holds every test's tokens).
	tokens := map[string]string{} // by run
	tokenOf := func(run string) string {
		t.Helper()
		if name, ok := tokens[run]; ok {
			return name
		}
		wf, err := r.tink.Resource(provision.WorkflowResource).Namespace(r.settings.Namespace).Get(r.ctx, run, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Workflow %s: %v", run, err)
		}
		tokens[run] = wf.GetAnnotations()["fleet.fleetkit.dev/bootstrap-token"]
		return tokens[run]
	}
	hasToken := func(run string) bool {
		t.Helper()
		_, err := r.kube.CoreV1().Secrets("kube-system").Get(r.ctx, tokenOf(run), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	runOf := func(line string) string {
		_, run, _ := strings.Cut(line, "started Workflow ")
		run, _, _ = strings.Cut(run, ";")
		return run
	}
	a := at(0)
	runA := runOf(r.waitJournal("w-01", "started Workflow "))
	if !hasToken(runA) {
		t.Fatalf("no bootstrap token of run A (%s)", runA)
	}
	r.setDesiredAction("w-01")
	b := at(1)
	if b.InstallCode == a.InstallCode {
		t.Fatal("the new run answered the old run's code")
	}
	for i, u := range urls {
		if status, _, err := fetch(r.ctx, boundClient(r.world, nodeAddr(0)), u+configserve.PathPrefix+a.InstallCode); err != nil || status != http.StatusNotFound {
			t.Errorf("run A's code at fleetd-%d after run B started: %d, %v; want 404", i, status, err)
		}
	}
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
