package attest

import (
	"bytes"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"unicode/utf8"
)

// The wire protocol: JSON over HTTPS, two round trips.
//
//	POST <prefix>/claim  claimMsg      -> challengeMsg
//	POST <prefix>/proof  proofMsg      -> resultMsg
//
// Any other status answers an errorMsg; one marked refused ends the
// attestation without a verdict.
//
// Byte strings are base64 (encoding/json's []byte). Unknown fields are
// ignored; a body that is not one JSON object, or that has data after it,
// is refused, but for a proof's event log: a proof whose quote has
// event_log_bytes N is followed, right after its JSON object, by the N raw
// bytes of the log (tens of KiB, which base64 in JSON would make the
// costliest part of the server's work).
//
// A proof may carry a quote (quoteMsg): PCRs 0-7 of every PCR bank the
// TPM has active, signed by the AK the challenges were bound to, over the
// nonce SHA-256("fleet attest quote nonce v1\x00" || session), where
// session is the sealed session of the challenge, with the values of each
// quoted bank and the UEFI event log or none. A proof without one is
// judged as before, so the protocol version stays 1.

// protocolVersion is the version a claim carries.
const protocolVersion = 1

// Size limits of the fields of a message. A body over Config.MaxBody is
// refused with 413 before it is decoded.
const (
	maxSerial     = 128
	maxLLDPString = 255
	maxEKPublic   = 1024
	maxEKCert     = 4096
	maxAKField    = 1024
	maxSession    = 2048
	secretLen     = 32
	maxQuote      = 1024 // TPMS_ATTEST of a quote over the four known banks
	maxQuoteSig   = 1024 // TPMT_SIGNATURE, RSA-4096 included
	maxBanks      = len(knownBanks)
)

type claimMsg struct {
	Version int     `json:"version"`
	Serial  string  `json:"serial"`
	MAC     string  `json:"mac"`
	LLDP    *LLDP   `json:"lldp"`
	EKs     []ekMsg `json:"eks"`
	AK      akMsg   `json:"ak"`
}

type ekMsg struct {
	Kind        string `json:"kind"`
	Public      []byte `json:"public"`
	Certificate []byte `json:"certificate,omitempty"`
}

type akMsg struct {
	Public            []byte `json:"public"`
	CreateData        []byte `json:"create_data"`
	CreateAttestation []byte `json:"create_attestation"`
	CreateSignature   []byte `json:"create_signature"`
}

type challengeMsg struct {
	Session    []byte         `json:"session"`
	Challenges []challengeEnt `json:"challenges"`
}

type challengeEnt struct {
	Kind       string `json:"kind"`
	Credential []byte `json:"credential"`
	Secret     []byte `json:"secret"`
}

type proofMsg struct {
	Session []byte      `json:"session"`
	Secrets []secretEnt `json:"secrets"`
	Quote   *quoteMsg   `json:"quote,omitempty"`
}

type quoteMsg struct {
	// Quote is the TPMS_ATTEST, Signature the AK's TPMT_SIGNATURE over it.
	Quote     []byte `json:"quote"`
	Signature []byte `json:"signature"`
	// Banks are the values of each bank the quote covers, in the order
	// of its PCR selection.
	Banks []bankMsg `json:"banks"`
	// EventLogBytes is the length of the UEFI event log, which follows the
	// proof's JSON object in the body as raw bytes (EventLog); 0: the
	// machine sent none.
	EventLogBytes int    `json:"event_log_bytes,omitempty"`
	EventLog      []byte `json:"-"`
}

// bankMsg is one quoted PCR bank.
type bankMsg struct {
	// Alg names the bank: "sha1", "sha256", "sha384" or "sha512".
	Alg string `json:"alg"`
	// PCRs are the bank's digests of PCRs 0-7, in order.
	PCRs [][]byte `json:"pcrs"`
	// hash is Alg's hash, set by decodeProof.
	hash crypto.Hash
}

type secretEnt struct {
	Kind   string `json:"kind"`
	Secret []byte `json:"secret"`
}

type resultMsg struct {
	Verdict     string `json:"verdict"`
	Reason      string `json:"reason"`
	InstallCode string `json:"install_code,omitempty"`
}

type errorMsg struct {
	Error string `json:"error"`
	// Refused marks a claim fleetd refuses until an operator acts (a
	// BindingError): the client prints attest: FAILED and Error, and
	// stops trying.
	Refused bool `json:"refused,omitempty"`
}

// LLDP is the switch port a machine learned from its switch's LLDP frame,
// as plain fields (the fields of an lldpwait neighbour). Each string is at
// most 255 bytes of UTF-8 without control characters.
type LLDP struct {
	ChassisIDSubtype uint8  `json:"chassis_id_subtype"`
	ChassisID        string `json:"chassis_id"`
	PortIDSubtype    uint8  `json:"port_id_subtype"`
	PortID           string `json:"port_id"`
	PortDescription  string `json:"port_description,omitempty"`
	SystemName       string `json:"system_name,omitempty"`
}

