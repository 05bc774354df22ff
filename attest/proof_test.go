package attest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	goattest "github.com/google/go-attestation/attest"
	"github.com/google/go-tpm/tpm2"
)

func TestVerifyProof(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rsaHash, eccHash := strings.Repeat("a", 64), strings.Repeat("b", 64)
	both := &session{expires: now.Add(time.Minute), serial: "S1"}
	both.hash[RSA2048], both.hash[ECCP256] = rsaHash, eccHash
	both.secret[RSA2048][0], both.secret[ECCP256][0] = 1, 2
	rsaOnly := &session{expires: now.Add(time.Minute), serial: "S1"}
	rsaOnly.hash[RSA2048], rsaOnly.secret[RSA2048][0] = rsaHash, 1

	secret := func(first byte) []byte {
		b := make([]byte, secretLen)
		b[0] = first
		return b
	}
	const (
		refused = "the proof's secrets are not the session's"
		expired = "the session expired"
	)
	tests := []struct {
		name    string
		ss      *session
		secrets map[KeyKind][]byte
		now     time.Time
		want    Proven
		status  int
		reason  string
	}{
		{"both EKs", both, map[KeyKind][]byte{RSA2048: secret(1), ECCP256: secret(2)}, now,
			Proven{RSA2048: rsaHash, ECCP256: eccHash}, 0, ""},
		{"one EK", rsaOnly, map[KeyKind][]byte{RSA2048: secret(1)}, now, Proven{RSA2048: rsaHash}, 0, ""},
		{"a second before it expires", rsaOnly, map[KeyKind][]byte{RSA2048: secret(1)}, now.Add(time.Minute - time.Second),
			Proven{RSA2048: rsaHash}, 0, ""},
		{"as it expires", rsaOnly, map[KeyKind][]byte{RSA2048: secret(1)}, now.Add(time.Minute), Proven{}, http.StatusGone, expired},
		{"expired, secrets wrong", rsaOnly, nil, now.Add(time.Hour), Proven{}, http.StatusGone, expired},
		{"both secrets wrong", both, map[KeyKind][]byte{RSA2048: secret(3), ECCP256: secret(4)}, now, Proven{}, http.StatusForbidden, refused},
		{"one secret wrong", both, map[KeyKind][]byte{RSA2048: secret(1), ECCP256: secret(3)}, now, Proven{}, http.StatusForbidden, refused},
		{"secrets swapped", both, map[KeyKind][]byte{RSA2048: secret(2), ECCP256: secret(1)}, now, Proven{}, http.StatusForbidden, refused},
		{"one missing", both, map[KeyKind][]byte{RSA2048: secret(1)}, now, Proven{}, http.StatusForbidden, refused},
		{"none", both, nil, now, Proven{}, http.StatusForbidden, refused},
		{"one the session did not ask", rsaOnly, map[KeyKind][]byte{RSA2048: secret(1), ECCP256: secret(0)}, now, Proven{}, http.StatusForbidden, refused},
		{"a short secret", rsaOnly, map[KeyKind][]byte{RSA2048: secret(1)[:secretLen-1]}, now, Proven{}, http.StatusForbidden, refused},
	}
	for _, tt := range tests {
		got, ref := verifyProof(tt.ss, &proof{secrets: tt.secrets}, tt.now)
		status, reason := 0, ""
		if ref != nil {
			status, reason = ref.status, ref.reason
			if ref.final {
				t.Errorf("%s: a final refusal", tt.name)
			}
		}
		if got != tt.want || status != tt.status || reason != tt.reason {
			t.Errorf("%s: verifyProof = %+v, %d %q; want %+v, %d %q", tt.name, got, status, reason, tt.want, tt.status, tt.reason)
		}
	}
}

