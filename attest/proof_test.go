package attest

import (
	"bytes"
	"crypto"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestVerifyProof(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rsaHash, eccHash := strings.Repeat("a", 64), strings.Repeat("b", 64)
	both := &session{expires: now.Add(time.Minute), serial: "S1"}
	both.hash[RSA2048], both.hash[ECCP256] = rsaHash, eccHash
	both.secret[RSA2048][0], both.secret[ECCP256][0] = 1, 2
	rsaOnly := &session{expires: now.Add(time.Minute), serial: "S1"}
	rsaOnly.hash[RSA2048], rsaOnly.secret[RSA2048][0] = rsaHash, 1

	secret := func(first byte) []byte {
		b := make([]byte, secretLen)
		b[0] = first
		return b
	}
	const (
		refused = "the proof's secrets are not the session's"
		expired = "the session expired"
	)
	tests := []struct {
		name    string
		ss      *session
		secrets map[KeyKind][]byte
		now     time.Time
		want    Proven
		status  int
		reason  string
	}{
		{"both EKs", both, map[KeyKind][]byte{RSA2048: secret(1), ECCP256: secret(2)}, now,
			Proven{RSA2048: rsaHash, ECCP256: eccHash}, 0, ""},
		{"one EK", rsaOnly, map[KeyKind][]byte{RSA2048: secret(1)}, now, Proven{RSA2048: rsaHash}, 0, ""},
		{"a second before it expires", rsaOnly, map[KeyKind][]byte{RSA2048: secret(1)}, now.Add(time.Minute - time.Second),
			Proven{RSA2048: rsaHash}, 0, ""},
		{"as it expires", rsaOnly, map[KeyKind][]byte{RSA2048: secret(1)}, now.Add(time.Minute), Proven{}, http.StatusGone, expired},
		{"expired, secrets wrong", rsaOnly, nil, now.Add(time.Hour), Proven{}, http.StatusGone, expired},
		{"one secret wrong", both, map[KeyKind][]byte{RSA2048: secret(1), ECCP256: secret(3)}, now, Proven{}, http.StatusForbidden, refused},
		{"secrets swapped", both, map[KeyKind][]byte{RSA2048: secret(2), ECCP256: secret(1)}, now, Proven{}, http.StatusForbidden, refused},
		{"one missing", both, map[KeyKind][]byte{RSA2048: secret(1)}, now, Proven{}, http.StatusForbidden, refused},
		{"none", both, nil, now, Proven{}, http.StatusForbidden, refused},
		{"one the session did not ask", rsaOnly, map[KeyKind][]byte{RSA2048: secret(1), ECCP256: secret(0)}, now, Proven{}, http.StatusForbidden, refused},
		{"a short secret", rsaOnly, map[KeyKind][]byte{RSA2048: secret(1)[:secretLen-1]}, now, Proven{}, http.StatusForbidden, refused},
	}
	for _, tt := range tests {
		got, ref := verifyProof(tt.ss, &proof{secrets: tt.secrets}, tt.now)
		status, reason := 0, ""
		if ref != nil {
			status, reason = ref.status, ref.reason
			if ref.final {
				t.Errorf("%s: a final refusal", tt.name)
			}
		}
		if got != tt.want || status != tt.status || reason != tt.reason {
			t.Errorf("%s: verifyProof = %+v, %d %q; want %+v, %d %q", tt.name, got, status, reason, tt.want, tt.status, tt.reason)
		}
	}
}

func TestVerifyBoot(t *testing.T) {
	ak := eccAK(t, crypto.SHA256)
	sealed := []byte("the sealed session")
	banks := randomBanks(crypto.SHA1, crypto.SHA256, crypto.SHA384, crypto.SHA512)
	good := ak.quote(QuoteNonce(sealed), quotedSelection(nil), banks, ak.hash)
	tests := []struct {
		name    string
		akPub   []byte
		quote   *quoteMsg
		boot    bool // a BootState
		unknown string
		status  int
		reason  string
		final   bool
	}{
		{name: "no quote", akPub: ak.public},
		{name: "no quote, no AK"},
		{name: "a quote", akPub: ak.public, quote: good, boot: true, unknown: "the machine sent no event log"},
		{name: "a quote, a session without its AK", quote: good,
			status: http.StatusForbidden, reason: "the session names no AK to check the quote with"},
		{name: "an AK that does not parse", akPub: []byte{1, 2, 3}, quote: good,
			status: http.StatusForbidden, reason: ReasonQuoteSigner, final: true},
		{name: "another AK", akPub: eccAK(t, crypto.SHA256).public, quote: good,
			status: http.StatusForbidden, reason: ReasonQuoteSigner, final: true},
		{name: "another session's quote", akPub: ak.public, quote: ak.quote(QuoteNonce([]byte("another")), quotedSelection(nil), banks, ak.hash),
			status: http.StatusForbidden, reason: ReasonQuoteNonce, final: true},
	}
	for _, tt := range tests {
		boot, ref := verifyBoot(&session{akPublic: tt.akPub}, &proof{session: sealed, quote: tt.quote})
		status, reason, final := 0, "", false
		if ref != nil {
			status, reason, final = ref.status, ref.reason, ref.final
		}
		if (boot != nil) != tt.boot || status != tt.status || reason != tt.reason || final != tt.final {
			t.Errorf("%s: verifyBoot = %v, %d %q final %t; want a boot state %t, %d %q final %t",
				tt.name, boot, status, reason, final, tt.boot, tt.status, tt.reason, tt.final)
			continue
		}
		if boot == nil {
			continue
		}
		if boot.SecureBoot != SecureBootUnknown || boot.Unknown != tt.unknown || !bytes.Equal(boot.PCRs[7], banks[1].PCRs[7]) {
			t.Errorf("%s: boot state %v %q, PCR 7 %x; want unknown %q, PCR 7 %x", tt.name, boot.SecureBoot, boot.Unknown, boot.PCRs[7], tt.unknown, banks[1].PCRs[7])
		}
	}
}

func TestVerdictAttrs(t *testing.T) {
	rsaHash, eccHash, other := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	approved := Binding{Found: true, Authored: true, RSA2048: rsaHash, ECCP256: eccHash}
	on := &BootState{SecureBoot: SecureBootOn}
	on.PCRs[7] = []byte{0xab, 0xcd}
	unknown := &BootState{SecureBoot: SecureBootUnknown, Unknown: "the machine sent no event log"}
	tests := []struct {
		name     string
		c        Claim
		approved Binding
		level    slog.Level
		want     string
	}{
		{"attested, unquoted", Claim{Serial: "S1", Peer: "10.0.0.5:4000", RSA2048: rsaHash, ECCP256: eccHash}, approved, slog.LevelInfo,
			"serial=S1 verdict=attested reason=install code issued peer=10.0.0.5:4000 ek_rsa2048=" + rsaHash + " ek_eccp256=" + eccHash + " secure_boot=unquoted"},
		{"attested, Secure Boot on", Claim{Serial: "S1", Peer: "p", ECCP256: eccHash, Boot: on}, Binding{Found: true, Authored: true, ECCP256: eccHash}, slog.LevelInfo,
			"serial=S1 verdict=attested reason=install code issued peer=p ek_eccp256=" + eccHash + " secure_boot=on pcr7=abcd"},
		{"attested, Secure Boot unknown", Claim{Serial: "S1", Peer: "p", RSA2048: rsaHash, Boot: unknown}, Binding{Found: true, Authored: true, RSA2048: rsaHash}, slog.LevelInfo,
			"serial=S1 verdict=attested reason=install code issued peer=p ek_rsa2048=" + rsaHash + " secure_boot=unknown pcr7= secure_boot_unknown=the machine sent no event log"},
		{"ek-hash-mismatch", Claim{Serial: "S1", Peer: "p", RSA2048: other, ECCP256: eccHash}, approved, slog.LevelWarn,
			"serial=S1 verdict=ek-hash-mismatch reason=the TPM's RSA-2048 EK is not the one the entry approves refused_ek_hash=" + other + " peer=p ek_rsa2048=" + other + " ek_eccp256=" + eccHash + " secure_boot=unquoted"},
		{"ek-missing, ECC", Claim{Serial: "S1", Peer: "p", RSA2048: rsaHash}, approved, slog.LevelWarn,
			"serial=S1 verdict=ek-missing reason=the entry approves an ECC P-256 EK the TPM did not present missing_ek_eccp256=" + eccHash + " peer=p ek_rsa2048=" + rsaHash + " secure_boot=unquoted"},
		{"ek-missing, RSA", Claim{Serial: "S1", Peer: "p", ECCP256: eccHash}, approved, slog.LevelWarn,
			"serial=S1 verdict=ek-missing reason=the entry approves an RSA-2048 EK the TPM did not present missing_ek_rsa2048=" + rsaHash + " peer=p ek_eccp256=" + eccHash + " secure_boot=unquoted"},
		{"ek-missing, both", Claim{Serial: "S1", Peer: "p"}, approved, slog.LevelWarn,
			"serial=S1 verdict=ek-missing reason=the entry approves an RSA-2048 EK the TPM did not present missing_ek_rsa2048=" + rsaHash + " missing_ek_eccp256=" + eccHash + " peer=p secure_boot=unquoted"},
		{"pending-approval", Claim{Serial: "S2", Peer: "p", RSA2048: rsaHash}, Binding{}, slog.LevelInfo,
			"serial=S2 verdict=pending-approval reason=no entry names the serial peer=p ek_rsa2048=" + rsaHash + " secure_boot=unquoted"},
		{"ek-binding-unauthored", Claim{Serial: "S1", Peer: "p", RSA2048: rsaHash}, Binding{Found: true, RSA2048: rsaHash}, slog.LevelWarn,
			"serial=S1 verdict=ek-binding-unauthored reason=the changelog does not show the binding author writing the binding peer=p ek_rsa2048=" + rsaHash + " secure_boot=unquoted"},
	}
	for _, tt := range tests {
		j := Judge(tt.approved, Proven{RSA2048: tt.c.RSA2048, ECCP256: tt.c.ECCP256})
		res := resultMsg{Verdict: j.Verdict.String(), Reason: j.Reason}
		if j.Verdict == Attested {
			res.Reason, res.InstallCode = "install code issued", "the code"
		}
		var got []string
		for _, a := range verdictAttrs(tt.c, j, res, tt.approved) {
			got = append(got, a.String())
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("%s: verdictAttrs:\n got %s\nwant %s", tt.name, g, tt.want)
		}
		if strings.Contains(strings.Join(got, " "), "the code") {
			t.Errorf("%s: the audit line carries the install code", tt.name)
		}
		if l := verdictLevel(j.Verdict); l != tt.level {
			t.Errorf("%s: verdictLevel(%s) = %s, want %s", tt.name, j.Verdict, l, tt.level)
		}
	}
}
