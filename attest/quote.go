package attest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	goattest "github.com/google/go-attestation/attest"
	"github.com/google/go-tpm/legacy/tpm2"
)

// QuotedPCRs is how many PCRs a quote covers: PCRs 0 to 7 of the SHA-256
// bank, the firmware's and the boot loader's measurements (PCR 7 holds
// the Secure Boot policy).
const QuotedPCRs = 8

// MaxEventLog is the largest event log a proof carries. Run sends no log
// larger than this (the server then knows no Secure Boot state); the
// server answers 400 to one that is.
const MaxEventLog = 512 << 10

// DefaultEventLog is where Linux exposes the firmware's UEFI event log
// (TCG crypto-agile format), read by Run for a TPM that OpenTPM opened.
const DefaultEventLog = "/sys/kernel/security/tpm0/binary_bios_measurements"

// Quoter is a TPM that can quote its PCRs with its attestation key. Run
// sends a quote with its proof when its TPM is a Quoter, and none when it
// is not. A *Device, attesttest's simulator and attesttest.SoftTPM are
// Quoters.
type Quoter interface {
	// Quote signs PCRs 0 to 7 of the SHA-256 bank with the AK (the key
	// that AK returns) over nonce (TPM2_Quote's qualifying data), and
	// returns the quote with the PCR values it covers.
	Quote(nonce []byte) (Quote, error)
}

// Quote is a TPM's signed statement of its PCRs.
type Quote struct {
	// Quote is the TPMS_ATTEST the TPM signed.
	Quote []byte
	// Signature is the AK's TPMT_SIGNATURE over Quote.
	Signature []byte
	// PCRs are the SHA-256 digests of PCRs 0 to QuotedPCRs-1, in order.
	PCRs [][]byte
}

// SecureBoot is the Secure Boot state of a quoted boot. The zero value is
// invalid.
type SecureBoot uint8

const (
	// SecureBootOn: the event log, replayed to the quoted PCR 7, shows
	// Secure Boot enabled, with the keys that verified the boot.
	SecureBootOn SecureBoot = iota + 1
	// SecureBootOff: the replayed event log shows Secure Boot disabled.
	SecureBootOff
	// SecureBootUnknown: the quote verified, but the machine sent no event
	// log, or its PCR 7 events do not tell the state (BootState.Unknown
	// says which). A policy that requires Secure Boot refuses it.
	SecureBootUnknown
)

// String returns "on", "off" or "unknown", as the audit line writes it, or
// "invalid" for a value that is no state.
func (s SecureBoot) String() string {
	switch s {
	case SecureBootOn:
		return "on"
	case SecureBootOff:
		return "off"
	case SecureBootUnknown:
		return "unknown"
	}
	return "invalid"
}

// BootState is the measured boot a TPM quoted with the attested AK, over a
// nonce of the attestation's session, as its event log replays to the
// quoted PCRs. Only what the quote and the replay prove is here.
type BootState struct {
	// SecureBoot is the Secure Boot state the event log shows.
	SecureBoot SecureBoot
	// Unknown says why SecureBoot is SecureBootUnknown, e.g. "the machine
	// sent no event log"; "" otherwise.
	Unknown string
	// PCRs are the quoted SHA-256 digests of PCRs 0 to 7; PCRs[7] is the
	// Secure Boot policy's.
	PCRs [QuotedPCRs][]byte
	// PK, KEK, DB and DBX are the Secure Boot variables as measured into
	// PCR 7: the platform key, the key exchange keys, the signature
	// database and the forbidden signature database. Empty when
	// SecureBoot is SecureBootUnknown.
	PK, KEK, DB, DBX SignatureList
	// BootLoaderAuthority are the certificates (of DB, or shim's) that
	// verified the boot loader and what it loaded: the
	// EV_EFI_VARIABLE_AUTHORITY events after PCR 7's separator.
	BootLoaderAuthority []Certificate
}

// PCR7 returns the quoted PCR 7 digest as lowercase hex.
func (b *BootState) PCR7() string { return hex.EncodeToString(b.PCRs[7]) }