func TestVerifyBoot(t *testing.T) {
	ak := eccAK(t, crypto.SHA256)
	sealed := []byte("the sealed session")
	banks := randomBanks(crypto.SHA1, crypto.SHA256, crypto.SHA384, crypto.SHA512)
	good := ak.quote(QuoteNonce(sealed), quotedSelection(nil), banks, ak.hash)
	tests := []struct {
		name    string
		akPub   []byte
		quote   *quoteMsg
		boot    bool // a BootState
		unknown string
		status  int
		reason  string
		final   bool
	}{
		{name: "no quote", akPub: ak.public},
		{name: "no quote, no AK"},
		{name: "a quote", akPub: ak.public, quote: good, boot: true, unknown: "the machine sent no event log"},
		{name: "a quote, a session without its AK", quote: good,
			status: http.StatusForbidden, reason: "the session names no AK to check the quote with"},
		{name: "an AK that does not parse", akPub: []byte{1, 2, 3}, quote: good,
			status: http.StatusForbidden, reason: ReasonQuoteSigner, final: true},
		{name: "another AK", akPub: eccAK(t, crypto.SHA256).public, quote: good,
			status: http.StatusForbidden, reason: ReasonQuoteSigner, final: true},
		{name: "another session's quote", akPub: ak.public, quote: ak.quote(QuoteNonce([]byte("another")), quotedSelection(nil), banks, ak.hash),
			status: http.StatusForbidden, reason: ReasonQuoteNonce, final: true},
	}
	for _, tt := range tests {
		boot, ref := verifyBoot(&session{akPublic: tt.akPub}, &proof{session: sealed, quote: tt.quote})
		status, reason, final := 0, "", false
		if ref != nil {
			status, reason, final = ref.status, ref.reason, ref.final
		}
		if (boot != nil) != tt.boot || status != tt.status || reason != tt.reason || final != tt.final {
			t.Errorf("%s: verifyBoot = %v, %d %q final %t; want a boot state %t, %d %q final %t",
				tt.name, boot, status, reason, final, tt.boot, tt.status, tt.reason, tt.final)
			continue
		}
		if boot == nil {
			continue
		}
		if boot.SecureBoot != SecureBootUnknown || boot.Unknown != tt.unknown || !bytes.Equal(boot.PCRs[7], banks[1].PCRs[7]) {
			t.Errorf("%s: boot state %v %q, PCR 7 %x; want unknown %q, PCR 7 %x", tt.name, boot.SecureBoot, boot.Unknown, boot.PCRs[7], tt.unknown, banks[1].PCRs[7])
		}
	}
}

