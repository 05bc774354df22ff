package attest_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/internal/syncbuf"
)

// hook is an admission hook that records its calls.
type hook struct {
	mu     sync.Mutex
	claims []attest.Claim
	adm    attest.Admission
	err    error
	// first, when set, are the errors of the first calls, in order.
	first []error
}

func (h *hook) admit(_ context.Context, c attest.Claim) (attest.Admission, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims = append(h.claims, c)
	if len(h.first) > 0 {
		err := h.first[0]
		h.first = h.first[1:]
		return attest.Admission{}, err
	}
	return h.adm, h.err
}

func (h *hook) calls() []attest.Claim {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]attest.Claim(nil), h.claims...)
}

// fleet is a server under test, mounted the way fleetd mounts it: under a
// prefix of its own, over HTTPS.
type fleet struct {
	srv      *attest.Server
	ts       *httptest.Server
	url      string
	logs     *syncbuf.Buffer
	bindings *attesttest.Bindings
	hook     *hook

	judgedMu sync.Mutex
	judged   []attest.Judgement // what Config.Judged was called with

	backoffs atomic.Int64 // how often run's clients backed off
}

func (f *fleet) judgements() []attest.Judgement {
	f.judgedMu.Lock()
	defer f.judgedMu.Unlock()
	return append([]attest.Judgement(nil), f.judged...)
}

// newFleetFor is newFleet with serial S1's binding approving tpm's EKs.
func newFleetFor(t testing.TB, cfg *attest.Config, tpm attest.TPM) *fleet {
	t.Helper()
	f := newFleet(t, cfg)
	f.bindings.Set("S1", attesttest.Approved(t, tpm))
	return f
}

// approvedFleet is newFleetFor with quickTPM(t, 0), which it returns.
func approvedFleet(t testing.TB, cfg *attest.Config) (*fleet, *attesttest.SoftTPM) {
	t.Helper()
	tpm := quickTPM(t, 0)
	return newFleetFor(t, cfg, tpm), tpm
}

// newFleet mounts a server under test whose bindings are f.bindings, with
// cfg's settings and the fleet's log, admission hook and judgements.
func newFleet(t testing.TB, cfg *attest.Config) *fleet {
	t.Helper()
	f := &fleet{logs: &syncbuf.Buffer{}, bindings: &attesttest.Bindings{},
		hook: &hook{adm: attest.Admission{InstallCode: "code-Zq81-secret"}}}
	var c attest.Config
	if cfg != nil {
		c = *cfg
	}
	c.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	if c.Admit == nil {
		c.Admit = f.hook.admit
	}
	if c.Judged == nil {
		c.Judged = func(_ context.Context, _ attest.Claim, j attest.Judgement) {
			f.judgedMu.Lock()
			defer f.judgedMu.Unlock()
			f.judged = append(f.judged, j)
		}
	}
	srv, err := attest.NewServer(f.bindings, &c)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	mux := http.NewServeMux()
	mux.Handle("/v1/attest/", http.StripPrefix("/v1/attest", srv))
	f.ts = httptest.NewTLSServer(mux)
	t.Cleanup(f.ts.Close)
	f.url = f.ts.URL + "/v1/attest"
	return f
}

var testMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}

func (f *fleet) run(t testing.TB, tpm attest.TPM, serial string, lldp *attest.LLDP) (attest.Result, string, error) {
	return f.runEventLog(t, tpm, serial, lldp, nil)
}

// runLog attests tpm with log as its event log.
func (f *fleet) runLog(t testing.TB, tpm attest.TPM, serial string, log []byte) (attest.Result, string, error) {
	return f.runEventLog(t, tpm, serial, nil, func() ([]byte, error) { return log, nil })
}

func (f *fleet) runEventLog(t testing.TB, tpm attest.TPM, serial string, lldp *attest.LLDP, log func() ([]byte, error)) (attest.Result, string, error) {
	t.Helper()
	var console bytes.Buffer
	res, err := attest.Run(context.Background(), f.url, tpm, attest.Machine{Serial: serial, MAC: testMAC, LLDP: lldp}, &attest.ClientConfig{
		HTTPClient: f.ts.Client(),
		Backoff:    func(int) time.Duration { f.backoffs.Add(1); return 0 },
		Console:    &console,
		EventLog:   log,
	})
	return res, console.String(), err
}

