package attest

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultTries is how many times Run tries before it gives up.
const DefaultTries = 5

// ClientConfig tunes Run. A nil *ClientConfig means every default. Run
// only reads it; it must not change while a Run uses it.
type ClientConfig struct {
	// HTTPClient sends the requests; it carries the TLS configuration
	// that trusts fleetd. Nil: http.DefaultClient.
	HTTPClient *http.Client
	// Tries is how many tries Run makes before it gives up. Zero:
	// DefaultTries (5).
	Tries int
	// Backoff returns how long to wait after failed try n (1-based) before
	// the next. Nil: 1 s, doubling, at most 30 s. A func that returns 0
	// retries at once.
	Backoff func(try int) time.Duration
	// RequestTimeout bounds each request. Zero: 30 s.
	RequestTimeout time.Duration
	// Console receives the console lines, word for word (see Run). Nil:
	// they are dropped.
	Console io.Writer
	// EventLog returns the UEFI event log (TCG crypto-agile format) that
	// describes the boot the TPM measured; Run calls it once, and sends
	// the log with the quote when the TPM is a Quoter. nil bytes: no log,
	// and the server knows no Secure Boot state. A log over MaxEventLog
	// is not sent. An error fails the try. Nil: for a *Device that
	// OpenTPM opened, the log at DefaultEventLog (none when the file does
	// not exist); for any other TPM (a command channel, a simulator, a
	// software TPM), none, as the platform's log does not describe its
	// PCRs.
	EventLog func() ([]byte, error)
}

// Machine is what the client claims besides its TPM's keys.
type Machine struct {
	// Serial is the SMBIOS serial (ReadSerial).
	Serial string
	// MAC is the MAC of the interface the machine boots on.
	MAC net.HardwareAddr
	// LLDP is the switch port learned from the switch's LLDP frame, nil
	// when no frame came within the wait.
	LLDP *LLDP
}

// Result is the server's answer to a proof.
type Result struct {
	// Verdict is the server's verdict.
	Verdict Verdict
	// Reason explains the verdict, or why an attested machine got no code.
	Reason string
	// InstallCode is the code an attested machine was admitted with, ""
	// when none. It is a secret: Run never prints it.
	InstallCode string
	// Tries is the number of tries made, the last one included.
	Tries int
}

// Errors Run returns; match them with errors.Is.
var (
	// ErrNoVerdict: every try failed (the console said "attest: try N
	// failed" for the last N): fleetd did not answer, or the TPM failed.
	// The error also wraps the last try's error (errors.Is finds ErrTPM
	// when the TPM failed).
	ErrNoVerdict = errors.New("attest: no verdict")
	// ErrBadMachine: the Machine or TPM given to Run cannot make a claim.
	ErrBadMachine = errors.New("attest: nothing to claim")
	// ErrBadURL: the server URL given to Run is not an https URL.
	ErrBadURL = errors.New("attest: no fleetd URL")
	// ErrRefused: fleetd refused the claim before any verdict, until an
	// operator acts (its binding source returned a BindingError, e.g. more
	// than one device holds the serial). The console said "attest: FAILED"
	// and the reason, which Result.Reason and the error's text hold; Run
	// did not try again.
	ErrRefused = errors.New("attest: fleetd refused the claim")
)

// refusedError is a claim fleetd refused until an operator acts.
type refusedError struct{ reason string }

func (e *refusedError) Error() string { return "fleetd refused the claim: " + e.reason }

