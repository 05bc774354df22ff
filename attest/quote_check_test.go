package attest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"slices"
	"testing"

	goattest "github.com/google/go-attestation/attest"
	"github.com/google/go-tpm/tpm2"
)

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
	pub := tpm2.TPMTPublic{
		Type:    tpm2.TPMAlgRSA,
		NameAlg: tpm2.TPMAlgSHA256,
		ObjectAttributes: tpm2.TPMAObject{FixedTPM: true, FixedParent: true, SensitiveDataOrigin: true,
			UserWithAuth: true, NoDA: true, Restricted: true, SignEncrypt: true},
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &tpm2.TPMSRSAParms{
			Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
			Scheme: tpm2.TPMTRSAScheme{Scheme: tpm2.TPMAlgRSASSA,
				Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgRSASSA, &tpm2.TPMSSigSchemeRSASSA{HashAlg: tpm2.TPMAlgSHA256})},
			KeyBits: 2048,
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: key.N.Bytes()}),
	}
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
// hash is refused.
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
