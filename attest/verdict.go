package attest

import (
	"context"
	"errors"
	"strconv"
)

// Verdict is the server's judgement of one attestation. The zero value is
// invalid; the five verdicts are the strings the console, the audit line
// and NetBox's attest_verdict show.
type Verdict uint8

const (
	// Attested: the TPM proved every EK the node's entry approves.
	Attested Verdict = iota + 1
	// PendingApproval: no entry names the serial, or the entry approves no
	// EK and its author wrote it so (never written, or cleared by the
	// author). The claim waits for an operator (Server.Waiting).
	PendingApproval
	// EKHashMismatch: an approved EK type was presented with another hash.
	// The audit line carries the refused hash.
	EKHashMismatch
	// EKMissing: the entry approves an EK the TPM did not present. The
	// audit line carries the approved hash of each EK not presented
	// (missing_ek_rsa2048, missing_ek_eccp256).
	EKMissing
	// EKBindingUnauthored: the binding source says the configured author
	// did not write the current binding, even an empty one (another user
	// cleared it).
	EKBindingUnauthored
)

var verdictNames = [...]string{
	Attested:            "attested",
	PendingApproval:     "pending-approval",
	EKHashMismatch:      "ek-hash-mismatch",
	EKMissing:           "ek-missing",
	EKBindingUnauthored: "ek-binding-unauthored",
}

// String returns the verdict as the runbook writes it, e.g.
// "pending-approval", or "invalid" for a value that is no verdict.
func (v Verdict) String() string {
	if v == 0 || int(v) >= len(verdictNames) {
		return "invalid"
	}
	return verdictNames[v]
}

// ParseVerdict returns the verdict that String writes as s.
func ParseVerdict(s string) (Verdict, error) {
	for v := Attested; int(v) < len(verdictNames); v++ {
		if verdictNames[v] == s {
			return v, nil
		}
	}
	return 0, errors.New("attest: unknown verdict " + strconv.Quote(s))
}

