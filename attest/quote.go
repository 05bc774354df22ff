package attest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	_ "crypto/sha1" // the SHA-1 PCR bank
	"crypto/sha256"
	_ "crypto/sha512" // the SHA-384 and SHA-512 PCR banks
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"slices"
	"strings"

	goattest "github.com/google/go-attestation/attest"
	"github.com/google/go-tpm/tpm2"
)

// QuotedPCRs is how many PCRs a quote covers in each PCR bank: PCRs 0 to
// 7, the firmware's and the boot loader's measurements (PCR 7 holds the
// Secure Boot policy).
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
	// Quote signs PCRs 0 to 7 of every PCR bank the TPM has active with
	// the AK (the key that AK returns) over nonce (TPM2_Quote's
	// qualifying data): one TPM2_Quote whose selection lists the SHA-1,
	// SHA-256, SHA-384 and SHA-512 banks, which the TPM narrows to its
	// active banks in the statement it signs. It returns the quote with
	// the values of each bank the quote covers.
	Quote(nonce []byte) (Quote, error)
}

// Quote is a TPM's signed statement of its PCRs.
type Quote struct {
	// Quote is the TPMS_ATTEST the TPM signed.
	Quote []byte
	// Signature is the AK's TPMT_SIGNATURE over Quote.
	Signature []byte
	// Banks are the values of each PCR bank the quote covers (the banks
	// the TPM has active), in the order of the quote's PCR selection.
	Banks []PCRBank
}

// PCRBank is one PCR bank's values of PCRs 0 to QuotedPCRs-1.
type PCRBank struct {
	// Hash is the bank's algorithm: crypto.SHA1, crypto.SHA256,
	// crypto.SHA384 or crypto.SHA512.
	Hash crypto.Hash
	// PCRs are the bank's digests of PCRs 0 to QuotedPCRs-1, in order,
	// each of Hash.Size() bytes.
	PCRs [][]byte
}

// knownBanks are the PCR banks a quote's selection lists, in its order.
var knownBanks = [...]struct {
	hash crypto.Hash
	alg  tpm2.TPMAlgID
	name string
}{
	{crypto.SHA1, tpm2.TPMAlgSHA1, "sha1"},
	{crypto.SHA256, tpm2.TPMAlgSHA256, "sha256"},
	{crypto.SHA384, tpm2.TPMAlgSHA384, "sha384"},
	{crypto.SHA512, tpm2.TPMAlgSHA512, "sha512"},
}

// bankName names a bank as the wire and the reasons do: "sha256".
func bankName(h crypto.Hash) string {
	for _, b := range knownBanks {
		if b.hash == h {
			return b.name
		}
	}
	return fmt.Sprintf("hash %d", uint(h))
}

// bankNamed returns the bank the wire names name.
func bankNamed(name string) (crypto.Hash, bool) {
	for _, b := range knownBanks {
		if b.name == name {
			return b.hash, true
		}
	}
	return 0, false
}

// bankOfAlg returns the bank of a TPM hash algorithm.
func bankOfAlg(alg tpm2.TPMAlgID) (crypto.Hash, bool) {
	for _, b := range knownBanks {
		if b.alg == alg {
			return b.hash, true
		}
	}
	return 0, false
}

// bankNames lists banks as a reason names them: "sha1, sha256".
func bankNames(hs []crypto.Hash) string {
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = bankName(h)
	}
	return strings.Join(names, ", ")
}

// requiredBanks are the banks a quote's selection must list: every TPM of
// the TCG PC Client Platform TPM Profile implements SHA-1 and SHA-256
// banks. SHA-384 and SHA-512 are listed when the TPM implements them.
var requiredBanks = []crypto.Hash{crypto.SHA1, crypto.SHA256}

