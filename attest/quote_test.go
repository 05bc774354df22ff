package attest_test

import (
	"bytes"
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/google/go-tpm/tpm2"
)

// quoter is a TPM that quotes.
type quoter interface {
	attest.TPM
	attest.Quoter
}

// measuredTPM returns a TPM whose PCRs hold boot's measurements.
type measuredTPM func(t *testing.T, boot *attesttest.BootLog) quoter

// bankSets are the sets of active PCR banks the tests run TPMs with: the
// four (the reference simulator, OVMF with swtpm), two, and SHA-256 alone
// (swtpm as swtpm_setup manufactures it by default).
var bankSets = [][]crypto.Hash{
	{crypto.SHA1, crypto.SHA256, crypto.SHA384, crypto.SHA512},
	{crypto.SHA1, crypto.SHA256},
	{crypto.SHA256},
}

// bankList names banks as a subtest and the wire do: "sha1+sha256".
func bankList(banks []crypto.Hash) string {
	names := make([]string, len(banks))
	for i, h := range banks {
		names[i] = attesttest.BankName(h)
	}
	return strings.Join(names, "+")
}

func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// testQuote attests a TPM with the PCR banks banks active that measured a
// boot with Secure Boot on, each bank of it, and refuses one whose log
// does not replay; it decides the quotes of TPMs that measured the boot
// with Secure Boot on and off, and refuses quotes that do not verify,
// each with its reason.
func testQuote(t *testing.T, banks []crypto.Hash, measured measuredTPM) {
	k := newBootKeys(t)
	on, off := k.log(t, true, banks...), k.log(t, false, banks...)
	dbx := sha256.Sum256([]byte("attesttest dbx"))

	t.Run("secure boot on", func(t *testing.T) {
		tpm := measured(t, on)
		f := newFleetFor(t, nil, tpm)
		b := f.attestBoot(t, tpm, on.Bytes())
		if b == nil || b.SecureBoot != attest.SecureBootOn || b.Unknown != "" {
			t.Fatalf("boot %+v, want Secure Boot on", b)
		}
		if want := hex.EncodeToString(on.PCRs()[7]); b.PCR7() != want {
			t.Errorf("PCR 7 %s, want %s", b.PCR7(), want)
		}
		if len(b.PK.Certificates) != 1 || b.PK.Certificates[0].Subject != "CN=attesttest PK" ||
			len(b.KEK.Certificates) != 1 || b.KEK.Certificates[0].Subject != "CN=attesttest KEK" {
			t.Errorf("PK %+v, KEK %+v", b.PK, b.KEK)
		}
		if len(b.DB.Certificates) != 1 || b.DB.Certificates[0].SHA256 != fingerprint(k.db) {
			t.Errorf("db %+v, want the certificate %s", b.DB, fingerprint(k.db))
		}
		if len(b.DBX.Hashes) != 1 || b.DBX.Hashes[0] != hex.EncodeToString(dbx[:]) {
			t.Errorf("dbx %+v", b.DBX)
		}
		if len(b.BootLoaderAuthority) != 1 || b.BootLoaderAuthority[0].SHA256 != fingerprint(k.db) ||
			b.BootLoaderAuthority[0].Subject != "CN=attesttest db" {
			t.Errorf("boot loader authority %+v, want the db certificate", b.BootLoaderAuthority)
		}
		line := f.logs.Lines("attest.verdict")
		if len(line) != 1 || !strings.Contains(line[0], "verdict=attested") ||
			!strings.Contains(line[0], "secure_boot=on pcr7="+b.PCR7()) {
			t.Errorf("attest.verdict %q, want secure_boot=on and PCR 7", line)
		}
	})

	// The boot with Secure Boot off, one without its log, and quotes
	// changed by hand (an earlier session's, another AK's, changed
	// values, a changed signature), each as the server decides a proof's
	// quote (verifyQuote); the answer and the audit line of a refused
	// quote are the ones "log does not replay" checks.
	t.Run("secure boot off", func(t *testing.T) {
		b, reason, err := verifyQuote(t, measured(t, off), off.Bytes(), nil)
		if b == nil || b.SecureBoot != attest.SecureBootOff || len(b.BootLoaderAuthority) != 0 {
			t.Fatalf("boot %+v (%q %v), want Secure Boot off and no authority", b, reason, err)
		}
		if len(b.DB.Certificates) != 1 || b.PCR7() != hex.EncodeToString(off.PCRs()[7]) {
			t.Errorf("db %+v, PCR 7 %s", b.DB, b.PCR7())
		}
	})

	// The boot measured with Secure Boot on, the log sent of a boot with
	// it off: the log lies about the PCRs, from the quote's first bank on.
	t.Run("log does not replay", func(t *testing.T) {
		tpm := measured(t, on)
		f := newFleetFor(t, nil, tpm)
		res, console, err := f.runLog(t, tpm, "S1", off.Bytes())
		checkRefused(t, f, res, console, err, attest.ReasonEventLogReplay)
		cause := `error="the ` + attesttest.BankName(banks[0]) + ` bank: `
		if line := f.logs.Lines("attest.verdict"); len(line) != 1 || !strings.Contains(line[0], cause) {
			t.Errorf("attest.verdict %q, want %q", line, cause)
		}
	})

	// Cases that need two banks, or a bank the TPM does not have, run
	// only where they apply (runs).
	notQuoted := crypto.Hash(0)
	for _, h := range attesttest.Banks() {
		if !slices.Contains(banks, h) {
			notQuoted = h
			break
		}
	}
	forged := []struct {
		name   string
		reason string
		forge  func(t *testing.T, tpm quoter, session []byte, q *wireQuote)
		runs   bool
	}{
		{"nonce of an earlier session", attest.ReasonQuoteNonce, func(t *testing.T, tpm quoter, _ []byte, q *wireQuote) {
			// The earlier session's quote comes again with a new session.
			*q = *quoteOf(t, tpm, []byte("an earlier session"), on.Bytes())
		}, true},
		{"another AK", attest.ReasonQuoteSigner, func(t *testing.T, _ quoter, session []byte, q *wireQuote) {
			other := quickTPM(t, 1)
			other.Measure(on)
			*q = *quoteOf(t, other, session, on.Bytes())
		}, true},
		{"another key named as the AK", attest.ReasonQuoteSigner, func(t *testing.T, _ quoter, session []byte, q *wireQuote) {
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			soft := quickTPM(t, 0)
			soft.Measure(on)
			forged, err := soft.QuoteWith(key, attest.QuoteNonce(session))
			if err != nil {
				t.Fatal(err)
			}
			q.Quote, q.Signature = forged.Quote, forged.Signature
		}, true},
		{"signature changed", attest.ReasonQuoteSigner, func(_ *testing.T, _ quoter, _ []byte, q *wireQuote) {
			q.Signature[len(q.Signature)-1] ^= 1
		}, true},
		{"PCR value changed", attest.ReasonQuoteValues, func(t *testing.T, _ quoter, _ []byte, q *wireQuote) {
			bk := bankOf(t, q, crypto.SHA256)
			bk.PCRs[7] = bytes.Clone(bk.PCRs[7])
			bk.PCRs[7][0] ^= 1
		}, true},
		{"another bank's PCR value changed", attest.ReasonQuoteValues, func(_ *testing.T, _ quoter, _ []byte, q *wireQuote) {
			bk := &q.Banks[len(q.Banks)-1]
			bk.PCRs[0] = bytes.Clone(bk.PCRs[0])
			bk.PCRs[0][0] ^= 1
		}, true},
		{"a quoted bank omitted", attest.ReasonQuoteValues, func(_ *testing.T, _ quoter, _ []byte, q *wireQuote) {
			q.Banks = q.Banks[1:]
		}, len(banks) > 1},
		{"banks in another order", attest.ReasonQuoteValues, func(_ *testing.T, _ quoter, _ []byte, q *wireQuote) {
			q.Banks[0], q.Banks[1] = q.Banks[1], q.Banks[0]
		}, len(banks) > 1},
		{"a bank not quoted added", attest.ReasonQuoteValues, func(_ *testing.T, _ quoter, _ []byte, q *wireQuote) {
			zero := slices.Repeat([][]byte{make([]byte, notQuoted.Size())}, attest.QuotedPCRs)
			q.Banks = append(q.Banks, wireBank{Alg: attesttest.BankName(notQuoted), PCRs: zero})
		}, notQuoted != 0},
		{"log of another boot", attest.ReasonEventLogReplay, func(_ *testing.T, _ quoter, _ []byte, q *wireQuote) {
			q.EventLog = off.Bytes()
		}, true},
	}
	t.Run("quotes", func(t *testing.T) {
		tpm := measured(t, on)
		t.Run("every active bank", func(t *testing.T) {
			if _, err := tpm.AK(); err != nil {
				t.Fatal(err)
			}
			q, err := tpm.Quote(attest.QuoteNonce([]byte("session")))
			if err != nil {
				t.Fatal(err)
			}
			var got []crypto.Hash
			for _, bk := range q.Banks {
				got = append(got, bk.Hash)
				if want := on.BankPCRs(bk.Hash); !slices.EqualFunc(bk.PCRs, want, bytes.Equal) {
					t.Errorf("the %s bank %x, want the log's %x", attesttest.BankName(bk.Hash), bk.PCRs, want)
				}
			}
			if !slices.Equal(got, banks) {
				t.Errorf("the quote covers the banks %s, want %s", bankList(got), bankList(banks))
			}
		})
		t.Run("no event log", func(t *testing.T) {
			b, reason, err := verifyQuote(t, tpm, nil, nil)
			if b == nil || b.SecureBoot != attest.SecureBootUnknown || b.Unknown != "the machine sent no event log" {
				t.Fatalf("boot %+v (%q %v), want unknown: no event log", b, reason, err)
			}
			if want := hex.EncodeToString(on.PCRs()[7]); b.PCR7() != want {
				t.Errorf("PCR 7 %s, want %s", b.PCR7(), want)
			}
		})
		for _, tc := range forged {
			if !tc.runs {
				continue
			}
			t.Run(tc.name, func(t *testing.T) {
				if _, reason, err := verifyQuote(t, tpm, on.Bytes(), func(session []byte, q *wireQuote) { tc.forge(t, tpm, session, q) }); reason != tc.reason {
					t.Fatalf("the quote is refused with %q (%v), want %q", reason, err, tc.reason)
				}
			})
		}
	})
}