// MarshalText implements encoding.TextMarshaler; it refuses the zero value.
func (v Verdict) MarshalText() ([]byte, error) {
	if v.String() == "invalid" {
		return nil, errors.New("attest: invalid verdict")
	}
	return []byte(v.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (v *Verdict) UnmarshalText(b []byte) error {
	p, err := ParseVerdict(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// Binding is what a node's entry approves for one serial: the hash of each
// approved EK, and whether the binding is the one its author wrote. The zero
// value is "no entry names the serial".
type Binding struct {
	// Found reports that an entry names the serial. False: pending-approval.
	Found bool
	// RSA2048 is the approved RSA-2048 EK hash (approved_ek_hash), ""
	// when the entry approves none. Compared byte for byte with EKHash.
	RSA2048 string
	// ECCP256 is the approved ECC P-256 EK hash (approved_ek_hash_ecc), ""
	// when the entry approves none.
	ECCP256 string
	// Authored reports that the configured binding author wrote the current
	// binding (NetBox's changelog), an empty one included: a binding never
	// written, or cleared by its author, is authored; one another user
	// cleared is not. False refuses the entry, whatever it approves:
	// ek-binding-unauthored.
	Authored bool
}

// Bindings is the server's source of bindings (fleetd wires NetBox to it).
// Binding is called at most once per attestation, when the claim arrives,
// and never for a proof. It must be safe for concurrent use.
type Bindings interface {
	// Binding returns the binding of serial. An unknown serial is not an
	// error: it is Binding{} (Found false). An error that wraps
	// ErrBindingUnavailable makes the server answer 503, and the client
	// tries again. A *BindingError refuses the claim for its Reason, and
	// the client stops. Any other error is answered 500, and the client
	// tries again. The server logs the error of each.
	Binding(ctx context.Context, serial string) (Binding, error)
}

// ErrBindingUnavailable is what a Bindings source wraps when it did not
// answer (NetBox down or slow).
var ErrBindingUnavailable = errors.New("attest: the binding source did not answer")

// BindingError is what a Bindings source returns when no binding of the
// serial can be judged until an operator acts, e.g. when more than one
// device holds the serial. Trying again changes nothing, so the server
// refuses the claim before any challenge: the client's console says
// "attest: FAILED" and Reason, and it does not try again; the audit line
// attest.verdict carries Reason and Err.
type BindingError struct {
	// Reason says what is wrong, in words for the operator, e.g. `NetBox
	// holds more than one device with serial "S"`. It is answered to the
	// machine, which any machine can claim to be: it names no secret and
	// nothing the claim did not say.
	Reason string
	// Err is the cause, for the audit line only (its "error"); nil: none.
	Err error
}

// Error returns the reason and the cause.
func (e *BindingError) Error() string {
	if e.Err == nil {
		return "attest: " + e.Reason
	}
	return "attest: " + e.Reason + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *BindingError) Unwrap() error { return e.Err }

// Proven holds the hashes of the EKs whose possession a TPM proved; "" for a
// kind it did not present.
type Proven struct {
	RSA2048 string
	ECCP256 string
}

// Judgement is a verdict with the words that explain it.
type Judgement struct {
	Verdict Verdict
	// Reason says why, in words for the operator; it names no secret.
	Reason string
	// RefusedHash is the presented EK hash that an ek-hash-mismatch
	// refused; "" for every other verdict.
	RefusedHash string
}

// Judge returns the verdict for a binding and the EKs whose possession was
// proven. It is a pure function. The first rule that applies decides:
//
//  1. no entry names the serial (Found false): pending-approval;
//  2. the binding is not the one its author wrote, even when it approves
//     no EK (another user cleared it): ek-binding-unauthored (nothing in a
//     binding another user wrote is compared);
//  3. the entry approves no EK: pending-approval;
//  4. an approved EK's type is presented with another hash:
//     ek-hash-mismatch, RSA-2048 before ECC P-256, with the refused
//     (presented) hash;
//  5. an approved EK is not presented: ek-missing;
//  6. otherwise attested. An EK the entry does not approve may be
//     presented: an entry may approve one kind or both.
//
// Mismatch comes before missing because a TPM whose one EK differs and
// whose other is absent is another TPM, and the refused hash tells the
// operator which.
func Judge(b Binding, p Proven) Judgement {
	switch {
	case !b.Found:
		return Judgement{Verdict: PendingApproval, Reason: "no entry names the serial"}
	case !b.Authored && b.RSA2048 == "" && b.ECCP256 == "":
		return Judgement{Verdict: EKBindingUnauthored, Reason: "the changelog does not show the binding author writing the binding, which approves no EK"}
	case !b.Authored:
		return Judgement{Verdict: EKBindingUnauthored, Reason: "the changelog does not show the binding author writing the binding"}
	case b.RSA2048 == "" && b.ECCP256 == "":
		return Judgement{Verdict: PendingApproval, Reason: "the entry approves no EK"}
	case b.RSA2048 != "" && p.RSA2048 != "" && p.RSA2048 != b.RSA2048:
		return Judgement{Verdict: EKHashMismatch, Reason: "the TPM's RSA-2048 EK is not the one the entry approves", RefusedHash: p.RSA2048}
	case b.ECCP256 != "" && p.ECCP256 != "" && p.ECCP256 != b.ECCP256:
		return Judgement{Verdict: EKHashMismatch, Reason: "the TPM's ECC P-256 EK is not the one the entry approves", RefusedHash: p.ECCP256}
	case b.RSA2048 != "" && p.RSA2048 == "":
		return Judgement{Verdict: EKMissing, Reason: "the entry approves an RSA-2048 EK the TPM did not present"}
	case b.ECCP256 != "" && p.ECCP256 == "":
		return Judgement{Verdict: EKMissing, Reason: "the entry approves an ECC P-256 EK the TPM did not present"}
	}
	return Judgement{Verdict: Attested, Reason: "the TPM proved every EK the entry approves"}
}