func TestVerdictAttrs(t *testing.T) {
	rsaHash, eccHash, other := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	approved := Binding{Found: true, Authored: true, RSA2048: rsaHash, ECCP256: eccHash}
	on := &BootState{SecureBoot: SecureBootOn}
	on.PCRs[7] = []byte{0xab, 0xcd}
	off := &BootState{SecureBoot: SecureBootOff}
	off.PCRs[7] = []byte{0xef}
	unknown := &BootState{SecureBoot: SecureBootUnknown, Unknown: "the machine sent no event log"}
	tests := []struct {
		name     string
		c        Claim
		approved Binding
		level    slog.Level
		want     string
	}{
		{"attested, unquoted", Claim{Serial: "S1", Peer: "10.0.0.5:4000", RSA2048: rsaHash, ECCP256: eccHash}, approved, slog.LevelInfo,
			"serial=S1 verdict=attested reason=install code issued peer=10.0.0.5:4000 ek_rsa2048=" + rsaHash + " ek_eccp256=" + eccHash + " secure_boot=unquoted"},
		{"attested, Secure Boot on", Claim{Serial: "S1", Peer: "p", ECCP256: eccHash, Boot: on}, Binding{Found: true, Authored: true, ECCP256: eccHash}, slog.LevelInfo,
			"serial=S1 verdict=attested reason=install code issued peer=p ek_eccp256=" + eccHash + " secure_boot=on pcr7=abcd"},
		{"attested, Secure Boot off", Claim{Serial: "S1", Peer: "p", ECCP256: eccHash, Boot: off}, Binding{Found: true, Authored: true, ECCP256: eccHash}, slog.LevelInfo,
			"serial=S1 verdict=attested reason=install code issued peer=p ek_eccp256=" + eccHash + " secure_boot=off pcr7=ef"},
		{"attested, Secure Boot unknown", Claim{Serial: "S1", Peer: "p", RSA2048: rsaHash, Boot: unknown}, Binding{Found: true, Authored: true, RSA2048: rsaHash}, slog.LevelInfo,
			"serial=S1 verdict=attested reason=install code issued peer=p ek_rsa2048=" + rsaHash + " secure_boot=unknown pcr7= secure_boot_unknown=the machine sent no event log"},
		{"ek-hash-mismatch", Claim{Serial: "S1", Peer: "p", RSA2048: other, ECCP256: eccHash}, approved, slog.LevelWarn,
			"serial=S1 verdict=ek-hash-mismatch reason=the TPM's RSA-2048 EK is not the one the entry approves refused_ek_hash=" + other + " peer=p ek_rsa2048=" + other + " ek_eccp256=" + eccHash + " secure_boot=unquoted"},
		{"ek-missing, ECC", Claim{Serial: "S1", Peer: "p", RSA2048: rsaHash}, approved, slog.LevelWarn,
			"serial=S1 verdict=ek-missing reason=the entry approves an ECC P-256 EK the TPM did not present missing_ek_eccp256=" + eccHash + " peer=p ek_rsa2048=" + rsaHash + " secure_boot=unquoted"},
		{"ek-missing, RSA", Claim{Serial: "S1", Peer: "p", ECCP256: eccHash}, approved, slog.LevelWarn,
			"serial=S1 verdict=ek-missing reason=the entry approves an RSA-2048 EK the TPM did not present missing_ek_rsa2048=" + rsaHash + " peer=p ek_eccp256=" + eccHash + " secure_boot=unquoted"},
		{"ek-missing, both", Claim{Serial: "S1", Peer: "p"}, approved, slog.LevelWarn,
			"serial=S1 verdict=ek-missing reason=the entry approves an RSA-2048 EK the TPM did not present missing_ek_rsa2048=" + rsaHash + " missing_ek_eccp256=" + eccHash + " peer=p secure_boot=unquoted"},
		{"pending-approval", Claim{Serial: "S2", Peer: "p", RSA2048: rsaHash}, Binding{}, slog.LevelInfo,
			"serial=S2 verdict=pending-approval reason=no entry names the serial peer=p ek_rsa2048=" + rsaHash + " secure_boot=unquoted"},
		{"ek-binding-unauthored", Claim{Serial: "S1", Peer: "p", RSA2048: rsaHash}, Binding{Found: true, RSA2048: rsaHash}, slog.LevelWarn,
			"serial=S1 verdict=ek-binding-unauthored reason=the changelog does not show the binding author writing the binding peer=p ek_rsa2048=" + rsaHash + " secure_boot=unquoted"},
	}
	for _, tt := range tests {
		j := Judge(tt.approved, Proven{RSA2048: tt.c.RSA2048, ECCP256: tt.c.ECCP256})
		res := resultMsg{Verdict: j.Verdict.String(), Reason: j.Reason}
		if j.Verdict == Attested {
			res.Reason, res.InstallCode = "install code issued", "the code"
		}
		var got []string
		for _, a := range verdictAttrs(tt.c, j, res, tt.approved) {
			got = append(got, a.String())
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("%s: verdictAttrs:\n got %s\nwant %s", tt.name, g, tt.want)
		}
		if strings.Contains(strings.Join(got, " "), "the code") {
			t.Errorf("%s: the audit line carries the install code", tt.name)
		}
		if l := verdictLevel(j.Verdict); l != tt.level {
			t.Errorf("%s: verdictLevel(%s) = %s, want %s", tt.name, j.Verdict, l, tt.level)
		}
	}
}

// testAK is an attestation key a test holds the private key of.
type testAK struct {
	public []byte // TPMT_PUBLIC
	hash   crypto.Hash
	sign   func(digest []byte) tpm2.TPMTSignature
}

// eccAK is an ECC P-256 AK whose ECDSA scheme hashes with h.
func eccAK(t testing.TB, h crypto.Hash) testAK {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	alg := tpmHash(h)
	pub := AKTemplate()
	pub.Parameters = tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
		Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
		Scheme: tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgECDSA,
			Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSigSchemeECDSA{HashAlg: alg})},
		CurveID: tpm2.TPMECCNistP256,
		KDF:     tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
	})
	pub.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
		X: tpm2.TPM2BECCParameter{Buffer: key.X.FillBytes(make([]byte, 32))},
		Y: tpm2.TPM2BECCParameter{Buffer: key.Y.FillBytes(make([]byte, 32))},
	})
	return testAK{public: tpm2.Marshal(pub), hash: h, sign: func(digest []byte) tpm2.TPMTSignature {
		r, s, err := ecdsa.Sign(rand.Reader, key, digest)
		if err != nil {
			t.Fatal(err)
		}
		return tpm2.TPMTSignature{SigAlg: tpm2.TPMAlgECDSA, Signature: tpm2.NewTPMUSignature(tpm2.TPMAlgECDSA, &tpm2.TPMSSignatureECC{
			Hash:       alg,
			SignatureR: tpm2.TPM2BECCParameter{Buffer: r.Bytes()},
			SignatureS: tpm2.TPM2BECCParameter{Buffer: s.Bytes()},
		})}
	}}
}