// verifyQuote has tpm quote over a session's nonce with log, changes the
// quote with forge (nil: none), and decides the proof that carries it as
// the server decides one whose secrets are right and whose claim sent
// tpm's AK (attest.VerifyProofQuote): the boot state, or the reason the
// proof is refused and its cause.
func verifyQuote(t *testing.T, tpm quoter, log []byte, forge func(session []byte, q *wireQuote)) (*attest.BootState, string, error) {
	t.Helper()
	ak, err := tpm.AK()
	if err != nil {
		t.Fatal(err)
	}
	session := []byte("the sealed session")
	q := quoteOf(t, tpm, session, log)
	if forge != nil {
		forge(session, q)
	}
	return attest.VerifyProofQuote(ak.Public, proofBody(t, wireProof{Session: session, Secrets: []wireSecret{{"eccp256", make([]byte, 32)}}, Quote: q}))
}

// attestBoot attests tpm as S1 with log as its event log, fails t unless
// it passed and one claim was admitted, and returns that claim's boot.
func (f *fleet) attestBoot(t *testing.T, tpm attest.TPM, log []byte) *attest.BootState {
	t.Helper()
	res, console, err := f.runLog(t, tpm, "S1", log)
	if err != nil || res.Verdict != attest.Attested || console != "attest: PASSED\n" {
		t.Fatalf("Run: %+v %v\n%s", res, err, console)
	}
	calls := f.hook.calls()
	if len(calls) != 1 {
		t.Fatalf("admitted %+v, want one claim", calls)
	}
	return calls[0].Boot
}

