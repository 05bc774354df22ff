package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/internal/termsafe"
	"github.com/fleetkit/fleet/inventory"
)

// approveCaution is the runbook's caution, printed with every claim.
const approveCaution = "A waiting claim proves nothing, because another machine can send one with this serial. Compare it with your evidence; never approve it alone."

// approvedNothing is the last line of every claim approve prints.
const approvedNothing = "fleetctl approved nothing: compare each hash with your evidence"

// maxClaimAnswer bounds the answer approve reads from fleetd: a claim is a
// few hundred bytes, and fleetd keeps a few per serial.
const maxClaimAnswer = 1 << 20

// errNoClaim: fleetd's approver API answered that no claim waits for the
// serial.
var errNoClaim = errors.New("no claim waits for the serial")

// approveFlags defines the flags of fleetctl approve SERIAL and returns
// its body.
func approveFlags(fs *flag.FlagSet) func(*call) int {
	timeout := fs.Duration("timeout", 30*time.Second, "how long the request to fleetd may take")
	return func(c *call) int {
		serial := c.args[0]
		if serial == "" {
			return c.usage()
		}
		a, err := approverFromEnv(*timeout)
		if err != nil {
			return c.fail(2, err)
		}
		ctx, stop := c.context()
		defer stop()
		claims, err := a.claims(ctx, serial)
		switch {
		case errors.Is(err, errNoClaim):
			fmt.Fprintf(c.stdout, "no claim waits for serial %s\n", termsafe.Quote(serial))
			return 1
		case err != nil:
			return c.fail(2, err)
		}
		return printClaims(c.stdout, serial, claims)
	}
}

// printClaims prints the claims of serial and each one's approval lines,
// and returns approve's exit code: 0 for one claim with lines, 1 for a
// claim that proved no EK or for more than one claim. More than one claim
// means more than one TPM claims the serial: a plain line says so first,
// and each claim is followed by its own lines, so that none is read as
// another's.
func printClaims(w io.Writer, serial string, claims []attest.WaitingClaim) int {
	code := 0
	if len(claims) > 1 {
		fmt.Fprintf(w, "more than one TPM claims serial %s: %d claims; compare each with your evidence, and approve none you cannot tie to the machine\n",
			termsafe.Quote(serial), len(claims))
		code = 1
	}
	approvable := false
	for i, claim := range claims {
		if len(claims) > 1 {
			fmt.Fprintf(w, "\nclaim %d of %d:\n", i+1, len(claims))
		}
		text := claim.String()
		fmt.Fprint(w, termsafe.Text(text))
		if !strings.HasSuffix(text, "\n") {
			fmt.Fprintln(w)
		}
		lines := inventory.ApprovalLines(claim.RSA2048, claim.ECCP256)
		if lines == "" {
			fmt.Fprintf(w, "\nThe claim proved no EK, so no line can approve it.\n")
			continue
		}
		approvable = true
		fmt.Fprintf(w, "\nFor the node's entry in the nodes file, once each hash matches your evidence:\n%s", lines)
	}
	if !approvable {
		fmt.Fprintln(w, approvedNothing)
		return 1
	}
	fmt.Fprintf(w, "\n%s\n%s\n", approveCaution, approvedNothing)
	return code
}

// approver is a client of fleetd's approver API.
type approver struct {
	base  string // FLEETD_URL without a trailing slash
	token string // FLEET_APPROVER_TOKEN; "" when a client certificate stands in
	cert  bool   // a client certificate is configured
	hc    *http.Client
}

