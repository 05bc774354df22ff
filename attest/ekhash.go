package attest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
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
