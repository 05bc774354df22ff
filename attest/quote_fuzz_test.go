package attest_test

import (
	"crypto"
	"slices"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	goattest "github.com/google/go-attestation/attest"
)

// FuzzQuoteEventLog decides proofs of fuzzed event logs with quotes that
// verify, as the server does (VerifyProofQuote): the software TPM has the
// log's PCR banks active (the four when the log's are not a set of known
// banks with SHA-256 among them), and its PCRs hold the log's own digests
// in each bank, as go-attestation reads them unverified (Events), so that
// the replay and the Secure Boot state are reached. The server accepts the quote with a boot state that holds
// together, or refuses the log as not replaying or as not of the TPM's
// banks; it never fails otherwise.
func FuzzQuoteEventLog(f *testing.F) {
	k := newBootKeys(f)
	on, off := k.log(f, true), k.log(f, false)
	f.Add(on.Bytes())
	f.Add(off.Bytes())
	on256 := newBootKeys(f).log(f, true, crypto.SHA256)
	f.Add(on256.Bytes())
	f.Add(attesttest.NewBootLog().Bytes())
	f.Add(attesttest.NewBootLog(crypto.SHA1).Bytes())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, log []byte) {
		el, err := goattest.ParseEventLog(log)
		banks := attesttest.Banks()
		if err == nil {
			if b, ok := logBanks(el); ok {
				banks = b
			}
		}
		tpm := attesttest.MakeSoftTPM(t, &attesttest.SoftConfig{NoRSA: true, Banks: banks})
		if err == nil {
			for _, h := range banks {
				alg, _ := goattest.FromCryptoHash(h)
				for _, e := range el.Events(alg) {
					if e.Type != evNoAction && e.Index >= 0 && e.Index < attest.QuotedPCRs && len(e.Digest) == h.Size() {
						if err := tpm.ExtendBank(h, e.Index, e.Digest); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
		boot, reason, err := verifyQuote(t, tpm, log, nil)
		switch {
		case reason == attest.ReasonEventLogReplay:
		case strings.HasPrefix(reason, "the TPM's active PCR banks ("):
		case reason == "" && err == nil:
			checkBoot(t, boot)
		default:
			t.Fatalf("refused with %q: %v", reason, err)
		}
	})
}

// evNoAction is EV_NO_ACTION, an event that extends no PCR.
const evNoAction = 3

// logBanks returns the PCR banks of el's Spec ID event when they are
// known banks, none twice, SHA-256 among them.
func logBanks(el *goattest.EventLog) ([]crypto.Hash, bool) {
	var banks []crypto.Hash
	for _, a := range el.Algs {
		h, ok := map[goattest.HashAlg]crypto.Hash{
			goattest.HashSHA1: crypto.SHA1, goattest.HashSHA256: crypto.SHA256,
			goattest.HashSHA384: crypto.SHA384, goattest.HashSHA512: crypto.SHA512,
		}[a]
		if !ok || slices.Contains(banks, h) {
			return nil, false
		}
		banks = append(banks, h)
	}
	return banks, slices.Contains(banks, crypto.SHA256)
}

// checkBoot checks that a boot state holds together.
func checkBoot(t *testing.T, b *attest.BootState) {
	t.Helper()
	if b == nil {
		t.Fatal("a quote verified without a boot state")
	}
	for i, d := range b.PCRs {
		if len(d) != 32 {
			t.Fatalf("PCR %d has %d bytes", i, len(d))
		}
	}
	switch b.SecureBoot {
	case attest.SecureBootOn:
		if len(b.PK.Certificates)+len(b.PK.Hashes) == 0 || len(b.KEK.Certificates)+len(b.KEK.Hashes) == 0 ||
			len(b.DB.Certificates)+len(b.DB.Hashes) == 0 {
			t.Fatalf("Secure Boot on without keys: %+v", b)
		}
		fallthrough
	case attest.SecureBootOff:
		if b.Unknown != "" {
			t.Fatalf("Secure Boot %v, unknown because %q", b.SecureBoot, b.Unknown)
		}
	case attest.SecureBootUnknown:
		if b.Unknown == "" || len(b.PK.Certificates)+len(b.DB.Certificates)+len(b.BootLoaderAuthority) != 0 {
			t.Fatalf("Secure Boot unknown: %+v", b)
		}
	default:
		t.Fatalf("Secure Boot %v", b.SecureBoot)
	}
}