// approverFromEnv builds the approver client from FLEETD_URL,
// FLEET_APPROVER_TOKEN, FLEETD_CA, FLEETD_CERT and FLEETD_KEY.
func approverFromEnv(timeout time.Duration) (*approver, error) {
	raw := os.Getenv("FLEETD_URL")
	if raw == "" {
		return nil, errors.New("set FLEETD_URL to fleetd's address (e.g. https://spore.example:8443)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("FLEETD_URL is not a URL")
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("FLEETD_URL %q is not an https URL of fleetd (https://HOST[:PORT])", u.Redacted())
	}
	if u.Scheme != "https" {
		// The approver's token must never cross the network in the clear.
		return nil, fmt.Errorf("FLEETD_URL %q is not https: fleetd serves approvers over HTTPS only", u.Redacted())
	}
	a := &approver{base: strings.TrimSuffix(u.String(), "/"), token: os.Getenv("FLEET_APPROVER_TOKEN")}

	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if path := os.Getenv("FLEETD_CA"); path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("FLEETD_CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("FLEETD_CA %s holds no PEM certificate", path)
		}
		tc.RootCAs = pool
	}
	certPath, keyPath := os.Getenv("FLEETD_CERT"), os.Getenv("FLEETD_KEY")
	switch {
	case certPath != "" && keyPath != "":
		cert, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return nil, fmt.Errorf("FLEETD_CERT and FLEETD_KEY: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
		a.cert = true
	case certPath != "" || keyPath != "":
		return nil, errors.New("set both FLEETD_CERT and FLEETD_KEY, or neither")
	}
	if a.token == "" && !a.cert {
		return nil, errors.New("set FLEET_APPROVER_TOKEN to an approver token, or FLEETD_CERT and FLEETD_KEY to an approver's client certificate: fleetd shows an anonymous request nothing")
	}

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	a.hc = &http.Client{
		Transport: tr,
		Timeout:   timeout,
		// A redirect is not fleetd's answer; the token stays with fleetd.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return a, nil
}

// claims fetches every claim waiting for serial, oldest first. errors.Is
// finds errNoClaim when none waits.
func (a *approver) claims(ctx context.Context, serial string) ([]attest.WaitingClaim, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/v1/claims/"+url.PathEscape(serial), nil)
	if err != nil {
		return nil, err
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	req.Header.Set("Accept", "application/json")
	rsp, err := a.hc.Do(req)
	if err != nil {
		return nil, a.transportError(err)
	}
	defer rsp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(rsp.Body, maxClaimAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("fleetd at %s: reading its answer: %w", a.base, err)
	}
	switch rsp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, errNoClaim
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, fmt.Errorf("fleetd at %s refused %s: %s", a.base, a.credentials(), rsp.Status)
	default:
		return nil, fmt.Errorf("fleetd at %s answered %s%s", a.base, rsp.Status, bodyExcerpt(body))
	}
	if len(body) > maxClaimAnswer {
		return nil, fmt.Errorf("fleetd at %s answered claims larger than %d bytes", a.base, maxClaimAnswer)
	}
	claims, err := decodeClaims(serial, body)
	if err != nil {
		return nil, fmt.Errorf("fleetd at %s answered %w", a.base, err)
	}
	return claims, nil
}

// decodeClaims decodes fleetd's answer for serial: a JSON list of claims,
// each of serial, with well-formed EK hashes. errors.Is finds errNoClaim
// for an empty list.
func decodeClaims(serial string, body []byte) ([]attest.WaitingClaim, error) {
	var claims []attest.WaitingClaim
	if err := json.Unmarshal(body, &claims); err != nil {
		return nil, fmt.Errorf("something that is not a list of claims: %v", err)
	}
	if len(claims) == 0 {
		return nil, errNoClaim
	}
	for _, c := range claims {
		if c.Serial != serial {
			return nil, fmt.Errorf("a claim of serial %s, not of %s", termsafe.Quote(c.Serial), termsafe.Quote(serial))
		}
		for _, h := range []struct{ kind, hash string }{{"RSA-2048", c.RSA2048}, {"ECC P-256", c.ECCP256}} {
			if h.hash != "" && !isEKHash(h.hash) {
				return nil, fmt.Errorf("an %s EK hash %s that is not 64 lowercase hex characters", h.kind, termsafe.Quote(h.hash))
			}
		}
	}
	return claims, nil
}

// credentials names what the request authenticated with.
func (a *approver) credentials() string {
	switch {
	case a.token != "" && a.cert:
		return "the approver token (FLEET_APPROVER_TOKEN) and the client certificate (FLEETD_CERT)"
	case a.cert:
		return "the client certificate (FLEETD_CERT)"
	}
	return "the approver token (FLEET_APPROVER_TOKEN)"
}

// transportError words a request that got no answer.
func (a *approver) transportError(err error) error {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "remote error":
		// A TLS alert: fleetd refused the handshake, as when it does not
		// trust the client certificate.
		return fmt.Errorf("fleetd at %s refused the TLS connection (does it trust the client certificate in FLEETD_CERT?): %w", a.base, err)
	case errors.As(err, &unknown):
		return fmt.Errorf("fleetd at %s: its certificate is not signed by a CA this machine trusts: set FLEETD_CA to the PEM file of fleetd's CA (%w)", a.base, err)
	case errors.As(err, &invalid), errors.As(err, &hostname):
		return fmt.Errorf("fleetd at %s: its certificate is not valid: %w", a.base, err)
	}
	return fmt.Errorf("fleetd did not answer at %s: %w", a.base, err)
}

// bodyExcerpt quotes the start of an error answer's body, for the operator.
func bodyExcerpt(body []byte) string {
	s := strings.TrimSpace(string(body))
	if s == "" {
		return ""
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return ": " + termsafe.Quote(s)
}

// isEKHash reports whether s is an EK hash: 64 lowercase hex characters.
func isEKHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