// quoteOf is tpm's quote over session's nonce, with log.
func quoteOf(t testing.TB, tpm attest.Quoter, session, log []byte) *wireQuote {
	t.Helper()
	q, err := tpm.Quote(attest.QuoteNonce(session))
	if err != nil {
		t.Fatal(err)
	}
	return wireQuoteOf(q, log)
}

// wireQuoteOf is q as a client sends it, with log.
func wireQuoteOf(q attest.Quote, log []byte) *wireQuote {
	w := &wireQuote{Quote: q.Quote, Signature: q.Signature, EventLog: log}
	for _, bk := range q.Banks {
		w.Banks = append(w.Banks, wireBank{Alg: attesttest.BankName(bk.Hash), PCRs: slices.Clone(bk.PCRs)})
	}
	return w
}

// bankOf returns q's bank of h.
func bankOf(t testing.TB, q *wireQuote, h crypto.Hash) *wireBank {
	t.Helper()
	for i := range q.Banks {
		if q.Banks[i].Alg == attesttest.BankName(h) {
			return &q.Banks[i]
		}
	}
	t.Fatalf("the quote has no %s bank", attesttest.BankName(h))
	return nil
}

// tpmOnly hides a TPM's Quote: a TPM that cannot quote.
type tpmOnly struct{ attest.TPM }

