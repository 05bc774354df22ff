package attest

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path"
	"sync"
	"time"

	goattest "github.com/google/go-attestation/attest"
	"github.com/google/go-tpm/legacy/tpm2"
	"github.com/google/go-tpm/legacy/tpm2/credactivation"
)

// Defaults of Config.
const (
	DefaultSessionTTL          = 60 * time.Second
	DefaultMaxBody             = 64 << 10
	DefaultMaxProofBody        = 1 << 20
	DefaultWaitingTTL          = 24 * time.Hour
	DefaultMaxWaiting          = 1024
	DefaultMaxWaitingPerSerial = 8
	DefaultMaxWaitingPerPeer   = 64
)

// Config tunes a Server. A nil *Config means every default.
type Config struct {
	// SealingKey is the 32-byte AES-256-GCM key that seals sessions. Every
	// replica that should finish another's sessions needs the same key, and
	// then they must share Spent as well: NewServer refuses a SealingKey
	// without a Spent (ErrSealingKeyWithoutSpent). Nil: a random key, so
	// that only this Server, while it runs, finishes its sessions.
	SealingKey []byte
	// SessionTTL is how long a client has, from its claim, to send its
	// proof. Zero: DefaultSessionTTL (60 s).
	SessionTTL time.Duration
	// MaxBody is the largest request body accepted, claim or proof; a
	// larger one is answered 413. Zero: DefaultMaxBody (64 KiB) for a
	// claim, and DefaultMaxProofBody (1 MiB) for a proof, which carries
	// the event log (at most MaxEventLog raw bytes after the JSON object).
	MaxBody int64
	// Admit is called for each attested proof and returns the install code
	// (or no provision, with its reason). Nil: no code is answered, with
	// the reason "no provision: no admission hook".
	Admit AdmitFunc
	// Spent remembers which sessions finished, so that each is accepted
	// once. Servers that share a SealingKey must share one Spent, or a proof
	// one accepted would be accepted again by another inside the session's
	// TTL. Nil (only without a SealingKey): a memory of this Server alone.
	Spent SpentSessions
	// WaitingTTL is how long a pending-approval claim waits for an operator
	// (Server.Waiting). Zero: DefaultWaitingTTL (24 h).
	WaitingTTL time.Duration
	// MaxWaiting bounds the waiting claims in all. Zero: DefaultMaxWaiting
	// (1024). When a claim from a new TPM finds the store full, one claim
	// goes, from the serials that hold the most claims (see
	// MaxWaitingPerSerial for which of them): a flood of claims under
	// other serials takes claims from the serials that hold several before
	// it touches a serial's only claim. When every serial holds one, the
	// older half of the store (MaxWaiting/2 claims) stays until it
	// expires, and the oldest of the newer half goes: a claim that came
	// while the store had room outlives any flood after it, and one that
	// came during a flood outlives the next MaxWaiting - MaxWaiting/2 - 1
	// claims. Making room costs time in proportion to MaxWaiting.
	MaxWaiting int
	// MaxWaitingPerSerial bounds the claims of one serial: one per TPM
	// (distinct proven EK hashes), so another TPM's claim under the serial
	// never replaces the first; the same TPM claiming again replaces its
	// own, which then counts as the newest. Zero:
	// DefaultMaxWaitingPerSerial (8); at most MaxWaiting. When a claim
	// from a new TPM finds the serial at its bound, one of the serial's
	// claims goes by the rule that MaxWaiting also follows: of the m
	// claims considered, oldest first, the first m/2 (rounded down) stay
	// and the oldest of the rest goes. So a flood under one serial evicts
	// only that serial's newer claims, and never its oldest.
	MaxWaitingPerSerial int
	// MaxWaitingPerPeer bounds the waiting claims whose proofs came from
	// one source address (the host of http.Request.RemoteAddr), whatever
	// serials they name: a machine that floods claims under serials no
	// entry names (any TPM, a software one too, proves its own EKs) holds
	// at most this many, and evicts only its own, by the rule of
	// MaxWaitingPerSerial. Zero: DefaultMaxWaitingPerPeer (64).
	MaxWaitingPerPeer int
	// Judged, when set, is called once for every verdict, after the
	// admission hook and the audit line, with the proven claim and the
	// judgement (fleetd counts verdicts and journals the refusals an
	// operator must read, such as ek-binding-unauthored). It runs on the
	// proof's goroutine and must be safe for concurrent use. A claim that
	// a BindingError refused has no verdict, and no call: the binding
	// source saw its fault first. Nil: nothing is called.
	Judged func(ctx context.Context, c Claim, j Judgement)
	// Logger receives the audit lines. Nil: silent.
	//
	// attest.verdict, one per verdict: serial, verdict, reason, the
	// refused EK hash of an ek-hash-mismatch (refused_ek_hash), the
	// approved hash of each EK an ek-missing did not see presented
	// (missing_ek_rsa2048, missing_ek_eccp256), the peer address, the
	// hashes of the EKs the TPM proved (ek_rsa2048, ek_eccp256), and the
	// Secure Boot state (secure_boot: on, off, unknown, or unquoted for a
	// proof without a quote), with, for a quote, the quoted PCR 7 digest
	// (pcr7, hex) and, when unknown, why (secure_boot_unknown).
	//
	// attest.verdict without a verdict, for a claim a BindingError
	// refused, or a proof whose quote does not verify (the Reason*
	// constants of quotes): serial, reason, the cause (error) and peer.
	//
	// attest.refused, for each other request refused: a malformed or
	// oversized body; a replayed, expired, changed or wrong proof; a
	// binding source that did not answer or failed, with its error.
	//
	// No activation secret, session, sealing key or install code appears
	// in a line; the admission hook's error is answered as
	// ReasonAdmissionFailed (ReasonAdmitLater for ErrAdmitLater), never in
	// its own words.
	Logger *slog.Logger
}