// rsaAK is an RSA-2048 AK with the RSASSA scheme and SHA-256.
func rsaAK(t *testing.T) testAK {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub := AKTemplate() // its name algorithm and attributes, with an RSA key
	pub.Type = tpm2.TPMAlgRSA
	pub.Parameters = tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &tpm2.TPMSRSAParms{
		Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
		Scheme: tpm2.TPMTRSAScheme{Scheme: tpm2.TPMAlgRSASSA,
			Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgRSASSA, &tpm2.TPMSSigSchemeRSASSA{HashAlg: tpm2.TPMAlgSHA256})},
		KeyBits: 2048,
	})
	pub.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: key.N.Bytes()})
	return testAK{public: tpm2.Marshal(pub), hash: crypto.SHA256, sign: func(digest []byte) tpm2.TPMTSignature {
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest)
		if err != nil {
			t.Fatal(err)
		}
		return tpm2.TPMTSignature{SigAlg: tpm2.TPMAlgRSASSA, Signature: tpm2.NewTPMUSignature(tpm2.TPMAlgRSASSA, &tpm2.TPMSSignatureRSA{
			Hash: tpm2.TPMAlgSHA256,
			Sig:  tpm2.TPM2BPublicKeyRSA{Buffer: sig},
		})}
	}}
}

func tpmHash(h crypto.Hash) tpm2.TPMAlgID {
	for _, b := range knownBanks {
		if b.hash == h {
			return b.alg
		}
	}
	panic("no bank")
}

// quote is k's quote over nonce of banks' values with the selection sel,
// its PCR digest hashed with digestHash.
func (k testAK) quote(nonce []byte, sel tpm2.TPMLPCRSelection, banks []bankMsg, digestHash crypto.Hash) *quoteMsg {
	d := digestHash.New()
	for _, bk := range banks {
		for _, v := range bk.PCRs {
			d.Write(v)
		}
	}
	att := tpm2.Marshal(tpm2.TPMSAttest{
		Magic:     tpm2.TPMGeneratedValue,
		Type:      tpm2.TPMSTAttestQuote,
		ExtraData: tpm2.TPM2BData{Buffer: nonce},
		Attested: tpm2.NewTPMUAttest(tpm2.TPMSTAttestQuote, &tpm2.TPMSQuoteInfo{
			PCRSelect: sel,
			PCRDigest: tpm2.TPM2BDigest{Buffer: d.Sum(nil)},
		}),
	})
	h := k.hash.New()
	h.Write(att)
	return &quoteMsg{Quote: att, Signature: tpm2.Marshal(k.sign(h.Sum(nil))), Banks: banks}
}

// randomBanks are banks of random values.
func randomBanks(hs ...crypto.Hash) []bankMsg {
	var banks []bankMsg
	for _, h := range hs {
		bk := bankMsg{Alg: bankName(h), hash: h}
		for range QuotedPCRs {
			v := make([]byte, h.Size())
			rand.Read(v)
			bk.PCRs = append(bk.PCRs, v)
		}
		banks = append(banks, bk)
	}
	return banks
}

// The quote's PCR digest is hashed with the AK's signing scheme's hash,
// as a TPM computes it, for ECC and RSA AKs alike: a digest of another
// hash is refused, and so is a changed signature.
func TestCheckQuoteAKs(t *testing.T) {
	nonce := QuoteNonce([]byte("session"))
	four := []crypto.Hash{crypto.SHA1, crypto.SHA256, crypto.SHA384, crypto.SHA512}
	for name, ak := range map[string]testAK{
		"ECC P-256, SHA-256": eccAK(t, crypto.SHA256),
		"ECC P-256, SHA-384": eccAK(t, crypto.SHA384),
		"RSA-2048, SHA-256":  rsaAK(t),
	} {
		t.Run(name, func(t *testing.T) {
			pub, err := goattest.ParseAKPublic(ak.public)
			if err != nil {
				t.Fatal(err)
			}
			banks := randomBanks(four...)
			if err := checkQuote(pub, nonce, ak.quote(nonce, quotedSelection(nil), banks, ak.hash)); err != nil {
				t.Fatalf("a quote of the four banks: %v", err)
			}
			other := crypto.SHA1
			if ak.hash == crypto.SHA1 {
				other = crypto.SHA256
			}
			err = checkQuote(pub, nonce, ak.quote(nonce, quotedSelection(nil), banks, other))
			var qe *quoteError
			if !errors.As(err, &qe) || qe.reason != ReasonQuoteValues {
				t.Fatalf("a PCR digest of another hash: %v, want %q", err, ReasonQuoteValues)
			}
			err = checkQuote(pub, QuoteNonce([]byte("another session")), ak.quote(nonce, quotedSelection(nil), banks, ak.hash))
			if !errors.As(err, &qe) || qe.reason != ReasonQuoteNonce {
				t.Fatalf("another nonce: %v, want %q", err, ReasonQuoteNonce)
			}
			changed := ak.quote(nonce, quotedSelection(nil), banks, ak.hash)
			changed.Signature[len(changed.Signature)-1] ^= 1
			if err := checkQuote(pub, nonce, changed); !errors.As(err, &qe) || qe.reason != ReasonQuoteSigner {
				t.Fatalf("a signature changed: %v, want %q", err, ReasonQuoteSigner)
			}
		})
	}
}

