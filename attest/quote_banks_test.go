package attest_test

import (
	"crypto"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/google/go-tpm/tpm2"
)

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
// keys, in banks.
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
// TPM's active ones.
func TestQuoteEveryBankReplays(t *testing.T) {
	k := newBootKeys(t)
	sha1sha256 := []crypto.Hash{crypto.SHA1, crypto.SHA256}
	on := k.log(t, true, sha1sha256...)
	on1, on256 := k.log(t, true, crypto.SHA1), k.log(t, true, crypto.SHA256)
	off1, off256 := k.log(t, false, crypto.SHA1), k.log(t, false, crypto.SHA256)
	boots := func(l ...*attesttest.BootLog) []*attesttest.BootLog { return l }
	const notBanks = "the TPM's active PCR banks (sha1, sha256) are not the event log's (sha256)"
	for _, tc := range []struct {
		name     string
		banks    []crypto.Hash         // the TPM's active banks
		measured []*attesttest.BootLog // the boots the firmware measured, in order
		osBank   crypto.Hash           // a bank the OS then extended PCR 7 of itself
		log      *attesttest.BootLog   // the log sent
		reason   string                // "": attested
		cause    string                // in the audit line's error
	}{
		{"both banks replay", sha1sha256, boots(on), 0, on, "", ""},
		{"the OS extended SHA-1 itself", sha1sha256, boots(on), crypto.SHA1, on, attest.ReasonEventLogReplay, `error="the sha1 bank: `},
		{"the OS extended SHA-256 itself", sha1sha256, boots(on), crypto.SHA256, on, attest.ReasonEventLogReplay, `error="the sha256 bank: `},
		{"the firmware extended SHA-1 with another boot", sha1sha256, boots(on256, off1), 0, on, attest.ReasonEventLogReplay, `error="the sha1 bank: `},
		{"the firmware extended SHA-256 with another boot", sha1sha256, boots(on1, off256), 0, on, attest.ReasonEventLogReplay, `error="the sha256 bank: `},
		// The finding: firmware that extends SHA-1 alone leaves SHA-256 to
		// the OS, which replays a Secure Boot history of its own into it
		// and sends a log of that bank alone, or of both.
		{"the OS filled SHA-256 and sends its log", sha1sha256, boots(off1, on256), 0, on256, notBanks, ""},
		{"the OS filled SHA-256 and sends a log of both banks", sha1sha256, boots(off1, on256), 0, on, attest.ReasonEventLogReplay, `error="the sha1 bank: `},
		{"a log without an active bank", sha1sha256, boots(on), 0, on256, notBanks, ""},
		{"a log of a bank the TPM does not have", []crypto.Hash{crypto.SHA256}, boots(on), 0,
			on, "the TPM's active PCR banks (sha256) are not the event log's (sha1, sha256)", ""},
		{"a TPM without SHA-256", []crypto.Hash{crypto.SHA1}, boots(on), 0, on1, attest.ReasonQuoteSHA256, `error="the quote covers the banks (sha1)"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpm := softTPM(t, &attesttest.SoftConfig{RSAEK: rsaKey(t, 0), Banks: tc.banks})
			for _, boot := range tc.measured {
				tpm.Measure(boot)
			}
			if tc.osBank != 0 { // a digest of the OS's own, into that bank alone
				d := tc.osBank.New()
				d.Write([]byte("the OS's own measurement"))
				if err := tpm.ExtendBank(tc.osBank, 7, d.Sum(nil)); err != nil {
					t.Fatal(err)
				}
			}
			f := newFleetFor(t, nil, tpm)
			res, console, err := f.runLog(t, tpm, "S1", tc.log.Bytes())
			if tc.reason == "" {
				if err != nil || res.Verdict != attest.Attested {
					t.Fatalf("Run: %+v %v\n%s", res, err, console)
				}
				if b := f.hook.calls()[0].Boot; b == nil || b.SecureBoot != attest.SecureBootOn {
					t.Fatalf("boot %+v, want Secure Boot on", b)
				}
				return
			}
			checkQuoteRefused(t, f, res, console, err, tc.reason)
			if line := f.logs.Lines("attest.verdict"); len(line) != 1 || !strings.Contains(line[0], tc.cause) {
				t.Errorf("attest.verdict %q, want %q", line, tc.cause)
			}
		})
	}
}

// A quote is over PCRs 0-7 of every bank: a client that asks its TPM for
// a quote of other PCRs, or of fewer banks (hiding one that is active),
// is refused, though the TPM signed what it was asked.
func TestQuoteSelectionRefused(t *testing.T) {
	on, _, _ := secureBootLogs(t, crypto.SHA1, crypto.SHA256)
	four := attesttest.Banks()
	pcrs07 := []uint{0, 1, 2, 3, 4, 5, 6, 7}
	for _, tc := range []struct {
		name   string
		sel    tpm2.TPMLPCRSelection
		reason string // "": attested
	}{
		{"the four banks", attesttest.Selection(four, pcrs07...), ""},
		{"the four banks, SHA-256 first", attesttest.Selection([]crypto.Hash{crypto.SHA256, crypto.SHA1, crypto.SHA384, crypto.SHA512}, pcrs07...), ""},
		{"PCRs 0-6", attesttest.Selection(four, 0, 1, 2, 3, 4, 5, 6), attest.ReasonQuotePCRs},
		{"PCRs 0-8", attesttest.Selection(four, 0, 1, 2, 3, 4, 5, 6, 7, 8), attest.ReasonQuotePCRs},
		{"SHA-256 alone", attesttest.Selection([]crypto.Hash{crypto.SHA256}, pcrs07...), attest.ReasonQuotePCRs},
		{"SHA-1 left out", attesttest.Selection([]crypto.Hash{crypto.SHA256, crypto.SHA384, crypto.SHA512}, pcrs07...), attest.ReasonQuotePCRs},
		{"SHA-256 twice", attesttest.Selection([]crypto.Hash{crypto.SHA1, crypto.SHA256, crypto.SHA256, crypto.SHA512}, pcrs07...), attest.ReasonQuotePCRs},
		// A TPM that implements SHA-1 and SHA-256 alone (most hardware
		// TPMs) lists those two.
		{"SHA-1 and SHA-256, a TPM that implements no other", attesttest.Selection([]crypto.Hash{crypto.SHA1, crypto.SHA256}, pcrs07...), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpm := softTPM(t, &attesttest.SoftConfig{RSAEK: rsaKey(t, 0), Banks: []crypto.Hash{crypto.SHA1, crypto.SHA256}})
			tpm.Measure(on)
			f := newFleetFor(t, nil, tpm)
			ch := f.challenge(t, tpm, "S1")
			p := activate(t, tpm, ch)
			q, err := tpm.QuoteSelection(attest.QuoteNonce(ch.Session), tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			// Each bank once, as a client sends them.
			q.Banks = slices.CompactFunc(q.Banks, func(a, b attest.PCRBank) bool { return a.Hash == b.Hash })
			p.Quote = wireQuoteOf(q, on.Bytes())
			status, r := f.prove(t, p)
			if tc.reason == "" {
				if status != http.StatusOK || r.Verdict != "attested" {
					t.Fatalf("proof: %d %+v, want attested", status, r)
				}
				return
			}
			if status != http.StatusForbidden || r.Error != tc.reason {
				t.Fatalf("proof: %d %+v, want 403 %q", status, r, tc.reason)
			}
		})
	}
}
