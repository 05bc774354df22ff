package main

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/internal/testcert"
)

const (
	approverToken = "approver-token-7f3c9a"
	rsaHash       = "4abbd923999a08736738b2ebbdfe7f8805209accec519129602f5a5c26bafb55"
	eccHash       = "bcb70759f483fe758241c94bc7479a428c4f521eab2f88c3fbb1771113737b4f"
	otherRSAHash  = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	otherECCHash  = "7d6c5b4a39281706f5e4d3c2b1a098877d6c5b4a39281706f5e4d3c2b1a09887"
)

// fakeFleetd serves fleetd's approver API over HTTPS: GET
// /v1/claims/{serial} for a bearer token or a client certificate signed by
// clientCA, 401 for anyone else, 404 for a serial no claim waits for.
type fakeFleetd struct {
	srv *httptest.Server

	mu      sync.Mutex
	answers map[string]any // by serial: what is answered, as JSON
	status  int            // when set, answered instead of a claim
	paths   []string       // escaped paths requested
}

func newFakeFleetd(t *testing.T, clientCA *x509.Certificate) *fakeFleetd {
	t.Helper()
	f := &fakeFleetd{answers: map[string]any{}}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	f.srv.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven}
	if clientCA != nil {
		f.srv.TLS.ClientCAs = x509.NewCertPool()
		f.srv.TLS.ClientCAs.AddCert(clientCA)
	}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	ca := filepath.Join(t.TempDir(), "fleetd-ca.pem")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})))
	t.Setenv("FLEETD_URL", f.srv.URL)
	t.Setenv("FLEETD_CA", ca)
	t.Setenv("FLEET_APPROVER_TOKEN", approverToken)
	t.Setenv("FLEETD_CERT", "")
	t.Setenv("FLEETD_KEY", "")
	return f
}

func (f *fakeFleetd) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = append(f.paths, r.URL.EscapedPath())
	escaped, ok := strings.CutPrefix(r.URL.EscapedPath(), "/v1/claims/")
	if !ok || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	byToken := subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+approverToken)) == 1
	byCert := r.TLS != nil && len(r.TLS.VerifiedChains) > 0
	if !byToken && !byCert {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if f.status != 0 {
		http.Error(w, "fleetd: netbox did not answer\nsecond line", f.status)
		return
	}
	serial, err := url.PathUnescape(escaped)
	answer, found := f.answers[serial]
	if err != nil || !found {
		http.Error(w, "no claim waits", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(answer)
}

// answer makes fleetd answer v, as JSON, for serial.
func (f *fakeFleetd) answer(serial string, v any) {
	f.mu.Lock()
	f.answers[serial] = v
	f.mu.Unlock()
}

func (f *fakeFleetd) requested() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...)
}

// claimJSON is fleetd's answer for c, with c.String() as its text.
func claimJSON(c attest.Claim) map[string]any {
	var lldp any
	if c.LLDP != nil {
		lldp = c.LLDP
	}
	return map[string]any{
		"serial": c.Serial, "mac": c.MAC.String(), "peer": c.Peer, "proven": c.Proven.Format(time.RFC3339),
		"lldp": lldp, "ek_rsa2048": c.RSA2048, "ek_eccp256": c.ECCP256, "text": c.String(),
	}
}

// exampleClaim is the claim of w-05, which no entry approves yet.
func exampleClaim(serial string) attest.Claim {
	return attest.Claim{
		Serial: serial,
		MAC:    net.HardwareAddr{0x58, 0x47, 0xca, 0x70, 0x12, 0x34},
		LLDP: &attest.LLDP{ChassisIDSubtype: 4, ChassisID: "74:ac:b9:11:22:33", PortIDSubtype: 7, PortID: "Port 10",
			PortDescription: "w-05", SystemName: "usw"},
		RSA2048: rsaHash,
		ECCP256: eccHash,
		Peer:    "10.40.0.105:50412",
		Proven:  time.Date(2026, 12, 2, 14, 5, 9, 0, time.UTC),
	}
}