// errMalformed is what the decoders wrap for a message the server cannot
// accept; the server answers it 400.
var errMalformed = errors.New("attest: malformed message")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// decodeJSON decodes exactly one JSON object from data into v.
func decodeJSON(data []byte, v any) error {
	// json.Unmarshal refuses data after the value, too.
	if err := json.Unmarshal(data, v); err != nil {
		return malformed("not a JSON message: %v", jsonErr(err))
	}
	return nil
}

// jsonErr keeps a decoding error short and free of the input's bytes.
func jsonErr(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q has the wrong type", te.Field)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated"
	}
	return "invalid"
}

func parseKind(s string) (KeyKind, error) {
	switch s {
	case "rsa2048":
		return RSA2048, nil
	case "eccp256":
		return ECCP256, nil
	}
	return 0, malformed("unknown EK kind %q", clip(s))
}

// clip shortens an untrusted string for an error message.
func clip(s string) string {
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	return s
}

// claim is a decoded, checked claim.
type claim struct {
	serial string
	mac    net.HardwareAddr
	lldp   *LLDP
	eks    []presentedEK
	ak     AKParameters
}

type presentedEK struct {
	kind KeyKind
	pub  any
	hash string
	cert []byte
}

// decodeClaim decodes and checks a claim: a serial, a MAC, the switch port,
// one or two EKs of distinct kinds, and the AK's parameters. Errors wrap
// errMalformed.
func decodeClaim(data []byte) (*claim, error) {
	var m claimMsg
	if err := decodeJSON(data, &m); err != nil {
		return nil, err
	}
	if m.Version != protocolVersion {
		return nil, malformed("protocol version %d, want %d", m.Version, protocolVersion)
	}
	if err := checkSerial(m.Serial); err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	mac, err := parseMAC(m.MAC)
	if err != nil {
		return nil, err
	}
	if m.LLDP != nil {
		if err := checkLLDP(m.LLDP); err != nil {
			return nil, err
		}
	}
	if len(m.EKs) == 0 || len(m.EKs) > 2 {
		return nil, malformed("a claim presents one or two EKs, not %d", len(m.EKs))
	}
	c := &claim{serial: m.Serial, mac: mac, lldp: m.LLDP}
	for _, e := range m.EKs {
		kind, err := parseKind(e.Kind)
		if err != nil {
			return nil, err
		}
		for _, p := range c.eks {
			if p.kind == kind {
				return nil, malformed("two %s EKs", kind)
			}
		}
		if len(e.Public) == 0 || len(e.Public) > maxEKPublic {
			return nil, malformed("the %s EK's public key has %d bytes", kind, len(e.Public))
		}
		if len(e.Certificate) > maxEKCert {
			return nil, malformed("the %s EK's certificate has %d bytes", kind, len(e.Certificate))
		}
		pub, hash, err := parseEK(e.Public)
		if err != nil {
			return nil, malformed("the %s EK's public key does not parse", kind)
		}
		if got, err := kindOf(pub); err != nil || got != kind {
			return nil, malformed("the %s EK's public key is not an %s key", kind, kind)
		}
		c.eks = append(c.eks, presentedEK{kind: kind, pub: pub, hash: hash, cert: e.Certificate})
	}
	c.ak = AKParameters{
		Public:            m.AK.Public,
		CreateData:        m.AK.CreateData,
		CreateAttestation: m.AK.CreateAttestation,
		CreateSignature:   m.AK.CreateSignature,
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{
		{"public", c.ak.Public}, {"create_data", c.ak.CreateData},
		{"create_attestation", c.ak.CreateAttestation}, {"create_signature", c.ak.CreateSignature},
	} {
		if len(f.b) == 0 || len(f.b) > maxAKField {
			return nil, malformed("the AK's %s has %d bytes", f.name, len(f.b))
		}
	}
	return c, nil
}

// proof is a decoded, checked proof.
type proof struct {
	session []byte
	secrets map[KeyKind][]byte
	quote   *quoteMsg // nil: none
}

// decodeProof decodes and checks a proof: a session, one secret of 32
// bytes per EK kind, and a quote or none: a quote and a signature of at
// most 1,024 bytes each, one to four PCR banks of distinct known
// algorithms with eight digests each of their algorithm's size, and an
// event log of at most MaxEventLog bytes. Errors wrap errMalformed.
func decodeProof(data []byte) (*proof, error) {
	m, err := splitProof(data)
	if err != nil {
		return nil, err
	}
	if len(m.Session) == 0 || len(m.Session) > maxSession {
		return nil, malformed("the session has %d bytes", len(m.Session))
	}
	secrets, err := checkSecrets(m.Secrets)
	if err != nil {
		return nil, err
	}
	if m.Quote != nil {
		if err := checkQuoteMsg(m.Quote); err != nil {
			return nil, err
		}
	}
	return &proof{session: m.Session, secrets: secrets, quote: m.Quote}, nil
}

// splitProof decodes the JSON message of a proof, and the event log that
// follows it when its quote says one does (EventLogBytes, at most
// MaxEventLog): nothing else may follow but blanks.
func splitProof(data []byte) (proofMsg, error) {
	var m proofMsg
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return m, malformed("not a JSON message: %v", jsonErr(err))
	}
	rest := data[dec.InputOffset():]
	if q := m.Quote; q != nil && q.EventLogBytes != 0 {
		if q.EventLogBytes < 0 || q.EventLogBytes > MaxEventLog {
			return m, malformed("the event log has %d bytes, over %d", q.EventLogBytes, MaxEventLog)
		}
		if len(rest) != q.EventLogBytes {
			return m, malformed("the event log has %d bytes after the proof, want %d", len(rest), q.EventLogBytes)
		}
		q.EventLog, rest = rest, nil
	}
	if len(bytes.TrimLeft(rest, " \t\r\n")) != 0 {
		return m, malformed("not a JSON message: data after the proof")
	}
	return m, nil
}