// SignatureList is the content of a Secure Boot signature variable.
type SignatureList struct {
	// Certificates are its X.509 certificates.
	Certificates []Certificate
	// Hashes are its SHA-256 hashes, as lowercase hex.
	Hashes []string
}

// Certificate names an X.509 certificate.
type Certificate struct {
	// Subject is the certificate's subject (RFC 2253), e.g.
	// "CN=Microsoft Corporation UEFI CA 2011,O=Microsoft Corporation,...".
	Subject string
	// SHA256 is the SHA-256 of its DER, as lowercase hex.
	SHA256 string
}

// The reasons a proof whose quote does not verify is refused. Such a
// machine sends evidence its TPM did not produce, so the attestation is
// refused as a whole, without a verdict (attest.verdict carries the
// reason; the client prints "attest: FAILED" and it, and stops).
const (
	ReasonQuoteMalformed = "the quote does not decode"
	ReasonQuoteSigner    = "the quote is not signed by the attested AK"
	ReasonQuoteNonce     = "the quote is not over this attestation's nonce"
	ReasonQuotePCRs      = "the quote is not over PCRs 0-7 of the SHA-256 bank"
	ReasonQuoteValues    = "the PCR values sent are not the ones the TPM quoted"
	ReasonEventLogReplay = "the event log does not replay to the quoted PCRs"
)

// quoteNonceContext binds a quote's nonce to its use.
const quoteNonceContext = "fleet attest quote nonce v1\x00"

// QuoteNonce returns the nonce a proof's quote signs, for the sealed
// session the server answered to the claim (the challenge's "session"):
// SHA-256("fleet attest quote nonce v1\x00" || session). The sealed session is
// fresh (a random id and a random AEAD nonce) and unpredictable before the
// claim is answered, and it comes back with the proof, so the server
// derives the same nonce without keeping it: a quote made for another
// session, an earlier one included, does not verify.
func QuoteNonce(session []byte) []byte {
	h := sha256.New()
	h.Write([]byte(quoteNonceContext))
	h.Write(session)
	return h.Sum(nil)
}

// quoteError is a quote that does not verify: its reason, and the cause
// for the audit line.
type quoteError struct {
	reason string
	cause  error
}

func (e *quoteError) Error() string {
	if e.cause == nil {
		return e.reason
	}
	return e.reason + ": " + e.cause.Error()
}

func (e *quoteError) Unwrap() error { return e.cause }

// verifyQuote checks q, from a proof, with go-attestation: signed by the AK
// whose TPMT_PUBLIC is akPublic, over nonce, over PCRs 0-7 of the SHA-256
// bank with the values q carries; then that eventLog ("": none) replays to
// them, and reads the Secure Boot state from its PCR 7 events. A quote that
// does not verify, or a log that does not replay, is a *quoteError. A log
// that replays but does not tell the state is SecureBootUnknown.
func verifyQuote(akPublic, nonce []byte, q *quoteMsg) (*BootState, error) {
	ak, err := goattest.ParseAKPublic(akPublic)
	if err != nil {
		return nil, &quoteError{reason: ReasonQuoteSigner, cause: err}
	}
	pcrs := make([]goattest.PCR, QuotedPCRs)
	for i := range pcrs {
		pcrs[i] = goattest.PCR{Index: i, Digest: q.PCRs[i], DigestAlg: crypto.SHA256}
	}
	quote := goattest.Quote{Quote: q.Quote, Signature: q.Signature}
	if err := ak.VerifyAll([]goattest.Quote{quote}, pcrs, nonce); err != nil {
		return nil, diagnoseQuote(ak, quote, nonce, err)
	}
	b := &BootState{}
	for i := range b.PCRs {
		b.PCRs[i] = bytes.Clone(q.PCRs[i])
	}
	if len(q.EventLog) == 0 {
		b.SecureBoot, b.Unknown = SecureBootUnknown, "the machine sent no event log"
		return b, nil
	}
	el, err := goattest.ParseEventLog(q.EventLog)
	if err != nil {
		return nil, &quoteError{reason: ReasonEventLogReplay, cause: fmt.Errorf("the event log does not parse: %w", err)}
	}
	events, err := el.Verify(pcrs)
	if err != nil {
		return nil, &quoteError{reason: ReasonEventLogReplay, cause: err}
	}
	pcr7 := false
	for _, e := range events {
		if e.Index == 7 {
			pcr7 = true
			break
		}
	}
	if !pcr7 {
		b.SecureBoot, b.Unknown = SecureBootUnknown, "the event log has no PCR 7 event"
		return b, nil
	}
	sb, err := goattest.ParseSecurebootState(events)
	if err != nil {
		b.SecureBoot, b.Unknown = SecureBootUnknown, "the event log's PCR 7 events do not tell the Secure Boot state: "+err.Error()
		return b, nil
	}
	b.SecureBoot = SecureBootOff
	if sb.Enabled {
		b.SecureBoot = SecureBootOn
	}
	b.PK = signatureList(sb.PlatformKeys, sb.PlatformKeyHashes)
	b.KEK = signatureList(sb.ExchangeKeys, sb.ExchangeKeyHashes)
	b.DB = signatureList(sb.PermittedKeys, sb.PermittedHashes)
	b.DBX = signatureList(sb.ForbiddenKeys, sb.ForbiddenHashes)
	b.BootLoaderAuthority = certificates(sb.PostSeparatorAuthority)
	return b, nil
}