// post sends body to the server's endpoint op and returns the status and
// the answer.
func (f *fleet) post(t testing.TB, op string, body []byte) (int, []byte) {
	t.Helper()
	rsp, err := f.ts.Client().Post(f.url+"/"+op, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rsp.StatusCode, b
}

// serve has h, mounted at /attest/, answer a POST of body to op.
func serve(h http.Handler, op string, body []byte) (int, []byte) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/attest/"+op, bytes.NewReader(body)))
	return rec.Code, rec.Body.Bytes()
}

// The wire messages, as a client of our own writes them.
type wireEK struct {
	Kind        string `json:"kind"`
	Public      []byte `json:"public"`
	Certificate []byte `json:"certificate,omitempty"`
}

type wireAK struct {
	Public            []byte `json:"public"`
	CreateData        []byte `json:"create_data"`
	CreateAttestation []byte `json:"create_attestation"`
	CreateSignature   []byte `json:"create_signature"`
}

type wireClaim struct {
	Version int          `json:"version"`
	Serial  string       `json:"serial"`
	MAC     string       `json:"mac"`
	LLDP    *attest.LLDP `json:"lldp"`
	EKs     []wireEK     `json:"eks"`
	AK      wireAK       `json:"ak"`
}

type wireChallenge struct {
	Session    []byte `json:"session"`
	Challenges []struct {
		Kind       string `json:"kind"`
		Credential []byte `json:"credential"`
		Secret     []byte `json:"secret"`
	} `json:"challenges"`
}

type wireSecret struct {
	Kind   string `json:"kind"`
	Secret []byte `json:"secret"`
}

type wireProof struct {
	Session []byte       `json:"session"`
	Secrets []wireSecret `json:"secrets"`
	Quote   *wireQuote   `json:"quote,omitempty"`
}

type wireQuote struct {
	Quote     []byte     `json:"quote"`
	Signature []byte     `json:"signature"`
	Banks     []wireBank `json:"banks"`
	// EventLog follows the proof's JSON object (proofBody), its length in
	// EventLogBytes.
	EventLogBytes int    `json:"event_log_bytes,omitempty"`
	EventLog      []byte `json:"-"`
}

type wireBank struct {
	Alg  string   `json:"alg"`
	PCRs [][]byte `json:"pcrs"`
}

// proofBody is p as a client sends it: its JSON object, then its quote's
// event log.
func proofBody(t testing.TB, p wireProof) []byte {
	t.Helper()
	var log []byte
	if p.Quote != nil {
		q := *p.Quote
		q.EventLogBytes, log = len(q.EventLog), q.EventLog
		p.Quote = &q
	}
	return append(mustJSON(t, p), log...)
}

type wireResult struct {
	Verdict     string `json:"verdict"`
	Reason      string `json:"reason"`
	InstallCode string `json:"install_code"`
	Error       string `json:"error"`
}