// A TPM that cannot quote attests as before: the claim has no boot, and
// the audit line says unquoted.
func TestNoQuoteAttests(t *testing.T) {
	f, tpm := approvedFleet(t, nil)
	if b := f.attestBoot(t, tpmOnly{tpm}, []byte("never sent")); b != nil {
		t.Fatalf("admitted a claim with the boot %+v, want none", b)
	}
	if line := f.logs.Lines("attest.verdict"); len(line) != 1 || !strings.Contains(line[0], "secure_boot=unquoted") || strings.Contains(line[0], "pcr7") {
		t.Errorf("attest.verdict %q, want secure_boot=unquoted", line)
	}
}

// The client reads the event log once per Run, fails a try whose log
// cannot be read, and sends no log larger than MaxEventLog: the audit
// line says why the Secure Boot state is unknown.
func TestClientEventLog(t *testing.T) {
	f, tpm := approvedFleet(t, nil)
	res, console, err := f.runEventLog(t, tpm, "S1", nil, func() ([]byte, error) { return nil, errors.New("permission denied") })
	if !errors.Is(err, attest.ErrNoVerdict) || !strings.Contains(console, "attest: read the event log: permission denied") {
		t.Fatalf("Run with an unreadable log: %+v %v\n%s", res, err, console)
	}
	b := f.attestBoot(t, tpm, make([]byte, attest.MaxEventLog+1))
	if b == nil || b.Unknown != "the machine sent no event log" {
		t.Fatalf("boot %+v, want no event log", b)
	}
	if line := f.logs.Lines("attest.verdict"); len(line) != 1 ||
		!strings.Contains(line[0], `secure_boot=unknown pcr7=`+b.PCR7()+` secure_boot_unknown="the machine sent no event log"`) {
		t.Errorf("attest.verdict %q", line)
	}
}

// A quote of the wrong shape is answered 400 (which shapes:
// TestCheckQuoteMsg, TestSplitProof), a proof over DefaultMaxProofBody
// 413, before any session is opened; a claim keeps DefaultMaxBody.
func TestMalformedQuotesRefused(t *testing.T) {
	f, tpm := approvedFleet(t, nil)
	ch := f.challenge(t, tpm, "S1")
	quote, err := tpm.Quote(attest.QuoteNonce(ch.Session))
	if err != nil {
		t.Fatal(err)
	}
	proof := func(fn func(q *wireQuote)) []byte {
		p := activate(t, tpm, ch)
		p.Quote = wireQuoteOf(quote, nil)
		fn(p.Quote)
		return proofBody(t, p)
	}
	for name, tc := range map[string]struct {
		body   []byte
		status int
	}{
		"seven PCRs":        {proof(func(q *wireQuote) { q.Banks[1].PCRs = q.Banks[1].PCRs[:7] }), 400},
		"a proof too large": {proof(func(q *wireQuote) { q.EventLog = make([]byte, attest.DefaultMaxProofBody) }), 413},
		"a claim too large": {bytes.Repeat([]byte(" "), attest.DefaultMaxBody+1), 413},
	} {
		op := "proof"
		if strings.HasPrefix(name, "a claim") {
			op = "claim"
		}
		if status, b := f.post(t, op, tc.body); status != tc.status {
			t.Errorf("%s: %d %s, want %d", name, status, b, tc.status)
		}
	}
	// The session was never spent: its proof with the quote attests.
	p := activate(t, tpm, ch)
	p.Quote = wireQuoteOf(quote, nil)
	f.proveWant(t, "the good proof", p, http.StatusOK)
}