// Admission is what the admission hook decides for an attested machine.
type Admission struct {
	// InstallCode is answered to the client, which writes it for the
	// install. It is a secret: the server never logs it. "": no code.
	InstallCode string
	// NoProvision says why no code is answered when InstallCode is "",
	// e.g. "control plane". The client is told "no provision: " and it.
	NoProvision string
}

// AdmitFunc is the caller's admission hook. The server calls it only for
// an attested proof, once per session, with the proven claim. An error
// answers no code: the client is told ReasonAdmissionFailed, never the
// error's text, and the hook should log the error itself; an error that
// wraps ErrAdmitLater makes the client try again instead. It must be safe
// for concurrent use.
type AdmitFunc func(ctx context.Context, c Claim) (Admission, error)

// ReasonAdmissionFailed is the reason an attested client is told when the
// admission hook failed.
const ReasonAdmissionFailed = "no install code: admission failed"

// ErrAdmitLater is what an admission hook returns, wrapped, when it cannot
// decide now and a later try will be decided: e.g. another replica is
// starting the machine's run at this moment, and the run it starts is the
// machine's on its next try. The server then answers no verdict to the
// client but status 503 with ReasonAdmitLater, and the client tries again
// with a new session, as after any try that got no verdict. The audit line
// attest.verdict says attested, with ReasonAdmitLater.
var ErrAdmitLater = errors.New("attest: the admission is decided on a later try")

// ReasonAdmitLater is what a client whose admission hook returned
// ErrAdmitLater is told, with status 503: its console shows "attest: try
// N failed" and the request's error with this reason.
const ReasonAdmitLater = "no install code yet: the admission is decided on the next try"

// ErrSealingKeyWithoutSpent is what NewServer returns for a Config with a
// SealingKey and no Spent. A session sealed with a known key can be
// finished by any Server that holds the key, a replica or this one after a
// restart; only a record of spent sessions that they all share refuses a
// proof the second time.
var ErrSealingKeyWithoutSpent = errors.New("attest: a SealingKey needs a Spent that every Server with the key shares; otherwise another Server with the key (a replica, or this one after a restart) accepts a proof again within the session TTL")