func claimOf(t testing.TB, tpm attest.TPM, serial string) wireClaim {
	t.Helper()
	eks, err := tpm.EKs()
	if err != nil {
		t.Fatal(err)
	}
	ak, err := tpm.AK()
	if err != nil {
		t.Fatal(err)
	}
	c := wireClaim{Version: 1, Serial: serial, MAC: testMAC.String(), AK: wireAK{ak.Public, ak.CreateData, ak.CreateAttestation, ak.CreateSignature}}
	for _, ek := range eks {
		der, err := x509.MarshalPKIXPublicKey(ek.Public)
		if err != nil {
			t.Fatal(err)
		}
		c.EKs = append(c.EKs, wireEK{Kind: ek.Kind.String(), Public: der})
	}
	return c
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// challenge sends tpm's claim and returns the challenge.
func (f *fleet) challenge(t testing.TB, tpm attest.TPM, serial string) wireChallenge {
	t.Helper()
	status, b := f.post(t, "claim", mustJSON(t, claimOf(t, tpm, serial)))
	return challengeOf(t, status, b)
}

// challengeOf decodes the answer to a claim, which must be a challenge.
func challengeOf(t testing.TB, status int, b []byte) wireChallenge {
	t.Helper()
	if status != http.StatusOK {
		t.Fatalf("claim: %d %s", status, b)
	}
	var ch wireChallenge
	if err := json.Unmarshal(b, &ch); err != nil {
		t.Fatal(err)
	}
	return ch
}

// activate answers a challenge with tpm.
func activate(t testing.TB, tpm attest.TPM, ch wireChallenge) wireProof {
	t.Helper()
	p := wireProof{Session: ch.Session}
	for _, c := range ch.Challenges {
		kind := attest.RSA2048
		if c.Kind == "eccp256" {
			kind = attest.ECCP256
		}
		s, err := tpm.ActivateCredential(attest.Challenge{Kind: kind, Credential: c.Credential, Secret: c.Secret})
		if err != nil {
			t.Fatal(err)
		}
		p.Secrets = append(p.Secrets, wireSecret{Kind: c.Kind, Secret: s})
	}
	return p
}

func (f *fleet) prove(t testing.TB, p wireProof) (int, wireResult) {
	t.Helper()
	status, b := f.post(t, "proof", proofBody(t, p))
	var r wireResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("proof answer %q: %v", b, err)
	}
	return status, r
}

// proveWant sends p and fails t unless the answer has the status want:
// for 200, with the verdict attested and an install code; otherwise with
// neither.
func (f *fleet) proveWant(t testing.TB, what string, p wireProof, want int) {
	t.Helper()
	status, r := f.prove(t, p)
	ok := want == http.StatusOK
	if status != want || ok && (r.Verdict != "attested" || r.InstallCode == "") || !ok && (r.Verdict != "" || r.InstallCode != "") {
		t.Errorf("%s: %d %+v, want %d", what, status, r, want)
	}
}

var (
	rsaMu   sync.Mutex
	rsaKeys = map[int]*rsa.PrivateKey{}
)

// rsaKey returns test RSA EK number i, generated once per test binary.
func rsaKey(t testing.TB, i int) *rsa.PrivateKey {
	t.Helper()
	rsaMu.Lock()
	defer rsaMu.Unlock()
	if k, ok := rsaKeys[i]; ok {
		return k
	}
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaKeys[i] = k
	return k
}

// quickTPM is a SoftTPM with RSA EK number i and a fresh ECC EK.
func quickTPM(t testing.TB, i int) *attesttest.SoftTPM {
	return attesttest.MakeSoftTPM(t, &attesttest.SoftConfig{RSAEK: rsaKey(t, i)})
}

// verdictCase is a serial's binding and the verdict a TPM gets with it.
type verdictCase struct {
	name    string
	seed    int64           // the simulator's seed (TestVerdictsSimulator)
	binding *attest.Binding // nil: no entry names the serial
	verdict attest.Verdict
	refused string // the EK hash the verdict refuses
	console string
}

