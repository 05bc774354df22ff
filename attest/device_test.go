package attest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"
)

func TestCertFor(t *testing.T) {
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "EK"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ek.PublicKey, other)
	if err != nil {
		t.Fatal(err)
	}
	if got := certFor(&ek.PublicKey, der); got == nil {
		t.Error("the EK's own certificate was dropped")
	}
	if got := certFor(&other.PublicKey, der); got != nil {
		t.Error("a certificate of another key was kept")
	}
	if got := certFor(&ek.PublicKey, []byte{0x30, 0x03, 1, 2, 3}); got != nil {
		t.Error("garbage was kept")
	}
	// NV pads certificates; trimDER cuts at the DER length.
	padded := append(append([]byte{}, der...), 0xff, 0xff, 0xff)
	if got := trimDER(padded); len(got) != len(der) {
		t.Errorf("trimDER kept %d bytes of %d", len(got), len(der))
	}
}

func TestUnsize(t *testing.T) {
	for _, tc := range []struct {
		in []byte
		ok bool
	}{{[]byte{0, 2, 1, 2}, true}, {[]byte{0, 3, 1, 2}, false}, {[]byte{0}, false}, {nil, false}, {[]byte{0, 0}, true}} {
		if _, err := unsize(tc.in); (err == nil) != tc.ok {
			t.Errorf("unsize(%x) = %v", tc.in, err)
		}
	}
}