// SpentSessions records finished sessions, so that each is accepted once.
// It must be safe for concurrent use.
type SpentSessions interface {
	// Spend records that session id finished and reports whether it had
	// not before. The record may be dropped after expires: the session is
	// refused as expired from then on. An error answers 503.
	Spend(ctx context.Context, id string, expires time.Time) (fresh bool, err error)
}

// Claim is a claim whose every EK the TPM proved to hold: what the
// admission hook receives and what a pending-approval claim keeps.
type Claim struct {
	// Serial is the SMBIOS serial the machine claimed.
	Serial string
	// MAC is the machine's MAC, an EUI-48.
	MAC net.HardwareAddr
	// LLDP is the switch port the machine learned, nil when no frame came.
	LLDP *LLDP
	// RSA2048 and ECCP256 are the hashes (EKHash) of the EKs the TPM
	// proved to hold; "" for a kind it did not present.
	RSA2048 string
	ECCP256 string
	// Peer is the address the proof came from (http.Request.RemoteAddr).
	Peer string
	// Proven is when the server accepted the proof.
	Proven time.Time
	// Boot is the measured boot the TPM quoted with the AK, nil when the
	// proof carried no quote (a TPM that is no Quoter, or an older
	// client). The server shares it between the hooks and the waiting
	// claims: read it, never change it.
	Boot *BootState
}

// Server is the fleetd side of the protocol: an http.Handler that answers
// claims and proofs under any path prefix it is mounted at (it looks only
// at the last element of the path: .../claim and .../proof), over the
// caller's HTTPS server. It keeps no per-session state but the record of
// spent sessions and the waiting claims. A Server is safe for concurrent
// use; its Config must not change after NewServer.
type Server struct {
	bindings Bindings
	sealer   *sealer
	ttl      time.Duration
	maxBody  int64
	maxProof int64
	admit    AdmitFunc
	judged   func(context.Context, Claim, Judgement)
	spent    SpentSessions
	waiting  *waitingStore
	log      *slog.Logger
}

var discard = slog.New(slog.DiscardHandler)