// attestsAs has f hold tc's binding of serial FLK-0001, attests tpm as
// that serial with lldp, and checks every effect of the verdict: the
// console, one binding read, one judgement, the audit line with the
// proven hashes and the refused one; an attested claim admitted with the
// proven hashes and an install code, a refused one not admitted, a
// pending one waiting.
func attestsAs(t *testing.T, f *fleet, tpm attest.TPM, lldp *attest.LLDP, tc verdictCase) {
	t.Helper()
	const serial = "FLK-0001"
	if tc.binding != nil {
		f.bindings.Set(serial, *tc.binding)
	}
	res, console, err := f.run(t, tpm, serial, lldp)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, console)
	}
	if res.Verdict != tc.verdict || console != tc.console {
		t.Fatalf("verdict %s (%s), console:\n%s\nwant %s, console:\n%s", res.Verdict, res.Reason, console, tc.verdict, tc.console)
	}
	if got := f.bindings.Calls(); got != 1 {
		t.Errorf("the binding source was asked %d times, want 1", got)
	}
	calls := f.hook.calls()
	if js := f.judgements(); len(js) != 1 || js[0].Verdict != tc.verdict || js[0].RefusedHash != tc.refused {
		t.Errorf("Config.Judged got %+v, want one %s judgement refusing %q", js, tc.verdict, tc.refused)
	}
	audit := f.logs.Lines("attest.verdict")
	if len(audit) != 1 {
		t.Fatalf("audit lines %q, want one", audit)
	}
	for _, want := range []string{"serial=" + serial, "verdict=" + tc.verdict.String(), "peer=127.0.0.1:"} {
		if !strings.Contains(audit[0], want) {
			t.Errorf("audit line %q lacks %q", audit[0], want)
		}
	}
	// The proven hashes are in the line, to compare with evidence.
	proven := attesttest.Approved(t, tpm)
	for kind, h := range map[string]string{"rsa2048": proven.RSA2048, "eccp256": proven.ECCP256} {
		if h != "" && !strings.Contains(audit[0], "ek_"+kind+"="+h) {
			t.Errorf("audit line %q lacks the proven %s hash", audit[0], kind)
		}
	}
	// The refused hash, when the verdict has one; the attribute is
	// absent otherwise.
	if has := strings.Contains(audit[0], "refused_ek_hash="); has != (tc.refused != "") || has && !strings.Contains(audit[0], "refused_ek_hash="+tc.refused) {
		t.Errorf("audit line %q, want the refused hash %q", audit[0], tc.refused)
	}
	if tc.verdict != attest.Attested {
		if len(calls) != 0 {
			t.Errorf("a refusal called the admission hook %d times", len(calls))
		}
		if res.InstallCode != "" {
			t.Error("a refusal answered an install code")
		}
	} else {
		if len(calls) != 1 {
			t.Fatalf("the admission hook was called %d times, want 1", len(calls))
		}
		c := calls[0]
		if c.Serial != serial || !bytes.Equal(c.MAC, testMAC) || !reflect.DeepEqual(c.LLDP, lldp) {
			t.Errorf("the hook got claim %+v", c)
		}
		if c.RSA2048 != proven.RSA2048 || c.ECCP256 != proven.ECCP256 {
			t.Errorf("the hook got proven hashes %s %s, want %s %s", c.RSA2048, c.ECCP256, proven.RSA2048, proven.ECCP256)
		}
		if res.InstallCode != "code-Zq81-secret" {
			t.Errorf("install code %q", res.InstallCode)
		}
	}
	ws := f.srv.Waiting(serial)
	if waiting := len(ws) == 1; waiting != (tc.verdict == attest.PendingApproval) || len(ws) > 1 {
		t.Errorf("Waiting(%s) = %d claims, want %v", serial, len(ws), tc.verdict == attest.PendingApproval)
	}
	if len(ws) == 1 {
		w := ws[0]
		if w.RSA2048 != proven.RSA2048 || w.ECCP256 != proven.ECCP256 || w.Serial != serial || !reflect.DeepEqual(w.LLDP, lldp) {
			t.Errorf("the waiting claim is %+v", w)
		}
	}
}

// checkRefused checks a Run that fleetd refused without a verdict, for
// reason: ErrRefused, the reason on the console once, no verdict or code,
// no second try, no admission, and one audit line attest.verdict, a
// warning with the reason and no verdict.
func checkRefused(t *testing.T, f *fleet, res attest.Result, console string, err error, reason string) {
	t.Helper()
	if !errors.Is(err, attest.ErrRefused) || res.Verdict != 0 || res.InstallCode != "" || res.Reason != reason || res.Tries != 1 {
		t.Fatalf("Run: %+v %v, want ErrRefused %q", res, err, reason)
	}
	if want := "attest: FAILED\nattest: " + reason + "\n"; console != want {
		t.Errorf("console:\n%s\nwant:\n%s", console, want)
	}
	if n := len(f.hook.calls()); n != 0 || f.backoffs.Load() != 0 {
		t.Errorf("admitted %d times, backed off %d times", n, f.backoffs.Load())
	}
	lines := f.logs.Lines("attest.verdict")
	if len(lines) != 1 || !strings.Contains(lines[0], `reason="`+strings.ReplaceAll(reason, `"`, `\"`)+`"`) ||
		strings.Contains(lines[0], "verdict=") || !strings.Contains(lines[0], "level=WARN") {
		t.Fatalf("attest.verdict %q, want the reason %q and no verdict", lines, reason)
	}
}