// A quote's selection lists the four known banks, each with PCRs 0-7 or
// none; the active banks are those with PCRs 0-7, in its order.
func TestActiveBanks(t *testing.T) {
	entry := func(alg tpm2.TPMAlgID, sel ...byte) tpm2.TPMSPCRSelection {
		return tpm2.TPMSPCRSelection{Hash: alg, PCRSelect: sel}
	}
	sha1, sha256, sha384, sha512 := tpm2.TPMAlgSHA1, tpm2.TPMAlgSHA256, tpm2.TPMAlgSHA384, tpm2.TPMAlgSHA512
	for name, tc := range map[string]struct {
		sel  []tpm2.TPMSPCRSelection
		want []crypto.Hash // nil: refused
	}{
		"four active": {[]tpm2.TPMSPCRSelection{entry(sha1, 0xff, 0, 0), entry(sha256, 0xff, 0, 0), entry(sha384, 0xff, 0, 0), entry(sha512, 0xff, 0, 0)},
			[]crypto.Hash{crypto.SHA1, crypto.SHA256, crypto.SHA384, crypto.SHA512}},
		"SHA-256 alone active": {[]tpm2.TPMSPCRSelection{entry(sha1, 0, 0, 0), entry(sha256, 0xff, 0, 0), entry(sha384, 0, 0, 0), entry(sha512, 0, 0, 0)},
			[]crypto.Hash{crypto.SHA256}},
		"in another order": {[]tpm2.TPMSPCRSelection{entry(sha512, 0xff, 0, 0), entry(sha256, 0xff, 0, 0), entry(sha384), entry(sha1, 0xff)},
			[]crypto.Hash{crypto.SHA512, crypto.SHA256, crypto.SHA1}},
		"a longer select": {[]tpm2.TPMSPCRSelection{entry(sha1, 0xff, 0, 0, 0), entry(sha256, 0xff, 0, 0), entry(sha384, 0, 0, 0, 0), entry(sha512)},
			[]crypto.Hash{crypto.SHA1, crypto.SHA256}},
		"PCRs 1-7":       {[]tpm2.TPMSPCRSelection{entry(sha1, 0xfe, 0, 0), entry(sha256, 0xff, 0, 0), entry(sha384, 0, 0, 0), entry(sha512, 0, 0, 0)}, nil},
		"PCR 8 too":      {[]tpm2.TPMSPCRSelection{entry(sha1, 0, 0, 0), entry(sha256, 0xff, 1, 0), entry(sha384, 0, 0, 0), entry(sha512, 0, 0, 0)}, nil},
		"PCR 16 alone":   {[]tpm2.TPMSPCRSelection{entry(sha1, 0, 0, 0), entry(sha256, 0xff, 0, 0), entry(sha384, 0, 0, 1), entry(sha512, 0, 0, 0)}, nil},
		"three banks":    {[]tpm2.TPMSPCRSelection{entry(sha256, 0xff, 0, 0), entry(sha384, 0, 0, 0), entry(sha512, 0, 0, 0)}, nil},
		"five banks":     {[]tpm2.TPMSPCRSelection{entry(sha1), entry(sha256, 0xff), entry(sha384), entry(sha512), entry(tpm2.TPMAlgSM3256)}, nil},
		"an unknown one": {[]tpm2.TPMSPCRSelection{entry(tpm2.TPMAlgSM3256), entry(sha256, 0xff), entry(sha384), entry(sha512)}, nil},
		"a bank twice":   {[]tpm2.TPMSPCRSelection{entry(sha256, 0xff), entry(sha256, 0xff), entry(sha384), entry(sha512)}, nil},
	} {
		got, err := activeBanks(tpm2.TPMLPCRSelection{PCRSelections: tc.sel})
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: active %v, want refused", name, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: active %v, %v; want %v", name, got, err, tc.want)
		}
	}
}
