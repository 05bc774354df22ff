package attest

import (
	"bytes"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"sync"
)

// KeyKind names the type of an endorsement key. The zero value is invalid:
// a forgotten kind is an error, never a default.
type KeyKind uint8

const (
	// RSA2048 is an RSA-2048 EK, approved by a node's approved_ek_rsa2048
	// line (NetBox's approved_ek_hash).
	RSA2048 KeyKind = iota + 1
	// ECCP256 is an ECC NIST P-256 EK, approved by a node's
	// approved_ek_eccp256 line (NetBox's approved_ek_hash_ecc).
	ECCP256
)

// String returns "rsa2048", "eccp256", or "invalid".
func (k KeyKind) String() string {
	switch k {
	case RSA2048:
		return "rsa2048"
	case ECCP256:
		return "eccp256"
	}
	return "invalid"
}

// kindOf returns the kind of an EK public key, or an error for any key that
// is neither RSA-2048 nor ECC P-256.
func kindOf(pub crypto.PublicKey) (KeyKind, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N == nil || k.N.BitLen() != 2048 {
			return 0, fmt.Errorf("%w: an RSA EK must have 2048 bits", ErrUnsupportedEK)
		}
		return RSA2048, nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return 0, fmt.Errorf("%w: an ECC EK must be on curve P-256", ErrUnsupportedEK)
		}
		return ECCP256, nil
	case *ecdh.PublicKey:
		if k.Curve() != ecdh.P256() {
			return 0, fmt.Errorf("%w: an ECC EK must be on curve P-256", ErrUnsupportedEK)
		}
		return ECCP256, nil
	case nil:
		return 0, fmt.Errorf("%w: no key", ErrUnsupportedEK)
	}
	return 0, fmt.Errorf("%w: %T", ErrUnsupportedEK, pub)
}

// ErrUnsupportedEK is what EKHash and the server return for an EK that is
// neither RSA-2048 nor ECC P-256.
var ErrUnsupportedEK = errors.New("attest: the EK is neither RSA-2048 nor ECC P-256")

// EKHash returns the hash that names an EK in a node's entry: the SHA-256 of
// the public key's DER SubjectPublicKeyInfo (x509.MarshalPKIXPublicKey), as
// 64 lowercase hex characters. This is the convention of the SPIRE TPM
// plugin. It fails with ErrUnsupportedEK for keys other than RSA-2048 and
// ECC P-256.
func EKHash(pub crypto.PublicKey) (string, error) {
	if _, err := kindOf(pub); err != nil {
		return "", err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnsupportedEK, err)
	}
	return hashDER(der), nil
}

func hashDER(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// ValidHash reports whether h has the form of an EK hash: 64 lowercase hex
// characters.
func ValidHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// parseEK parses an EK's DER SubjectPublicKeyInfo and returns the key and
// its EK hash. The hash is of the canonical encoding, so that another
// encoding of the same key cannot name it differently. The encodings every
// TPM presents, RSA-2048 with exponent 65537 and P-256, are read straight
// from their canonical form (a P-256 key as an *ecdh.PublicKey, which is
// what a challenge needs); anything else goes through crypto/x509 and is
// encoded anew for its hash.
func parseEK(der []byte) (any, string, error) {
	p := spkiPrefixes()
	if len(der) == len(p.p256)+64 && bytes.Equal(der[:len(p.p256)], p.p256) {
		k, err := ecdh.P256().NewPublicKey(der[len(p.p256)-1:]) // from the 0x04
		if err != nil {
			return nil, "", err
		}
		return k, hashDER(der), nil
	}
	if len(der) == len(p.rsa)+256+len(rsaExponent) && bytes.Equal(der[:len(p.rsa)], p.rsa) &&
		der[len(p.rsa)] >= 0x80 && bytes.Equal(der[len(der)-len(rsaExponent):], rsaExponent) {
		n := new(big.Int).SetBytes(der[len(p.rsa) : len(p.rsa)+256])
		return &rsa.PublicKey{N: n, E: 65537}, hashDER(der), nil
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, "", err
	}
	canon, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, "", err
	}
	return pub, hashDER(canon), nil
}

// rsaExponent is the DER INTEGER 65537.
var rsaExponent = []byte{0x02, 0x03, 0x01, 0x00, 0x01}

// spkiPrefixes are the bytes that begin the canonical DER encoding of every
// RSA-2048 SubjectPublicKeyInfo (up to its modulus, after the 0x00 that
// keeps it positive) and P-256 one (up to its point's coordinates, after
// the 0x04 of an uncompressed point).
var spkiPrefixes = sync.OnceValue(func() struct{ rsa, p256 []byte } {
	n := new(big.Int).Lsh(big.NewInt(1), 2047)
	n.SetBit(n, 0, 1)
	r, err := x509.MarshalPKIXPublicKey(&rsa.PublicKey{N: n, E: 65537})
	if err != nil {
		panic(err)
	}
	c := elliptic.P256().Params()
	g := append(append([]byte{4}, c.Gx.FillBytes(make([]byte, 32))...), c.Gy.FillBytes(make([]byte, 32))...)
	gen, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), g)
	if err != nil {
		panic(err)
	}
	e, err := x509.MarshalPKIXPublicKey(gen)
	if err != nil {
		panic(err)
	}
	return struct{ rsa, p256 []byte }{rsa: r[:len(r)-256-len(rsaExponent)], p256: e[:len(e)-64]}
})