// bootKeys are the Secure Boot keys of logs that differ only in their
// state or their PCR banks.
type bootKeys struct{ pk, kek, db []byte }

func newBootKeys(t testing.TB) bootKeys {
	t.Helper()
	var k bootKeys
	for _, c := range []struct {
		der *[]byte
		cn  string
	}{{&k.pk, "attesttest PK"}, {&k.kek, "attesttest KEK"}, {&k.db, "attesttest db"}} {
		der, err := attesttest.Certificate(c.cn)
		if err != nil {
			t.Fatal(err)
		}
		*c.der = der
	}
	return k
}

// log returns the log of a boot with Secure Boot on or off, with k's
// keys, in banks (none: the four).
func (k bootKeys) log(t testing.TB, on bool, banks ...crypto.Hash) *attesttest.BootLog {
	t.Helper()
	l, err := attesttest.SecureBootLog(&attesttest.SecureBootConfig{Enabled: on, PK: k.pk, KEK: k.kek, DB: k.db, Banks: banks})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Every PCR bank the TPM has active is replayed against the event log on
// its own: a bank extended otherwise than the log says, whether the
// firmware extended it with another boot or the OS extended it itself,
// refuses the attestation, and so does a log whose banks are not the
// TPM's active ones. A quote is over PCRs 0-7 of every bank: a client
// that asks its TPM for a quote of other PCRs, or of fewer banks (hiding
// one that is active), is refused, though the TPM signed what it was
// asked.
func TestQuoteEveryBankReplays(t *testing.T) {
	k := newBootKeys(t)
	sha1sha256 := []crypto.Hash{crypto.SHA1, crypto.SHA256}
	on := k.log(t, true, sha1sha256...)
	on1, on256 := k.log(t, true, crypto.SHA1), k.log(t, true, crypto.SHA256)
	off1, off256 := k.log(t, false, crypto.SHA1), k.log(t, false, crypto.SHA256)
	boots := func(l ...*attesttest.BootLog) []*attesttest.BootLog { return l }
	const notBanks = "the TPM's active PCR banks (sha1, sha256) are not the event log's (sha256)"
	four := attesttest.Banks()
	pcrs07 := []uint{0, 1, 2, 3, 4, 5, 6, 7}
	for _, tc := range []struct {
		name     string
		banks    []crypto.Hash         // the TPM's active banks; nil: SHA-1 and SHA-256
		measured []*attesttest.BootLog // the boots the firmware measured, in order; nil: on
		osBank   crypto.Hash           // a bank the OS then extended PCR 7 of itself
		sel      tpm2.TPMLPCRSelection // what the client asks the TPM to quote; none: what attest.Device asks
		log      *attesttest.BootLog   // the log sent; nil: on
		reason   string                // "": attested
		cause    string                // the refusal's cause begins so
	}{
		{name: "both banks replay"},
		{name: "the OS extended SHA-1 itself", osBank: crypto.SHA1, reason: attest.ReasonEventLogReplay, cause: "the sha1 bank: "},
		{name: "the OS extended SHA-256 itself", osBank: crypto.SHA256, reason: attest.ReasonEventLogReplay, cause: "the sha256 bank: "},
		{name: "the firmware extended SHA-1 with another boot", measured: boots(on256, off1), reason: attest.ReasonEventLogReplay, cause: "the sha1 bank: "},
		{name: "the firmware extended SHA-256 with another boot", measured: boots(on1, off256), reason: attest.ReasonEventLogReplay, cause: "the sha256 bank: "},
		// The finding: firmware that extends SHA-1 alone leaves SHA-256 to
		// the OS, which replays a Secure Boot history of its own into it
		// and sends a log of that bank alone, or of both.
		{name: "the OS filled SHA-256 and sends its log", measured: boots(off1, on256), log: on256, reason: notBanks},
		{name: "the OS filled SHA-256 and sends a log of both banks", measured: boots(off1, on256), reason: attest.ReasonEventLogReplay, cause: "the sha1 bank: "},
		{name: "a log without an active bank", log: on256, reason: notBanks},
		{name: "a log of a bank the TPM does not have", banks: []crypto.Hash{crypto.SHA256},
			reason: "the TPM's active PCR banks (sha256) are not the event log's (sha1, sha256)"},
		{name: "a TPM without SHA-256", banks: []crypto.Hash{crypto.SHA1}, log: on1, reason: attest.ReasonQuoteSHA256, cause: "the quote covers the banks (sha1)"},
		{name: "a selection of the four banks", sel: attesttest.Selection(four, pcrs07...)},
		{name: "a selection of the four banks, SHA-256 first", sel: attesttest.Selection([]crypto.Hash{crypto.SHA256, crypto.SHA1, crypto.SHA384, crypto.SHA512}, pcrs07...)},
		{name: "a selection of PCRs 0-6", sel: attesttest.Selection(four, 0, 1, 2, 3, 4, 5, 6), reason: attest.ReasonQuotePCRs},
		{name: "a selection of PCRs 0-8", sel: attesttest.Selection(four, 0, 1, 2, 3, 4, 5, 6, 7, 8), reason: attest.ReasonQuotePCRs},
		{name: "a selection of SHA-256 alone", sel: attesttest.Selection([]crypto.Hash{crypto.SHA256}, pcrs07...), reason: attest.ReasonQuotePCRs},
		{name: "a selection that leaves SHA-1 out", sel: attesttest.Selection([]crypto.Hash{crypto.SHA256, crypto.SHA384, crypto.SHA512}, pcrs07...), reason: attest.ReasonQuotePCRs},
		{name: "a selection of SHA-256 twice", sel: attesttest.Selection([]crypto.Hash{crypto.SHA1, crypto.SHA256, crypto.SHA256, crypto.SHA512}, pcrs07...), reason: attest.ReasonQuotePCRs},
		// A TPM that implements SHA-1 and SHA-256 alone (most hardware
		// TPMs) lists those two.
		{name: "a selection of SHA-1 and SHA-256, a TPM that implements no other", sel: attesttest.Selection(sha1sha256, pcrs07...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			banks, measured, log := tc.banks, tc.measured, cmp.Or(tc.log, on)
			if banks == nil {
				banks = sha1sha256
			}
			if measured == nil {
				measured = boots(on)
			}
			tpm := attesttest.MakeSoftTPM(t, &attesttest.SoftConfig{RSAEK: rsaKey(t, 0), Banks: banks})
			for _, boot := range measured {
				tpm.Measure(boot)
			}
			if tc.osBank != 0 { // a digest of the OS's own, into that bank alone
				d := tc.osBank.New()
				d.Write([]byte("the OS's own measurement"))
				if err := tpm.ExtendBank(tc.osBank, 7, d.Sum(nil)); err != nil {
					t.Fatal(err)
				}
			}
			var forge func(session []byte, w *wireQuote)
			if len(tc.sel.PCRSelections) != 0 {
				forge = func(session []byte, w *wireQuote) {
					q, err := tpm.QuoteSelection(attest.QuoteNonce(session), tc.sel)
					if err != nil {
						t.Fatal(err)
					}
					// Each bank once, as a client sends them.
					q.Banks = slices.CompactFunc(q.Banks, func(a, b attest.PCRBank) bool { return a.Hash == b.Hash })
					*w = *wireQuoteOf(q, log.Bytes())
				}
			}
			b, reason, err := verifyQuote(t, tpm, log.Bytes(), forge)
			if reason != tc.reason || tc.reason == "" && (b == nil || b.SecureBoot != attest.SecureBootOn) ||
				tc.cause != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.cause)) {
				t.Fatalf("boot %+v, refused with %q (%v); want %q (%q)", b, reason, err, tc.reason, tc.cause)
			}
		})
	}
}