// Run attests the machine to the server at serverURL (the prefix fleetd
// mounts the Server at, e.g. "https://fleetd:8443/attest"), and returns the
// verdict. It reads the TPM's EKs and AK, claims, activates each challenge
// with the TPM, and sends the proof; when the TPM is a Quoter, the proof
// carries its quote of PCRs 0-7 of every active PCR bank over the
// session's nonce and the event log (ClientConfig.EventLog). A try that
// fails (fleetd unreachable or answering an error, a TPM error, a refused
// proof) is tried again with a new session, up to Tries times, with
// Backoff between tries.
//
// The console shows, word for word:
//
//	attest: PASSED                      the verdict is attested
//	attest: FAILED <verdict>            any other verdict, e.g. attest: FAILED pending-approval
//	attest: FAILED                      fleetd refused the claim without a verdict (ErrRefused)
//	attest: try N failed                try N got no verdict
//
// After a FAILED line, or a PASSED with no install code, a line
// "attest: <reason>" follows; after a try line, a line "attest: <error>".
// The install code is never printed. A refused claim is not tried again.
//
// Run may be called concurrently with other TPMs; one TPM attests one Run
// at a time. A verdict other than attested is not an error: read
// Result.Verdict. Run returns ErrRefused (with Result.Reason and
// Result.Tries set) when fleetd refused the claim, ErrNoVerdict when every
// try failed, ErrBadMachine for a claim it cannot make, ErrBadURL for a URL
// that is not https, or the context's error.
func Run(ctx context.Context, serverURL string, tpm TPM, m Machine, cfg *ClientConfig) (Result, error) {
	if err := checkRun(serverURL, tpm, m); err != nil {
		return Result{}, err
	}
	c := clientConfig(cfg, tpm)
	console := c.Console
	if console == nil {
		console = io.Discard
	}
	cl := &client{cfg: &c, url: strings.TrimSuffix(serverURL, "/"), tpm: tpm, m: m}
	var last error
	for try := 1; try <= c.Tries; try++ {
		res, err := cl.try(ctx)
		if err == nil {
			res.Tries = try
			printVerdict(console, res)
			return res, nil
		}
		if ctx.Err() != nil {
			return Result{Tries: try}, ctx.Err()
		}
		if re := (*refusedError)(nil); errors.As(err, &re) {
			fmt.Fprintln(console, "attest: FAILED")
			fmt.Fprintf(console, "attest: %s\n", oneLine(re.reason))
			return Result{Reason: re.reason, Tries: try}, fmt.Errorf("%w: %s", ErrRefused, re.reason)
		}
		last = err
		fmt.Fprintf(console, "attest: try %d failed\n", try)
		fmt.Fprintf(console, "attest: %s\n", oneLine(err.Error()))
		if try == c.Tries {
			break
		}
		if err := sleep(ctx, c.Backoff(try)); err != nil {
			return Result{Tries: try}, err
		}
	}
	return Result{Tries: c.Tries}, fmt.Errorf("%w: try %d failed: %w", ErrNoVerdict, c.Tries, last)
}

// checkRun checks Run's arguments: an https URL with a host (the secrets
// and the install code travel only over TLS), a TPM, and a Machine whose
// claim fleetd would accept.
func checkRun(serverURL string, tpm TPM, m Machine) error {
	if u, err := url.Parse(serverURL); err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%w: the server URL %q is not an https URL", ErrBadURL, serverURL)
	}
	if tpm == nil {
		return fmt.Errorf("%w: no TPM", ErrBadMachine)
	}
	if err := checkSerial(m.Serial); err != nil {
		return fmt.Errorf("%w: %w", ErrBadMachine, err)
	}
	if len(m.MAC) != 6 {
		return fmt.Errorf("%w: the MAC %q is not an EUI-48", ErrBadMachine, m.MAC.String())
	}
	if m.LLDP != nil {
		if err := checkLLDP(m.LLDP); err != nil {
			return fmt.Errorf("%w: %w", ErrBadMachine, err)
		}
	}
	return nil
}