// impostorClaim is another TPM's claim of serial, from another port, after
// the machine's.
func impostorClaim(serial string) attest.Claim {
	c := exampleClaim(serial)
	c.MAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x66}
	c.LLDP.PortID, c.LLDP.PortDescription = "Port 22", "free"
	c.RSA2048, c.ECCP256 = otherRSAHash, otherECCHash
	c.Peer, c.Proven = "10.40.0.166:40022", time.Date(2026, 12, 2, 14, 7, 41, 0, time.UTC)
	return c
}

// clientCert makes an approver's CA and writes a client certificate it
// issued, and its key, as PEM files.
func clientCert(t *testing.T) (ca *x509.Certificate, certPath, keyPath string) {
	t.Helper()
	caCert, client, err := testcert.NewClient("ada")
	if err != nil {
		t.Fatal(err)
	}
	if certPath, keyPath, err = client.WriteFiles(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	return caCert.TLS.Leaf, certPath, keyPath
}

// approve prints each claim fleetd holds for the serial with the lines that
// would approve it, and approves nothing: the runbook's claim (as the
// golden file shows it, asked for by token or by client certificate), two
// claims (a plain line says so first, each claim followed by its own
// lines), and every answer fleetd may give, whatever its serial holds.
func TestApproveAnswers(t *testing.T) {
	ca, certPath, keyPath := clientCert(t)
	_, rogueCert, rogueKey := clientCert(t) // a certificate fleetd's CA did not sign
	onlyRSA := exampleClaim("ONLY-RSA")
	onlyRSA.ECCP256 = ""
	onlyRSA.LLDP = nil
	withoutEK := func(serial string) attest.Claim {
		c := exampleClaim(serial)
		c.RSA2048, c.ECCP256 = "", ""
		return c
	}
	noEK, twoNoEK, noEKTwice := withoutEK("NO-EK"), withoutEK("TWO-NO-EK"), withoutEK("NO-EK-TWICE")
	// approves is what approve prints after the text of a claim that
	// proved EKs of these hashes; noLine, of one that proved none.
	approves := func(hashes string) string {
		return "\nFor the node's entry in the nodes file, once each hash matches your evidence:\n" + hashes + "\n" + approveCaution + "\n" + approvedNothing + "\n"
	}
	both := "approved_ek_rsa2048: " + rsaHash + "\napproved_ek_eccp256: " + eccHash + "\n"
	const noLine = "\nThe claim proved no EK, so no line can approve it.\n"
	// with is claimJSON(c) with key's value v.
	with := func(c attest.Claim, key string, v any) map[string]any {
		m := claimJSON(c)
		m[key] = v
		return m
	}
	other := claimJSON(exampleClaim("SOMEONE-ELSE"))
	for _, c := range []struct {
		name   string
		serial string
		env    map[string]string
		status int    // fleetd answers this instead of a claim
		down   bool   // fleetd is not running
		code   int    // exit code
		stdout string // what stdout holds ("" for nothing)
		stderr string // a part of stderr
		nreq   int    // requests fleetd must have seen; -1 for any
		path   string // when set, the one path fleetd was asked
		answer any    // what fleetd answers for serial: the claims it holds, or anything; nil: no claim waits
		golden string // when set, the file stdout must be, instead of stdout
	}{
		{name: "the runbook's claim", serial: "G6NUC13-88122", answer: []any{claimJSON(exampleClaim("G6NUC13-88122"))},
			code: 0, golden: "testdata/approve.golden", nreq: 1, path: "/v1/claims/G6NUC13-88122"},
		{name: "two claims", serial: "G6NUC13-88122", answer: []any{claimJSON(exampleClaim("G6NUC13-88122")), claimJSON(impostorClaim("G6NUC13-88122"))},
			code: 1, golden: "testdata/approve-two.golden", nreq: 1},
		{name: "no claim waits", serial: "MS01-2407-0099", code: 1, stdout: "no claim waits for serial MS01-2407-0099\n", nreq: 1},
		{name: "a serial that needs escaping", serial: "A/B C?#", answer: []any{claimJSON(exampleClaim("A/B C?#"))},
			code: 0, stdout: exampleClaim("A/B C?#").String() + approves(both), nreq: 1, path: "/v1/claims/A%2FB%20C%3F%23"},
		{name: "a client certificate", serial: "G6NUC13-88122", answer: []any{claimJSON(exampleClaim("G6NUC13-88122"))},
			env: map[string]string{"FLEET_APPROVER_TOKEN": "", "FLEETD_CERT": certPath, "FLEETD_KEY": keyPath}, code: 0, golden: "testdata/approve.golden", nreq: 1},
		{name: "a client certificate fleetd's CA did not sign", serial: "MS01-2407-0099",
			env:  map[string]string{"FLEET_APPROVER_TOKEN": "", "FLEETD_CERT": rogueCert, "FLEETD_KEY": rogueKey},
			code: 2, stderr: "refused the TLS connection", nreq: 0},
		{name: "one EK", serial: "ONLY-RSA", answer: []any{claimJSON(onlyRSA)}, code: 0, stdout: onlyRSA.String() + approves("approved_ek_rsa2048: "+rsaHash+"\n"), nreq: 1},
		{name: "no EK", serial: "NO-EK", answer: []any{claimJSON(noEK)}, code: 1, stdout: noEK.String() + noLine + approvedNothing + "\n", nreq: 1},
		{name: "no text", serial: "NO-TEXT", answer: []any{with(exampleClaim("NO-TEXT"), "text", "")}, code: 0, stdout: exampleClaim("NO-TEXT").String() + approves(both), nreq: 1},
		{name: "a text that would drive the terminal", serial: "HOSTILE", answer: []any{with(exampleClaim("HOSTILE"), "text", "serial HOSTILE\x1b]0;approved\x07\u202e\n")},
			code: 0, stdout: `serial HOSTILE\x1b]0;approved\x07\u202e` + "\n" + approves(both), nreq: 1},
		{name: "the claim of another serial", serial: "ASKED", answer: []any{other}, code: 2, stderr: "answered a claim of serial SOMEONE-ELSE, not of ASKED", nreq: 1},
		{name: "a second claim of another serial", serial: "ASKED-TWICE", answer: []any{claimJSON(exampleClaim("ASKED-TWICE")), other},
			code: 2, stderr: "answered a claim of serial SOMEONE-ELSE, not of ASKED-TWICE", nreq: 1},
		{name: "a malformed hash in a second claim", serial: "SECOND-BAD-HASH",
			answer: []any{claimJSON(exampleClaim("SECOND-BAD-HASH")), with(impostorClaim("SECOND-BAD-HASH"), "ek_eccp256", "approved")},
			code:   2, stderr: "ECC P-256 EK hash approved that is not 64 lowercase hex characters", nreq: 1},
		{name: "two claims, one without an EK", serial: "TWO-NO-EK", answer: []any{claimJSON(twoNoEK), claimJSON(impostorClaim("TWO-NO-EK"))}, code: 1,
			stdout: "more than one TPM claims serial TWO-NO-EK: 2 claims; compare each with your evidence, and approve none you cannot tie to the machine\n" +
				"\nclaim 1 of 2:\n" + twoNoEK.String() + noLine + "\nclaim 2 of 2:\n" + impostorClaim("TWO-NO-EK").String() +
				approves("approved_ek_rsa2048: "+otherRSAHash+"\napproved_ek_eccp256: "+otherECCHash+"\n"), nreq: 1},
		{name: "two claims, neither with an EK", serial: "NO-EK-TWICE", answer: []any{claimJSON(noEKTwice), claimJSON(noEKTwice)}, code: 1,
			stdout: "more than one TPM claims serial NO-EK-TWICE: 2 claims; compare each with your evidence, and approve none you cannot tie to the machine\n" +
				"\nclaim 1 of 2:\n" + noEKTwice.String() + noLine + "\nclaim 2 of 2:\n" + noEKTwice.String() + noLine + approvedNothing + "\n", nreq: 1},
		{name: "an empty list", serial: "EMPTY", answer: []any{}, code: 1, stdout: "no claim waits for serial EMPTY\n", nreq: 1},
		{name: "one claim, not a list", serial: "NOT-A-LIST", answer: claimJSON(exampleClaim("NOT-A-LIST")), code: 2, stderr: "answered something that is not a list of claims", nreq: 1},
		{name: "a malformed hash", serial: "BAD-HASH", answer: []any{with(exampleClaim("BAD-HASH"), "ek_rsa2048", strings.ToUpper(rsaHash))},
			code: 2, stderr: "RSA-2048 EK hash " + strings.ToUpper(rsaHash) + " that is not 64 lowercase hex characters", nreq: 1},
		{name: "a wrong token", serial: "MS01-2407-0099", env: map[string]string{"FLEET_APPROVER_TOKEN": "guessed"}, code: 2,
			stderr: "refused the approver token (FLEET_APPROVER_TOKEN): 401 Unauthorized", nreq: 1},
		{name: "fleetd fails", serial: "MS01-2407-0099", status: http.StatusServiceUnavailable, code: 2,
			stderr: "answered 503 Service Unavailable: \"fleetd: netbox did not answer\"\n", nreq: 1},
		{name: "fleetd down", serial: "MS01-2407-0099", down: true, code: 2, stderr: "fleetd did not answer at https://", nreq: -1},
		{name: "fleetd's CA not given", serial: "MS01-2407-0099", env: map[string]string{"FLEETD_CA": ""}, code: 2,
			stderr: "set FLEETD_CA to the PEM file of fleetd's CA", nreq: -1},
		{name: "a CA file without a certificate", serial: "MS01-2407-0099", env: map[string]string{"FLEETD_CA": keyPath}, code: 2,
			stderr: "holds no PEM certificate", nreq: 0},
		{name: "no credentials", serial: "MS01-2407-0099", env: map[string]string{"FLEET_APPROVER_TOKEN": ""}, code: 2,
			stderr: "set FLEET_APPROVER_TOKEN to an approver token, or FLEETD_CERT and FLEETD_KEY", nreq: 0},
		{name: "a certificate without its key", serial: "MS01-2407-0099", env: map[string]string{"FLEETD_CERT": certPath}, code: 2,
			stderr: "set both FLEETD_CERT and FLEETD_KEY, or neither", nreq: 0},
		{name: "plain http", serial: "MS01-2407-0099", env: map[string]string{"FLEETD_URL": "http://spore.example:8443"}, code: 2,
			stderr: "is not https: fleetd serves approvers over HTTPS only", nreq: 0},
		{name: "a URL with a password", serial: "MS01-2407-0099", env: map[string]string{"FLEETD_URL": "https://ada:hunter2@spore.example:8443"}, code: 2,
			stderr: "is not an https URL of fleetd", nreq: 0},
		{name: "no fleetd named", serial: "MS01-2407-0099", env: map[string]string{"FLEETD_URL": ""}, code: 2, stderr: "set FLEETD_URL", nreq: 0},
		{name: "no serial", code: 2, stderr: "usage: fleetctl approve", nreq: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeFleetd(t, ca)
			if c.answer != nil {
				f.answer(c.serial, c.answer)
			}
			f.status = c.status
			if c.down {
				f.srv.Close()
			}
			setenv(t, c.env)
			var args []string
			if c.serial != "" {
				args = []string{c.serial}
			}
			code, stdout, stderr := fleetctl(append([]string{"approve"}, args...)...)
			if strings.Contains(stdout+stderr, approverToken) {
				t.Errorf("the approver token appears in the output:\n%s%s", stdout, stderr)
			}
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			if c.golden != "" {
				golden(t, c.golden, stdout)
			} else if stdout != c.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, c.stdout)
			}
			if !strings.Contains(stderr, c.stderr) || (c.stderr == "") != (stderr == "") {
				t.Errorf("stderr %q, want it to hold %q", stderr, c.stderr)
			}
			if strings.Contains(stderr, "hunter2") {
				t.Errorf("stderr shows the password in FLEETD_URL: %s", stderr)
			}
			if n := len(f.requested()); c.nreq >= 0 && n != c.nreq {
				t.Errorf("fleetd saw %d requests, want %d", n, c.nreq)
			}
			if got := f.requested(); c.path != "" && (len(got) != 1 || got[0] != c.path) {
				t.Errorf("requested %q, want %q", got, c.path)
			}
		})
	}
}