// quotedSelection is the PCR selection of a quote: PCRs 0 to 7 of each
// known bank that implemented lists (nil: every known bank), in
// knownBanks' order.
func quotedSelection(implemented []tpm2.TPMAlgID) tpm2.TPMLPCRSelection {
	var sel tpm2.TPMLPCRSelection
	for _, b := range knownBanks {
		if implemented != nil && !slices.Contains(implemented, b.alg) {
			continue
		}
		sel.PCRSelections = append(sel.PCRSelections, tpm2.TPMSPCRSelection{
			Hash:      b.alg,
			PCRSelect: tpm2.PCClientCompatible.PCRs(0, 1, 2, 3, 4, 5, 6, 7),
		})
	}
	return sel
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
	// PCRs are the quoted digests of PCRs 0 to 7 in the SHA-256 bank
	// (every active bank was verified; this one is recorded); PCRs[7] is
	// the Secure Boot policy's.
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
// machine sends evidence its TPM did not produce, or a boot its TPM did
// not measure, so the attestation is refused as a whole, without a
// verdict (attest.verdict carries the reason; the client prints "attest:
// FAILED" and it, and stops). An event log whose PCR banks are not the
// TPM's active ones is refused with a reason that names both, e.g. "the
// TPM's active PCR banks (sha1, sha256) are not the event log's
// (sha256)".
const (
	ReasonQuoteMalformed = "the quote does not decode"
	ReasonQuoteSigner    = "the quote is not signed by the attested AK"
	ReasonQuoteNonce     = "the quote is not over this attestation's nonce"
	ReasonQuotePCRs      = "the quote is not over PCRs 0-7 of every active bank"
	ReasonQuoteSHA256    = "the TPM's SHA-256 PCR bank is not active"
	ReasonQuoteValues    = "the PCR values sent are not the ones the TPM quoted"
	ReasonEventLogReplay = "the event log does not replay to the quoted PCRs"
)

// eventLogBanks is the reason of an event log whose banks are not the
// TPM's active ones.
const eventLogBanks = "the TPM's active PCR banks (%s) are not the event log's (%s)"

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

// verifyQuote checks q, from a proof: a quote signed by the AK whose
// TPMT_PUBLIC is akPublic, over nonce, over PCRs 0-7 of every bank the TPM
// has active, SHA-256 among them, with the values q carries (checkQuote);
// then that q's event log, if any, carries exactly the active banks and
// replays to each of them (replay), and reads the Secure Boot state from
// the SHA-256 bank's PCR 7 events. A quote that does not verify, or a log
// that does not replay, is a *quoteError. A log that replays but does not
// tell the state is SecureBootUnknown.
func verifyQuote(akPublic, nonce []byte, q *quoteMsg) (*BootState, error) {
	ak, err := goattest.ParseAKPublic(akPublic)
	if err != nil {
		return nil, &quoteError{reason: ReasonQuoteSigner, cause: err}
	}
	if err := checkQuote(ak, nonce, q); err != nil {
		return nil, err
	}
	b := &BootState{}
	for _, bk := range q.Banks {
		if bk.hash == crypto.SHA256 {
			for i := range b.PCRs {
				b.PCRs[i] = bytes.Clone(bk.PCRs[i])
			}
		}
	}
	if len(q.EventLog) == 0 {
		b.SecureBoot, b.Unknown = SecureBootUnknown, "the machine sent no event log"
		return b, nil
	}
	events, err := replay(q.EventLog, q.Banks)
	if err != nil {
		return nil, err
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

// checkQuote checks q's quote, naming the first check that fails in a
// *quoteError: it decodes as a TPMS_ATTEST of a quote; ak signed it; it
// is over nonce; its PCR selection lists the four known banks, each with
// PCRs 0-7 (an active bank) or nothing (a bank the TPM does not have
// active: a TPM clears the selection of a bank it has not allocated);
// SHA-256 is active; and the banks q carries are the active ones, in the
// selection's order, whose values hash (with the hash of ak's signing
// scheme, as the TPM computes pcrDigest) to the quote's PCR digest.
func checkQuote(ak *goattest.AKPublic, nonce []byte, q *quoteMsg) error {
	att, err := tpm2.Unmarshal[tpm2.TPMSAttest](q.Quote)
	if err != nil {
		return &quoteError{reason: ReasonQuoteMalformed, cause: err}
	}
	if att.Type != tpm2.TPMSTAttestQuote {
		return &quoteError{reason: ReasonQuoteMalformed, cause: fmt.Errorf("a TPMS_ATTEST of type 0x%04x, not a quote", uint16(att.Type))}
	}
	info, err := att.Attested.Quote()
	if err != nil {
		return &quoteError{reason: ReasonQuoteMalformed, cause: err}
	}
	if err := verifySignature(ak, q.Quote, q.Signature); err != nil {
		return &quoteError{reason: ReasonQuoteSigner, cause: err}
	}
	if !bytes.Equal(att.ExtraData.Buffer, nonce) {
		return &quoteError{reason: ReasonQuoteNonce}
	}
	active, err := activeBanks(info.PCRSelect)
	if err != nil {
		return &quoteError{reason: ReasonQuotePCRs, cause: err}
	}
	if !slices.Contains(active, crypto.SHA256) {
		return &quoteError{reason: ReasonQuoteSHA256, cause: fmt.Errorf("the quote covers the banks (%s)", bankNames(active))}
	}
	sent := make([]crypto.Hash, len(q.Banks))
	for i, bk := range q.Banks {
		sent[i] = bk.hash
	}
	if !slices.Equal(sent, active) {
		return &quoteError{reason: ReasonQuoteValues, cause: fmt.Errorf("the proof sends the banks (%s), the quote covers (%s)", bankNames(sent), bankNames(active))}
	}
	h := ak.Hash.New()
	for _, bk := range q.Banks {
		for _, d := range bk.PCRs {
			h.Write(d)
		}
	}
	if !bytes.Equal(h.Sum(nil), info.PCRDigest.Buffer) {
		return &quoteError{reason: ReasonQuoteValues, cause: errors.New("the values do not hash to the quote's PCR digest")}
	}
	return nil
}

// activeBanks returns the banks a quote's PCR selection covers, in its
// order: it must list each bank the TPM implements, SHA-1 and SHA-256
// always (requiredBanks), each known bank at most once, with PCRs 0-7 (the
// TPM has it active) or nothing (it does not: the TPM narrowed the
// selection it was asked for).
func activeBanks(sel tpm2.TPMLPCRSelection) ([]crypto.Hash, error) {
	var listed, active []crypto.Hash
	for _, s := range sel.PCRSelections {
		h, ok := bankOfAlg(s.Hash)
		if !ok {
			return nil, fmt.Errorf("the selection lists an unknown bank 0x%04x", uint16(s.Hash))
		}
		if slices.Contains(listed, h) {
			return nil, fmt.Errorf("the selection lists the %s bank twice", bankName(h))
		}
		listed = append(listed, h)
		switch {
		case allZero(s.PCRSelect):
		case s.PCRSelect[0] == 0xff && allZero(s.PCRSelect[1:]):
			active = append(active, h)
		default:
			return nil, fmt.Errorf("the %s bank's selection %x is not PCRs 0-7", bankName(h), s.PCRSelect)
		}
	}
	for _, h := range requiredBanks {
		if !slices.Contains(listed, h) {
			return nil, fmt.Errorf("the selection does not list the %s bank, which every PC Client TPM implements", bankName(h))
		}
	}
	return active, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// verifySignature checks that sig, a TPMT_SIGNATURE, is ak's signature
// over msg with the hash of ak's signing scheme.
func verifySignature(ak *goattest.AKPublic, msg, sig []byte) error {
	s, err := tpm2.Unmarshal[tpm2.TPMTSignature](sig)
	if err != nil {
		return fmt.Errorf("the signature does not decode: %w", err)
	}
	h := ak.Hash.New()
	h.Write(msg)
	digest := h.Sum(nil)
	switch pub := ak.Public.(type) {
	case *ecdsa.PublicKey:
		e, err := s.Signature.ECDSA()
		if err != nil {
			return err
		}
		if hh, err := e.Hash.Hash(); err != nil || hh != ak.Hash {
			return fmt.Errorf("a signature with hash 0x%04x, not the AK's", uint16(e.Hash))
		}
		r, ss := new(big.Int).SetBytes(e.SignatureR.Buffer), new(big.Int).SetBytes(e.SignatureS.Buffer)
		if !ecdsa.Verify(pub, digest, r, ss) {
			return errors.New("the ECDSA signature does not verify")
		}
		return nil
	case *rsa.PublicKey:
		r, err := s.Signature.RSASSA()
		if err != nil {
			return err
		}
		if hh, err := r.Hash.Hash(); err != nil || hh != ak.Hash {
			return fmt.Errorf("a signature with hash 0x%04x, not the AK's", uint16(r.Hash))
		}
		return rsa.VerifyPKCS1v15(pub, ak.Hash, digest, r.Sig.Buffer)
	}
	return fmt.Errorf("an AK of type %T", ak.Public)
}

// replay parses log and replays it to each quoted bank (banks, checked by
// checkQuote), one bank at a time: go-attestation counts a PCR verified
// when any algorithm's replay matches, so a single replay over every
// bank would accept a log that matches one. The log's banks (its Spec ID
// event's algorithms) must be exactly the quoted ones. It returns the
// events the SHA-256 replay verified.
func replay(log []byte, banks []bankMsg) ([]goattest.Event, error) {
	el, err := goattest.ParseEventLog(log)
	if err != nil {
		return nil, &quoteError{reason: ReasonEventLogReplay, cause: fmt.Errorf("the event log does not parse: %w", err)}
	}
	active := make([]crypto.Hash, len(banks))
	for i, bk := range banks {
		active[i] = bk.hash
	}
	logged, names := make([]crypto.Hash, 0, len(el.Algs)), make([]string, len(el.Algs))
	for i, a := range el.Algs {
		names[i] = fmt.Sprintf("0x%02x", uint8(a))
		if h, ok := bankOfAlg(tpm2.TPMAlgID(a)); ok {
			names[i] = bankName(h)
			if !slices.Contains(logged, h) {
				logged = append(logged, h)
			}
		}
	}
	if len(logged) != len(el.Algs) || len(logged) != len(active) || !containsAll(logged, active) {
		reason := fmt.Sprintf(eventLogBanks, bankNames(active), strings.Join(names, ", "))
		return nil, &quoteError{reason: reason}
	}
	var events []goattest.Event
	for _, bk := range banks {
		pcrs := make([]goattest.PCR, QuotedPCRs)
		for i := range pcrs {
			pcrs[i] = goattest.PCR{Index: i, Digest: bk.PCRs[i], DigestAlg: bk.hash}
		}
		ev, err := el.Verify(pcrs)
		if err != nil {
			return nil, &quoteError{reason: ReasonEventLogReplay, cause: fmt.Errorf("the %s bank: %w", bankName(bk.hash), err)}
		}
		if bk.hash == crypto.SHA256 {
			events = ev
		}
	}
	return events, nil
}

// containsAll reports whether have holds every element of want.
func containsAll(have, want []crypto.Hash) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
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