// clientConfig returns a copy of cfg (nil: the defaults) with its defaults
// filled in; a platform TPM's event log is read from DefaultEventLog.
func clientConfig(cfg *ClientConfig, tpm TPM) ClientConfig {
	var c ClientConfig
	if cfg != nil {
		c = *cfg
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	if c.Tries <= 0 {
		c.Tries = DefaultTries
	}
	if c.Backoff == nil {
		c.Backoff = defaultBackoff
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.EventLog == nil {
		c.EventLog = noEventLog
		if d, ok := tpm.(*Device); ok && d.platform {
			c.EventLog = func() ([]byte, error) { return readEventLog(DefaultEventLog) }
		}
	}
	return c
}

// printVerdict writes a verdict's console lines: attest: PASSED, and the
// reason when no install code came; or attest: FAILED <verdict> and the
// reason. The install code is never written.
func printVerdict(console io.Writer, res Result) {
	if res.Verdict != Attested {
		fmt.Fprintf(console, "attest: FAILED %s\n", res.Verdict)
		fmt.Fprintf(console, "attest: %s\n", oneLine(res.Reason))
		return
	}
	fmt.Fprintln(console, "attest: PASSED")
	if res.InstallCode == "" {
		fmt.Fprintf(console, "attest: %s\n", oneLine(res.Reason))
	}
}

// sleep waits d, or until ctx is done, and then returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func noEventLog() ([]byte, error) { return nil, nil }

func defaultBackoff(try int) time.Duration {
	d := time.Second << min(try-1, 5)
	return min(d, 30*time.Second)
}

// oneLine keeps a server's or an error's words on one console line.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

type client struct {
	cfg *ClientConfig
	url string
	tpm TPM
	m   Machine
	msg []byte // the claim, once built

	log     []byte // the event log, once read
	logRead bool
}

// eventLog reads the event log once: it does not change between tries.
func (cl *client) eventLog() ([]byte, error) {
	if cl.logRead {
		return cl.log, nil
	}
	log, err := cl.cfg.EventLog()
	if err != nil {
		return nil, fmt.Errorf("read the event log: %w", err)
	}
	if len(log) > MaxEventLog {
		log = nil
	}
	cl.log, cl.logRead = log, true
	return log, nil
}

// quote quotes the PCRs over the session's nonce when the TPM can, with
// the event log; nil when it cannot.
func (cl *client) quote(session []byte) (*quoteMsg, error) {
	q, ok := cl.tpm.(Quoter)
	if !ok {
		return nil, nil
	}
	log, err := cl.eventLog()
	if err != nil {
		return nil, err
	}
	qt, err := q.Quote(QuoteNonce(session))
	if err != nil {
		return nil, fmt.Errorf("quote the PCRs: %w", err)
	}
	m := &quoteMsg{Quote: qt.Quote, Signature: qt.Signature, EventLog: log}
	for _, bk := range qt.Banks {
		name := bankName(bk.Hash)
		if _, ok := bankNamed(name); !ok {
			return nil, fmt.Errorf("quote the PCRs: a PCR bank of an unknown hash (%s)", name)
		}
		m.Banks = append(m.Banks, bankMsg{Alg: name, PCRs: bk.PCRs})
	}
	return m, nil
}

// claimBody builds the claim once: the EKs and the AK do not change
// between tries.
func (cl *client) claimBody() ([]byte, error) {
	if cl.msg != nil {
		return cl.msg, nil
	}
	eks, err := cl.tpm.EKs()
	if err != nil {
		return nil, fmt.Errorf("read the EKs: %w", err)
	}
	ak, err := cl.tpm.AK()
	if err != nil {
		return nil, fmt.Errorf("make the AK: %w", err)
	}
	m := claimMsg{
		Version: protocolVersion,
		Serial:  cl.m.Serial,
		MAC:     cl.m.MAC.String(),
		LLDP:    cl.m.LLDP,
		//lint:ignore S1016 the wire message names its fields apart from the public type, so either can change alone
		AK: akMsg{
			Public:            ak.Public,
			CreateData:        ak.CreateData,
			CreateAttestation: ak.CreateAttestation,
			CreateSignature:   ak.CreateSignature,
		},
	}
	for _, ek := range eks {
		der, err := x509.MarshalPKIXPublicKey(ek.Public)
		if err != nil {
			return nil, fmt.Errorf("encode the %s EK: %w", ek.Kind, err)
		}
		cert := ek.Certificate
		if len(cert) > maxEKCert {
			cert = nil
		}
		m.EKs = append(m.EKs, ekMsg{Kind: ek.Kind.String(), Public: der, Certificate: cert})
	}
	if len(m.EKs) == 0 {
		return nil, errors.New("the TPM presents no EK")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	cl.msg = b
	return b, nil
}

// try runs one claim and proof.
func (cl *client) try(ctx context.Context) (Result, error) {
	body, err := cl.claimBody()
	if err != nil {
		return Result{}, err
	}
	var ch challengeMsg
	if err := cl.post(ctx, "claim", body, &ch); err != nil {
		return Result{}, err
	}
	if len(ch.Challenges) == 0 || len(ch.Challenges) > 2 {
		return Result{}, fmt.Errorf("fleetd answered %d challenges", len(ch.Challenges))
	}
	p := proofMsg{Session: ch.Session}
	for _, c := range ch.Challenges {
		kind, err := parseKind(c.Kind)
		if err != nil {
			return Result{}, fmt.Errorf("fleetd answered a challenge: %w", err)
		}
		secret, err := cl.tpm.ActivateCredential(Challenge{Kind: kind, Credential: c.Credential, Secret: c.Secret})
		if err != nil {
			return Result{}, fmt.Errorf("activate the %s challenge: %w", kind, err)
		}
		p.Secrets = append(p.Secrets, secretEnt{Kind: kind.String(), Secret: secret})
	}
	if p.Quote, err = cl.quote(ch.Session); err != nil {
		return Result{}, err
	}
	pb, err := encodeProof(p)
	if err != nil {
		return Result{}, err
	}
	var rm resultMsg
	if err := cl.post(ctx, "proof", pb, &rm); err != nil {
		return Result{}, err
	}
	v, err := ParseVerdict(rm.Verdict)
	if err != nil {
		return Result{}, fmt.Errorf("fleetd answered: %w", err)
	}
	return Result{Verdict: v, Reason: rm.Reason, InstallCode: rm.InstallCode}, nil
}

// maxAnswer bounds what the client reads of an answer.
const maxAnswer = 64 << 10

func (cl *client) post(ctx context.Context, op string, body []byte, into any) error {
	ctx, cancel := context.WithTimeout(ctx, cl.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.url+"/"+op, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	rsp, err := cl.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer rsp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(rsp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s: read the answer: %w", op, err)
	}
	if rsp.StatusCode != http.StatusOK {
		var e errorMsg
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			if e.Refused {
				return &refusedError{reason: e.Error}
			}
			return fmt.Errorf("%s: fleetd answered %d: %s", op, rsp.StatusCode, e.Error)
		}
		return fmt.Errorf("%s: fleetd answered %s", op, rsp.Status)
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: fleetd's answer does not decode", op)
	}
	return nil
}