// FuzzApproveAnswer feeds approve any answer fleetd might send for any
// serial: what it prints never drives the terminal, says first when more
// than one TPM claims the serial, gives each claim's own lines, and always
// ends by approving nothing.
func FuzzApproveAnswer(f *testing.F) {
	one, _ := json.Marshal([]any{claimJSON(exampleClaim("G6NUC13-88122"))})
	two, _ := json.Marshal([]any{claimJSON(exampleClaim("G6NUC13-88122")), claimJSON(impostorClaim("G6NUC13-88122"))})
	hostile := claimJSON(exampleClaim("G6NUC13-88122"))
	hostile["text"] = "serial G6NUC13-88122\x1b]0;approved\x07\u202e\nmore than one TPM\r\x9b2J"
	three, _ := json.Marshal([]any{hostile, claimJSON(impostorClaim("G6NUC13-88122")), map[string]any{"serial": "G6NUC13-88122"}})
	object, _ := json.Marshal(claimJSON(exampleClaim("G6NUC13-88122")))
	for _, seed := range [][]byte{one, two, three, object, []byte("[]"), []byte("null"), []byte(`[{"serial":"\u001b[2J"}]`)} {
		f.Add("G6NUC13-88122", seed)
	}
	f.Add("\x1b[2J\u202e", []byte(`[{"serial":"\u001b[2J\u202e","ek_rsa2048":"`+rsaHash+`"},{"serial":"\u001b[2J\u202e"}]`))
	f.Fuzz(func(t *testing.T, serial string, body []byte) {
		claims, err := decodeClaims(serial, body)
		if err != nil {
			if len(claims) != 0 {
				t.Fatalf("claims with an error: %v", err)
			}
			if strings.ContainsFunc(err.Error(), func(r rune) bool { return r != '\n' && !strconv.IsPrint(r) }) {
				t.Fatalf("the error drives the terminal: %q", err)
			}
			return
		}
		var out strings.Builder
		code := printClaims(&out, serial, claims)
		got := out.String()
		if !utf8.ValidString(got) || strings.ContainsFunc(got, func(r rune) bool { return r != '\n' && r != '\t' && !strconv.IsPrint(r) }) {
			t.Fatalf("the output drives the terminal: %q", got)
		}
		if !strings.HasSuffix(got, "\n"+approvedNothing+"\n") {
			t.Fatalf("the output does not end by approving nothing: %q", got)
		}
		approvable := 0
		for _, c := range claims {
			for _, l := range []struct{ name, hash string }{{"approved_ek_rsa2048: ", c.RSA2048}, {"approved_ek_eccp256: ", c.ECCP256}} {
				if l.hash != "" && !strings.Contains(got, "\n"+l.name+l.hash+"\n") {
					t.Fatalf("no line %s%s in %q", l.name, l.hash, got)
				}
			}
			if c.RSA2048 != "" || c.ECCP256 != "" {
				approvable++
			}
		}
		warning := strings.HasPrefix(got, "more than one TPM claims serial ")
		if warning != (len(claims) > 1) {
			t.Fatalf("%d claims, and the warning first: %v\n%s", len(claims), warning, got)
		}
		if want := len(claims) == 1 && approvable == 1; (code == 0) != want {
			t.Fatalf("exit %d for %d claims, %d with an EK", code, len(claims), approvable)
		}
	})
}
