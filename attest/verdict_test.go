package attest_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/attest"
)

func TestJudge(t *testing.T) {
	r1, r2 := strings.Repeat("a", 64), strings.Repeat("b", 64)
	e1, e2 := strings.Repeat("c", 64), strings.Repeat("d", 64)
	both := attest.Binding{Found: true, Authored: true, RSA2048: r1, ECCP256: e1}
	for _, tc := range []struct {
		name    string
		b       attest.Binding
		p       attest.Proven
		verdict attest.Verdict
		refused string
	}{
		{"both approved, both proven", both, attest.Proven{r1, e1}, attest.Attested, ""},
		{"no entry", attest.Binding{}, attest.Proven{r1, e1}, attest.PendingApproval, ""},
		{"no entry, even unauthored with hashes", attest.Binding{RSA2048: r1}, attest.Proven{r1, e1}, attest.PendingApproval, ""},
		{"entry approves no EK", attest.Binding{Found: true, Authored: true}, attest.Proven{r1, e1}, attest.PendingApproval, ""},
		{"entry approves no EK, unauthored: another user cleared it", attest.Binding{Found: true}, attest.Proven{r1, e1}, attest.EKBindingUnauthored, ""},
		{"entry approves no EK, unauthored, nothing proven", attest.Binding{Found: true}, attest.Proven{}, attest.EKBindingUnauthored, ""},
		{"unauthored before mismatch", attest.Binding{Found: true, RSA2048: r1, ECCP256: e1}, attest.Proven{r2, e2}, attest.EKBindingUnauthored, ""},
		{"unauthored though matching", attest.Binding{Found: true, RSA2048: r1, ECCP256: e1}, attest.Proven{r1, e1}, attest.EKBindingUnauthored, ""},
		{"RSA mismatch", both, attest.Proven{r2, e1}, attest.EKHashMismatch, r2},
		{"ECC mismatch", both, attest.Proven{r1, e2}, attest.EKHashMismatch, e2},
		{"both mismatch: RSA refused", both, attest.Proven{r2, e2}, attest.EKHashMismatch, r2},
		{"mismatch before missing", both, attest.Proven{r2, ""}, attest.EKHashMismatch, r2},
		{"mismatch before missing, ECC", both, attest.Proven{"", e2}, attest.EKHashMismatch, e2},
		{"ECC missing", both, attest.Proven{r1, ""}, attest.EKMissing, ""},
		{"RSA missing", both, attest.Proven{"", e1}, attest.EKMissing, ""},
		{"RSA-only entry", attest.Binding{Found: true, Authored: true, RSA2048: r1}, attest.Proven{r1, e2}, attest.Attested, ""},
		{"ECC-only entry", attest.Binding{Found: true, Authored: true, ECCP256: e1}, attest.Proven{r2, e1}, attest.Attested, ""},
		{"ECC-only entry, another ECC EK", attest.Binding{Found: true, Authored: true, ECCP256: e1}, attest.Proven{r2, e2}, attest.EKHashMismatch, e2},
		{"ECC-only entry, RSA-only TPM", attest.Binding{Found: true, Authored: true, ECCP256: e1}, attest.Proven{r1, ""}, attest.EKMissing, ""},
		{"uppercase approval never matches", attest.Binding{Found: true, Authored: true, RSA2048: strings.ToUpper(r1)}, attest.Proven{r1, ""}, attest.EKHashMismatch, r1},
	} {
		j := attest.Judge(tc.b, tc.p)
		if j.Verdict != tc.verdict || j.RefusedHash != tc.refused || j.Reason == "" {
			t.Errorf("%s: Judge = %+v, want %s refusing %q", tc.name, j, tc.verdict, tc.refused)
		}
	}
}

func TestVerdictStrings(t *testing.T) {
	want := map[attest.Verdict]string{
		attest.Attested:            "attested",
		attest.PendingApproval:     "pending-approval",
		attest.EKHashMismatch:      "ek-hash-mismatch",
		attest.EKMissing:           "ek-missing",
		attest.EKBindingUnauthored: "ek-binding-unauthored",
	}
	for v, s := range want {
		if v.String() != s {
			t.Errorf("%d.String() = %q, want %q", v, v.String(), s)
		}
		p, err := attest.ParseVerdict(s)
		if err != nil || p != v {
			t.Errorf("ParseVerdict(%q) = %v, %v", s, p, err)
		}
		b, err := v.MarshalText()
		if err != nil || string(b) != s {
			t.Errorf("MarshalText = %q, %v", b, err)
		}
	}
	var zero attest.Verdict
	if zero.String() != "invalid" || attest.Verdict(99).String() != "invalid" {
		t.Error("an invalid verdict has a name")
	}
	if _, err := zero.MarshalText(); err == nil {
		t.Error("the zero verdict marshals")
	}
	if _, err := attest.ParseVerdict("invalid"); err == nil {
		t.Error(`ParseVerdict("invalid") succeeded`)
	}
	var k attest.KeyKind
	if k.String() != "invalid" || attest.RSA2048.String() != "rsa2048" || attest.ECCP256.String() != "eccp256" {
		t.Error("key kind names")
	}
}

func TestEKHashRefusesOtherKeys(t *testing.T) {
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	for name, k := range map[string]any{"P-384": &p384.PublicKey, "Ed25519": pub, "nil": nil} {
		if _, err := attest.EKHash(k); !errors.Is(err, attest.ErrUnsupportedEK) {
			t.Errorf("%s: %v, want ErrUnsupportedEK", name, err)
		}
	}
	for h, want := range map[string]bool{strings.Repeat("a", 64): true, strings.Repeat("A", 64): false, strings.Repeat("a", 63): false, strings.Repeat("g", 64): false} {
		if attest.ValidHash(h) != want {
			t.Errorf("ValidHash(%q) != %v", h, want)
		}
	}
}