// diagnoseQuote names why go-attestation refused a quote (err): only on
// this path, so a quote that verifies costs one signature check.
func diagnoseQuote(ak *goattest.AKPublic, q goattest.Quote, nonce []byte, err error) error {
	att, derr := tpm2.DecodeAttestationData(q.Quote)
	if derr != nil || att.Type != tpm2.TagAttestQuote || att.AttestedQuoteInfo == nil {
		return &quoteError{reason: ReasonQuoteMalformed, cause: err}
	}
	if !signedBy(ak, q) {
		return &quoteError{reason: ReasonQuoteSigner, cause: err}
	}
	if !bytes.Equal(att.ExtraData, nonce) {
		return &quoteError{reason: ReasonQuoteNonce}
	}
	sel := att.AttestedQuoteInfo.PCRSelection
	if sel.Hash != tpm2.AlgSHA256 || len(sel.PCRs) != QuotedPCRs {
		return &quoteError{reason: ReasonQuotePCRs, cause: err}
	}
	for i, p := range sel.PCRs {
		if p != i {
			return &quoteError{reason: ReasonQuotePCRs, cause: err}
		}
	}
	return &quoteError{reason: ReasonQuoteValues, cause: err}
}

// signedBy reports whether q's signature verifies with ak.
func signedBy(ak *goattest.AKPublic, q goattest.Quote) bool {
	sig, err := tpm2.DecodeSignature(bytes.NewBuffer(q.Signature))
	if err != nil {
		return false
	}
	h := ak.Hash.New()
	h.Write(q.Quote)
	digest := h.Sum(nil)
	switch pub := ak.Public.(type) {
	case *ecdsa.PublicKey:
		return sig.ECC != nil && ecdsa.Verify(pub, digest, sig.ECC.R, sig.ECC.S)
	case *rsa.PublicKey:
		return sig.RSA != nil && rsa.VerifyPKCS1v15(pub, ak.Hash, digest, sig.RSA.Signature) == nil
	}
	return false
}

func signatureList(certs []x509.Certificate, hashes [][]byte) SignatureList {
	l := SignatureList{Certificates: certificates(certs)}
	for _, h := range hashes {
		l.Hashes = append(l.Hashes, hex.EncodeToString(h))
	}
	return l
}

func certificates(certs []x509.Certificate) []Certificate {
	var out []Certificate
	for _, c := range certs {
		sum := sha256.Sum256(c.Raw)
		out = append(out, Certificate{Subject: c.Subject.String(), SHA256: hex.EncodeToString(sum[:])})
	}
	return out
}

// readEventLog reads the event log at path: none (nil) when there is no
// file, and at most MaxEventLog+1 bytes, so that the caller sees a log
// too large to send.
func readEventLog(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxEventLog+1))
}