// checkSecrets checks a proof's secrets, one or two of distinct kinds,
// each of secretLen bytes, and returns them by kind.
func checkSecrets(ss []secretEnt) (map[KeyKind][]byte, error) {
	if len(ss) == 0 || len(ss) > 2 {
		return nil, malformed("a proof carries one or two secrets, not %d", len(ss))
	}
	secrets := make(map[KeyKind][]byte, len(ss))
	for _, s := range ss {
		kind, err := parseKind(s.Kind)
		if err != nil {
			return nil, err
		}
		if _, dup := secrets[kind]; dup {
			return nil, malformed("two %s secrets", kind)
		}
		if len(s.Secret) != secretLen {
			return nil, malformed("the %s secret has %d bytes, want %d", kind, len(s.Secret), secretLen)
		}
		secrets[kind] = s.Secret
	}
	return secrets, nil
}

// checkQuoteMsg checks a proof's quote: a quote and a signature of at most
// maxQuote and maxQuoteSig bytes, and one to maxBanks PCR banks of
// distinct known algorithms (checkBank), whose hash it sets.
func checkQuoteMsg(q *quoteMsg) error {
	if len(q.Quote) == 0 || len(q.Quote) > maxQuote {
		return malformed("the quote has %d bytes", len(q.Quote))
	}
	if len(q.Signature) == 0 || len(q.Signature) > maxQuoteSig {
		return malformed("the quote's signature has %d bytes", len(q.Signature))
	}
	if len(q.Banks) == 0 || len(q.Banks) > maxBanks {
		return malformed("the quote carries %d PCR banks, want 1 to %d", len(q.Banks), maxBanks)
	}
	for i := range q.Banks {
		if err := checkBank(&q.Banks[i], q.Banks[:i]); err != nil {
			return err
		}
	}
	return nil
}

// checkBank checks a PCR bank of a quote, after the banks before it: a
// known algorithm none of them has, and QuotedPCRs values of its size. It
// sets the bank's hash.
func checkBank(bk *bankMsg, before []bankMsg) error {
	h, ok := bankNamed(bk.Alg)
	if !ok {
		return malformed("an unknown PCR bank %q", clip(bk.Alg))
	}
	for _, prev := range before {
		if prev.hash == h {
			return malformed("two %s PCR banks", bk.Alg)
		}
	}
	bk.hash = h
	if len(bk.PCRs) != QuotedPCRs {
		return malformed("the %s bank carries %d PCR values, want %d", bk.Alg, len(bk.PCRs), QuotedPCRs)
	}
	for j, d := range bk.PCRs {
		if len(d) != h.Size() {
			return malformed("PCR %d's value in the %s bank has %d bytes, want %d", j, bk.Alg, len(d), h.Size())
		}
	}
	return nil
}

// checkSerial accepts 1 to 128 printable ASCII characters, without
// surrounding spaces.
func checkSerial(s string) error {
	if s == "" {
		return errors.New("no serial")
	}
	if len(s) > maxSerial {
		return fmt.Errorf("a serial of %d bytes", len(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Errorf("the serial has a byte 0x%02x that is not printable ASCII", s[i])
		}
	}
	if strings.TrimSpace(s) != s {
		return errors.New("the serial has surrounding spaces")
	}
	return nil
}

// parseMAC accepts an EUI-48.
func parseMAC(s string) (net.HardwareAddr, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return nil, malformed("the MAC %q is not an EUI-48", clip(s))
	}
	return hw, nil
}

func checkLLDP(l *LLDP) error {
	for _, f := range []struct{ name, s string }{
		{"chassis_id", l.ChassisID}, {"port_id", l.PortID},
		{"port_description", l.PortDescription}, {"system_name", l.SystemName},
	} {
		name, s := f.name, f.s
		if len(s) > maxLLDPString {
			return malformed("the LLDP %s has %d bytes", name, len(s))
		}
		if !utf8.ValidString(s) {
			return malformed("the LLDP %s is not UTF-8", name)
		}
		for _, r := range s {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				return malformed("the LLDP %s has a control character", name)
			}
		}
	}
	return nil
}

// encodeProof is the body of a proof: its JSON object, and then the raw
// bytes of the quote's event log, if any.
func encodeProof(m proofMsg) ([]byte, error) {
	var log []byte
	if m.Quote != nil {
		q := *m.Quote
		q.EventLogBytes, log = len(q.EventLog), q.EventLog
		m.Quote = &q
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(b, log...), nil
}