// NewServer returns a Server that judges claims against bindings.
func NewServer(bindings Bindings, cfg *Config) (*Server, error) {
	if bindings == nil {
		return nil, errors.New("attest: NewServer needs a binding source")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	key := c.SealingKey
	if key != nil && c.Spent == nil {
		return nil, ErrSealingKeyWithoutSpent
	}
	if key == nil {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	sl, err := newSealer(key)
	if err != nil {
		return nil, err
	}
	s := &Server{
		bindings: bindings,
		sealer:   sl,
		ttl:      orDefault(c.SessionTTL, DefaultSessionTTL),
		maxBody:  orDefault(c.MaxBody, DefaultMaxBody),
		maxProof: orDefault(c.MaxBody, DefaultMaxProofBody),
		admit:    c.Admit,
		judged:   c.Judged,
		spent:    c.Spent,
		waiting:  newWaitingStore(orDefault(c.WaitingTTL, DefaultWaitingTTL), orDefault(c.MaxWaiting, DefaultMaxWaiting), orDefault(c.MaxWaitingPerSerial, DefaultMaxWaitingPerSerial), orDefault(c.MaxWaitingPerPeer, DefaultMaxWaitingPerPeer)),
		log:      c.Logger,
	}
	if s.spent == nil {
		s.spent = newSpentMemory()
	}
	if s.log == nil {
		s.log = discard
	}
	return s, nil
}

func orDefault[T int | int64 | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// Waiting returns every pending-approval claim of serial that waits, one
// per TPM, oldest first; nil when none waits. Each claim's EKs were
// proven, so it shows which TPM asked; more than one means more than one
// TPM claims the serial. A waiting claim proves
// nothing, because another machine can send one with this serial: compare
// its hashes with independent evidence, and never approve it alone.
func (s *Server) Waiting(serial string) []Claim {
	return s.waiting.get(serial, time.Now())
}

// ServeHTTP answers POST .../claim and POST .../proof. A body larger than
// Config.MaxBody (or its defaults) is answered 413, a malformed one 400.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := path.Base(r.URL.Path)
	if op != "claim" && op != "proof" {
		writeError(w, http.StatusNotFound, "no such attestation endpoint")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	limit := s.maxBody
	if op == "proof" {
		limit = s.maxProof
	}
	body, err := readBody(w, r, limit)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.refuse(w, r, "", http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", limit))
			return
		}
		s.refuse(w, r, "", http.StatusBadRequest, "the body could not be read")
		return
	}
	if op == "claim" {
		s.serveClaim(w, r, body)
	} else {
		s.serveProof(w, r, body)
	}
}

// readBody reads the whole body, at most max bytes, in one allocation when
// the request says its length.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, max)
	if n := r.ContentLength; n >= 0 && n <= max {
		b := make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		// A body longer than it said is refused like any other.
		if m, _ := body.Read(make([]byte, 1)); m > 0 {
			return nil, errors.New("the body is longer than its Content-Length")
		}
		return b, nil
	}
	return io.ReadAll(body)
}

// refusal is a request the server refuses, with its status and reason.
type refusal struct {
	status int
	reason string
	// cause is logged (as "error"), never answered; nil: none.
	cause error
	// final marks a claim refused until an operator acts (a BindingError):
	// it is audited as attest.verdict, and the client stops trying.
	final bool
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, serial string, status int, reason string) {
	s.refuseFor(w, r, serial, &refusal{status: status, reason: reason})
}

// refuseFor logs the refusal and answers it: attest.refused, or for a final
// refusal the audit line attest.verdict.
func (s *Server) refuseFor(w http.ResponseWriter, r *http.Request, serial string, ref *refusal) {
	attrs := make([]slog.Attr, 0, 5)
	if serial != "" {
		attrs = append(attrs, slog.String("serial", serial))
	}
	msg := "attest.refused"
	if ref.final {
		msg = "attest.verdict"
	} else {
		attrs = append(attrs, slog.Int("status", ref.status))
	}
	attrs = append(attrs, slog.String("reason", ref.reason))
	if ref.cause != nil {
		attrs = append(attrs, slog.String("error", ref.cause.Error()))
	}
	attrs = append(attrs, slog.String("peer", r.RemoteAddr))
	s.log.LogAttrs(r.Context(), slog.LevelWarn, msg, attrs...)
	writeJSON(w, ref.status, errorMsg{Error: ref.reason, Refused: ref.final})
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorMsg{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"the answer does not encode"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func (s *Server) serveClaim(w http.ResponseWriter, r *http.Request, body []byte) {
	c, err := decodeClaim(body)
	if err != nil {
		s.refuse(w, r, "", http.StatusBadRequest, err.Error())
		return
	}
	rsp, ref := s.challenge(r.Context(), c)
	if ref != nil {
		s.refuseFor(w, r, c.serial, ref)
		return
	}
	writeJSON(w, http.StatusOK, rsp)
}

// challenge checks the AK once, asks for the binding once, and makes one
// credential-activation challenge per presented EK, all bound to the AK.
// A binding source's error is refused with its cause: 503 when the source
// did not answer, a final 403 with the reason of a BindingError, else 500.
func (s *Server) challenge(ctx context.Context, c *claim) (*challengeMsg, *refusal) {
	name, err := checkAK(c.ak)
	if err != nil {
		return nil, &refusal{status: http.StatusForbidden, reason: "the AK's attestation parameters do not verify: " + err.Error()}
	}
	b, err := s.bindings.Binding(ctx, c.serial)
	if err != nil {
		var be *BindingError
		switch {
		case errors.Is(err, ErrBindingUnavailable):
			return nil, &refusal{status: http.StatusServiceUnavailable, reason: "the binding source did not answer", cause: err}
		case errors.As(err, &be):
			return nil, &refusal{status: http.StatusForbidden, reason: be.Reason, cause: be.Err, final: true}
		}
		return nil, &refusal{status: http.StatusInternalServerError, reason: "the binding could not be read", cause: err}
	}
	ss := &session{
		expires: time.Now().Add(s.ttl),
		serial:  c.serial,
		mac:     c.mac,
		lldp:    c.lldp,
		// Sealed with the session, so that the proof's quote is checked
		// with the AK this claim's challenges are bound to.
		akPublic: c.ak.Public,
		binding:  Binding{Found: b.Found, Authored: b.Authored, RSA2048: clipHash(b.RSA2048), ECCP256: clipHash(b.ECCP256)},
	}
	// One read of randomness for the session id and every secret.
	var rnd [16 + 2*secretLen]byte
	if _, err := rand.Read(rnd[:16+len(c.eks)*secretLen]); err != nil {
		return nil, &refusal{status: http.StatusInternalServerError, reason: "no randomness"}
	}
	copy(ss.id[:], rnd[:16])
	rsp := &challengeMsg{Challenges: make([]challengeEnt, 0, len(c.eks))}
	for i, ek := range c.eks {
		secret := ss.secret[ek.kind][:]
		copy(secret, rnd[16+i*secretLen:])
		cred, encSecret, err := credactivation.Generate(name, ek.pub, symBlockSize, secret)
		if err != nil {
			return nil, &refusal{status: http.StatusBadRequest, reason: fmt.Sprintf("no challenge can be made for the %s EK", ek.kind)}
		}
		ss.hash[ek.kind] = ek.hash
		rsp.Challenges = append(rsp.Challenges, challengeEnt{Kind: ek.kind.String(), Credential: cred, Secret: encSecret})
	}
	blob, err := s.sealer.seal(ss)
	if err != nil {
		return nil, &refusal{status: http.StatusInternalServerError, reason: "the session could not be sealed"}
	}
	rsp.Session = blob
	return rsp, nil
}

// symBlockSize is the AES block size of the TCG EK templates' symmetric
// cipher (AES-128-CFB), as go-attestation uses it.
const symBlockSize = 16

func clipHash(h string) string {
	if len(h) > 255 {
		return h[:255]
	}
	return h
}

// checkAK runs go-attestation's checks of the AK's parameters (a restricted,
// TPM-generated, non-exportable key whose creation the TPM certified) and
// returns the AK's name, which each challenge binds to.
func checkAK(ak AKParameters) (*tpm2.HashValue, error) {
	p := goattest.ActivationParameters{AK: goattest.AttestationParameters{
		Public:            ak.Public,
		CreateData:        ak.CreateData,
		CreateAttestation: ak.CreateAttestation,
		CreateSignature:   ak.CreateSignature,
	}}
	if err := p.CheckAKParameters(); err != nil {
		return nil, err
	}
	att, err := tpm2.DecodeAttestationData(ak.CreateAttestation)
	if err != nil {
		return nil, err
	}
	if att.AttestedCreationInfo == nil || att.AttestedCreationInfo.Name.Digest == nil {
		return nil, errors.New("the creation attestation names no key")
	}
	return att.AttestedCreationInfo.Name.Digest, nil
}

// serveProof answers a proof: it verifies the proof against its session
// (verifyProof), judges the binding (Judge), records an admitting proof as
// spent, verifies the quote (verifyBoot), waits or admits the claim
// (answer), and writes the audit line attest.verdict (verdictAttrs) before
// the answer.
func (s *Server) serveProof(w http.ResponseWriter, r *http.Request, body []byte) {
	ctx := r.Context()
	p, err := decodeProof(body)
	if err != nil {
		s.refuse(w, r, "", http.StatusBadRequest, err.Error())
		return
	}
	ss, err := s.sealer.open(p.session)
	if err != nil {
		s.refuse(w, r, "", http.StatusForbidden, "the session is not one fleetd sealed")
		return
	}
	now := time.Now()
	proven, ref := verifyProof(ss, p, now)
	if ref != nil {
		s.refuseFor(w, r, ss.serial, ref)
		return
	}
	// The verdict comes from the sealed binding and the proven hashes
	// alone. Only a proof that can admit is recorded as spent (once
	// across replicas): any TPM, a software one too, proves its own EKs
	// under any serial, and a record per such proof would grow without
	// bound; a refused or waiting proof replayed changes nothing.
	j := Judge(ss.binding, proven)
	if j.Verdict == Attested {
		if ref := s.spend(ctx, ss); ref != nil {
			s.refuseFor(w, r, ss.serial, ref)
			return
		}
	}
	boot, ref := verifyBoot(ss, p)
	if ref != nil {
		s.refuseFor(w, r, ss.serial, ref)
		return
	}
	c := Claim{
		Serial:  ss.serial,
		MAC:     ss.mac,
		LLDP:    ss.lldp,
		RSA2048: proven.RSA2048,
		ECCP256: proven.ECCP256,
		Peer:    r.RemoteAddr,
		Proven:  now,
		Boot:    boot,
	}
	res := s.answer(ctx, c, j, now)
	s.log.LogAttrs(ctx, verdictLevel(j.Verdict), "attest.verdict", verdictAttrs(c, j, res, ss.binding)...)
	if s.judged != nil {
		s.judged(ctx, c, j)
	}
	if res.Reason == ReasonAdmitLater && res.InstallCode == "" {
		writeError(w, http.StatusServiceUnavailable, ReasonAdmitLater)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// verifyProof checks proof p against its session ss at now: the session
// has not expired, and p answers every challenge of the session, and no
// other, with its secret (compared in constant time). It returns the EK
// hashes p proves. It does no I/O.
func verifyProof(ss *session, p *proof, now time.Time) (Proven, *refusal) {
	if !now.Before(ss.expires) {
		return Proven{}, &refusal{status: http.StatusGone, reason: "the session expired"}
	}
	ok := 1
	for _, k := range []KeyKind{RSA2048, ECCP256} {
		got, sent := p.secrets[k]
		switch {
		case ss.hash[k] == "" && sent:
			ok = 0
		case ss.hash[k] != "" && !sent:
			ok = 0
		case sent:
			ok &= subtle.ConstantTimeCompare(got, ss.secret[k][:])
		}
	}
	if ok != 1 {
		return Proven{}, &refusal{status: http.StatusForbidden, reason: "the proof's secrets are not the session's"}
	}
	return Proven{RSA2048: ss.hash[RSA2048], ECCP256: ss.hash[ECCP256]}, nil
}

// spend records the session ss as spent, once across replicas: a session
// already spent, or one that cannot be recorded, is refused.
func (s *Server) spend(ctx context.Context, ss *session) *refusal {
	fresh, err := s.spent.Spend(ctx, ss.idString(), ss.expires)
	switch {
	case err != nil:
		return &refusal{status: http.StatusServiceUnavailable, reason: "the session could not be recorded"}
	case !fresh:
		return &refusal{status: http.StatusConflict, reason: "the session was already proven"}
	}
	return nil
}

// verifyBoot verifies the quote of proof p, if it carries one, with the AK
// that the challenges of its session ss are bound to, and returns the boot
// state it shows: nil when p carries no quote. A quote that does not
// verify is a final refusal with the quote's reason: the machine sends
// evidence its TPM did not make, so it gets no verdict, whatever its EKs.
// It does no I/O.
func verifyBoot(ss *session, p *proof) (*BootState, *refusal) {
	if p.quote == nil {
		return nil, nil
	}
	if ss.akPublic == nil {
		return nil, &refusal{status: http.StatusForbidden, reason: "the session names no AK to check the quote with"}
	}
	boot, err := verifyQuote(ss.akPublic, QuoteNonce(p.session), p.quote)
	if err != nil {
		var qe *quoteError
		if !errors.As(err, &qe) {
			qe = &quoteError{reason: ReasonQuoteMalformed, cause: err}
		}
		return nil, &refusal{status: http.StatusForbidden, reason: qe.reason, cause: qe.cause, final: true}
	}
	return boot, nil
}

// answer is the answer to claim c judged j at now: a pending-approval
// claim waits (Waiting), an attested one is handed to the admission hook.
func (s *Server) answer(ctx context.Context, c Claim, j Judgement, now time.Time) resultMsg {
	res := resultMsg{Verdict: j.Verdict.String(), Reason: j.Reason}
	switch j.Verdict {
	case PendingApproval:
		s.waiting.put(c, now)
	case Attested:
		res.Reason, res.InstallCode = s.admitted(ctx, c)
	}
	return res
}

// verdictLevel is the level of the audit line of a verdict: a warning for
// a refusal, else information.
func verdictLevel(v Verdict) slog.Level {
	if v != Attested && v != PendingApproval {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// verdictAttrs are the attributes of the audit line attest.verdict of claim
// c, judged j against the approved binding and answered res, in this
// order: serial, verdict, reason; refused_ek_hash when j refuses one; for
// ek-missing, missing_ek_rsa2048 and missing_ek_eccp256, the approved hash
// of each EK the TPM did not present; peer; ek_rsa2048 and ek_eccp256, the
// proven hashes; secure_boot ("unquoted" without a quote), and with a
// quote pcr7 and, when the state is unknown, secure_boot_unknown. The
// install code is never among them.
func verdictAttrs(c Claim, j Judgement, res resultMsg, approved Binding) []slog.Attr {
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("serial", c.Serial),
		slog.String("verdict", res.Verdict),
		slog.String("reason", res.Reason))
	if j.RefusedHash != "" {
		attrs = append(attrs, slog.String("refused_ek_hash", j.RefusedHash))
	}
	if j.Verdict == EKMissing {
		if approved.RSA2048 != "" && c.RSA2048 == "" {
			attrs = append(attrs, slog.String("missing_ek_rsa2048", approved.RSA2048))
		}
		if approved.ECCP256 != "" && c.ECCP256 == "" {
			attrs = append(attrs, slog.String("missing_ek_eccp256", approved.ECCP256))
		}
	}
	attrs = append(attrs, slog.String("peer", c.Peer))
	// The proven hashes, to compare with the evidence (ek-missing refuses
	// no hash, yet the operator needs to see which EKs came).
	if c.RSA2048 != "" {
		attrs = append(attrs, slog.String("ek_rsa2048", c.RSA2048))
	}
	if c.ECCP256 != "" {
		attrs = append(attrs, slog.String("ek_eccp256", c.ECCP256))
	}
	if c.Boot == nil {
		return append(attrs, slog.String("secure_boot", "unquoted"))
	}
	attrs = append(attrs, slog.String("secure_boot", c.Boot.SecureBoot.String()), slog.String("pcr7", c.Boot.PCR7()))
	if c.Boot.Unknown != "" {
		attrs = append(attrs, slog.String("secure_boot_unknown", c.Boot.Unknown))
	}
	return attrs
}

// admitted calls the admission hook and returns the reason and code to
// answer.
func (s *Server) admitted(ctx context.Context, c Claim) (reason, code string) {
	if s.admit == nil {
		return "no provision: no admission hook", ""
	}
	a, err := s.admit(ctx, c)
	switch {
	case errors.Is(err, ErrAdmitLater):
		return ReasonAdmitLater, ""
	case err != nil:
		return ReasonAdmissionFailed, ""
	case a.InstallCode != "":
		return "install code issued", a.InstallCode
	case a.NoProvision != "":
		return "no provision: " + a.NoProvision, ""
	}
	return "no provision", ""
}

// spentMemory is the default SpentSessions: a map of session ids to their
// expiry, pruned as sessions expire.
type spentMemory struct {
	mu        sync.Mutex
	ids       map[string]time.Time
	nextPrune time.Time
}

func newSpentMemory() *spentMemory { return &spentMemory{ids: map[string]time.Time{}} }

func (m *spentMemory) Spend(_ context.Context, id string, expires time.Time) (bool, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.After(m.nextPrune) {
		for k, exp := range m.ids {
			if now.After(exp) {
				delete(m.ids, k)
			}
		}
		m.nextPrune = now.Add(10 * time.Second)
	}
	if _, ok := m.ids[id]; ok {
		return false, nil
	}
	m.ids[id] = expires
	return true, nil
}
