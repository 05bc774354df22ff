package attest

import (
	"crypto"
)

// TPM is what the client needs of a TPM: its endorsement keys, an
// attestation key (AK), and credential activation. A *Device (OpenTPM,
// OpenChannel) is a real TPM through go-tpm; package attesttest has a
// simulated one and a fast software one. Run calls a TPM from one goroutine
// at a time.
type TPM interface {
	// EKs returns the TPM's endorsement keys, at most one of each kind.
	EKs() ([]EK, error)
	// AK returns the attestation parameters of the TPM's attestation key,
	// the key every challenge is bound to.
	AK() (AKParameters, error)
	// ActivateCredential decrypts challenge c with the EK of c.Kind, which
	// the TPM does only when the challenge names this TPM's AK, and
	// returns the secret inside.
	ActivateCredential(c Challenge) ([]byte, error)
}

// EK is one endorsement key as a TPM presents it.
type EK struct {
	// Kind is RSA2048 or ECCP256.
	Kind KeyKind
	// Public is an *rsa.PublicKey or an *ecdsa.PublicKey.
	Public crypto.PublicKey
	// Certificate is the EK certificate the TPM holds in NV (DER), nil when
	// it holds none. The server keeps it unverified: a certificate is no
	// evidence for an approval.
	Certificate []byte
}

// AKParameters describe an attestation key and prove the TPM created it:
// go-attestation's AttestationParameters, as the server checks them.
type AKParameters struct {
	// Public is the AK's TPMT_PUBLIC.
	Public []byte
	// CreateData is the TPMS_CREATION_DATA of the AK's creation.
	CreateData []byte
	// CreateAttestation is the TPMS_ATTEST of TPM2_CertifyCreation.
	CreateAttestation []byte
	// CreateSignature is the AK's TPMT_SIGNATURE over CreateAttestation.
	CreateSignature []byte
}

// Challenge is one credential-activation challenge, for one EK.
type Challenge struct {
	// Kind names the EK that can decrypt the challenge.
	Kind KeyKind
	// Credential is a TPM2B_ID_OBJECT, with its 2-byte size, as
	// go-attestation's EncryptedCredential.Credential.
	Credential []byte
	// Secret is a TPM2B_ENCRYPTED_SECRET, with its 2-byte size, as
	// go-attestation's EncryptedCredential.Secret.
	Secret []byte
}
