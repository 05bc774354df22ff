package attest

import (
	"bytes"
	"crypto"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestSplitProof(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		log    string
		reason string
	}{
		{name: "no quote", data: `{"session":"AQ==","secrets":[]}`},
		{name: "blanks after it", data: "{\"session\":\"AQ==\"} \r\n\t"},
		{name: "a quote without a log", data: `{"quote":{"quote":"AQ=="}}`},
		{name: "a log", data: `{"quote":{"event_log_bytes":3}}abc`, log: "abc"},
		{name: "a log that begins with blanks", data: `{"quote":{"event_log_bytes":3}}  a`, log: "  a"},
		{name: "not JSON", data: `{"session":`, reason: "not a JSON message: "},
		{name: "data after it", data: `{"session":"AQ=="}x`, reason: "not a JSON message: data after the proof"},
		{name: "a second message", data: `{}{}`, reason: "not a JSON message: data after the proof"},
		{name: "a short log", data: `{"quote":{"event_log_bytes":4}}abc`, reason: "the event log has 3 bytes after the proof, want 4"},
		{name: "a long log", data: `{"quote":{"event_log_bytes":2}}abc`, reason: "the event log has 3 bytes after the proof, want 2"},
		{name: "a negative log", data: `{"quote":{"event_log_bytes":-1}}`, reason: "the event log has -1 bytes, over "},
		{name: "a log over the limit", data: `{"quote":{"event_log_bytes":1073741824}}`, reason: "the event log has 1073741824 bytes, over "},
		{name: "a log a byte over the limit", data: `{"quote":{"event_log_bytes":` + strconv.Itoa(MaxEventLog+1) + `}}`, reason: "the event log has 524289 bytes, over "},
	}
	for _, tt := range tests {
		m, err := splitProof([]byte(tt.data))
		if tt.reason != "" {
			if !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("%s: splitProof = %v; want %q", tt.name, err, tt.reason)
			}
			continue
		}
		var log []byte
		if m.Quote != nil {
			log = m.Quote.EventLog
		}
		if err != nil || string(log) != tt.log {
			t.Errorf("%s: splitProof = log %q, %v; want %q", tt.name, log, err, tt.log)
		}
	}
}

func TestCheckSecrets(t *testing.T) {
	s32 := bytes.Repeat([]byte{1}, secretLen)
	tests := []struct {
		name   string
		ss     []secretEnt
		kinds  []KeyKind
		reason string
	}{
		{name: "one", ss: []secretEnt{{Kind: "rsa2048", Secret: s32}}, kinds: []KeyKind{RSA2048}},
		{name: "two", ss: []secretEnt{{Kind: "eccp256", Secret: s32}, {Kind: "rsa2048", Secret: s32}}, kinds: []KeyKind{RSA2048, ECCP256}},
		{name: "none", reason: "a proof carries one or two secrets, not 0"},
		{name: "three", ss: []secretEnt{{Kind: "rsa2048", Secret: s32}, {Kind: "eccp256", Secret: s32}, {Kind: "rsa2048", Secret: s32}}, reason: "not 3"},
		{name: "two of a kind", ss: []secretEnt{{Kind: "rsa2048", Secret: s32}, {Kind: "rsa2048", Secret: s32}}, reason: "two rsa2048 secrets"},
		{name: "an unknown kind", ss: []secretEnt{{Kind: "dsa", Secret: s32}}, reason: "dsa"},
		{name: "short", ss: []secretEnt{{Kind: "eccp256", Secret: s32[1:]}}, reason: "the eccp256 secret has 31 bytes, want 32"},
		{name: "long", ss: []secretEnt{{Kind: "eccp256", Secret: append(s32, 0)}}, reason: "the eccp256 secret has 33 bytes, want 32"},
	}
	for _, tt := range tests {
		got, err := checkSecrets(tt.ss)
		if tt.reason != "" {
			if !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), tt.reason) || got != nil {
				t.Errorf("%s: checkSecrets = %v, %v; want %q", tt.name, got, err, tt.reason)
			}
			continue
		}
		if err != nil || len(got) != len(tt.kinds) {
			t.Errorf("%s: checkSecrets = %v, %v; want %v", tt.name, got, err, tt.kinds)
		}
		for _, k := range tt.kinds {
			if !bytes.Equal(got[k], s32) {
				t.Errorf("%s: no %s secret", tt.name, k)
			}
		}
	}
}

func TestCheckQuoteMsg(t *testing.T) {
	bank := func(alg string, size, n int) bankMsg {
		b := bankMsg{Alg: alg}
		for range n {
			b.PCRs = append(b.PCRs, make([]byte, size))
		}
		return b
	}
	sha1, sha256 := bank("sha1", 20, QuotedPCRs), bank("sha256", 32, QuotedPCRs)
	short := bank("sha256", 32, QuotedPCRs)
	short.PCRs[5] = short.PCRs[5][:31]
	sha1Value := bank("sha256", 32, QuotedPCRs)
	sha1Value.PCRs[3] = make([]byte, 20)
	q := func(banks ...bankMsg) *quoteMsg {
		return &quoteMsg{Quote: []byte{1}, Signature: []byte{2}, Banks: banks}
	}
	tests := []struct {
		name   string
		q      *quoteMsg
		reason string
	}{
		{name: "one bank", q: q(sha256)},
		{name: "four banks", q: q(sha1, sha256, bank("sha384", 48, QuotedPCRs), bank("sha512", 64, QuotedPCRs))},
		{name: "no quote", q: &quoteMsg{Signature: []byte{2}, Banks: []bankMsg{sha256}}, reason: "the quote has 0 bytes"},
		{name: "a long quote", q: &quoteMsg{Quote: make([]byte, maxQuote+1), Signature: []byte{2}, Banks: []bankMsg{sha256}}, reason: "the quote has 1025 bytes"},
		{name: "no signature", q: &quoteMsg{Quote: []byte{1}, Banks: []bankMsg{sha256}}, reason: "the quote's signature has 0 bytes"},
		{name: "no bank", q: q(), reason: "the quote carries 0 PCR banks, want 1 to 4"},
		{name: "five banks", q: q(sha1, sha256, sha1, sha256, sha1), reason: "the quote carries 5 PCR banks"},
		{name: "an unknown bank", q: q(bank("md5", 16, QuotedPCRs)), reason: `an unknown PCR bank "md5"`},
		{name: "an unnamed bank", q: q(sha1, bank("", 32, QuotedPCRs)), reason: `an unknown PCR bank ""`},
		{name: "two of a bank", q: q(sha256, sha1, sha256), reason: "two sha256 PCR banks"},
		{name: "seven values", q: q(bank("sha256", 32, QuotedPCRs-1)), reason: "the sha256 bank carries 7 PCR values, want 8"},
		{name: "a short value", q: q(sha1, short), reason: "PCR 5's value in the sha256 bank has 31 bytes, want 32"},
		{name: "a SHA-1 value", q: q(sha1, sha1Value), reason: "PCR 3's value in the sha256 bank has 20 bytes, want 32"},
	}
	for _, tt := range tests {
		err := checkQuoteMsg(tt.q)
		if tt.reason == "" {
			if err != nil {
				t.Errorf("%s: checkQuoteMsg = %v", tt.name, err)
			}
			for _, bk := range tt.q.Banks {
				if h, _ := bankNamed(bk.Alg); bk.hash != h || h == crypto.Hash(0) {
					t.Errorf("%s: the %s bank's hash is %v", tt.name, bk.Alg, bk.hash)
				}
			}
			continue
		}
		if !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("%s: checkQuoteMsg = %v; want %q", tt.name, err, tt.reason)
		}
	}
}

func BenchmarkDecodeClaim(b *testing.B) {
	data := seedClaim(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeClaim(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeProof(b *testing.B) {
	secret := strings.Repeat("A", 43) + "="
	data, _ := json.Marshal(json.RawMessage(`{"session":"` + strings.Repeat("A", 400) + `","secrets":[{"kind":"rsa2048","secret":"` + secret + `"},{"kind":"eccp256","secret":"` + secret + `"}]}`))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeProof(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeProofQuote decodes a proof with a quote of the four PCR
// banks and an event log of logBytes bytes, the size of attesttest.SecureBootLog's and of a
// typical firmware's.
func BenchmarkDecodeProofQuote(b *testing.B) {
	for _, logBytes := range []int{4 << 10, 48 << 10} {
		b.Run(strconv.Itoa(logBytes>>10)+"KiB", func(b *testing.B) {
			m := proofMsg{
				Session: make([]byte, 400),
				Secrets: []secretEnt{{Kind: "rsa2048", Secret: make([]byte, secretLen)}, {Kind: "eccp256", Secret: make([]byte, secretLen)}},
				Quote:   &quoteMsg{Quote: make([]byte, 165), Signature: make([]byte, 72), EventLog: make([]byte, logBytes)},
			}
			for _, b := range knownBanks {
				bank := bankMsg{Alg: b.name}
				for range QuotedPCRs {
					bank.PCRs = append(bank.PCRs, make([]byte, b.hash.Size()))
				}
				m.Quote.Banks = append(m.Quote.Banks, bank)
			}
			data, err := encodeProof(m)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeProof(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeEventLogBase64 decodes an event log of logBytes as a
// base64 string in JSON, as a proof would carry it inside its object: the
// cost that sending the log as raw bytes after the object avoids, for
// BenchmarkDecodeProofQuote to be read against.
func BenchmarkDecodeEventLogBase64(b *testing.B) {
	for _, logBytes := range []int{4 << 10, 48 << 10} {
		b.Run(strconv.Itoa(logBytes>>10)+"KiB", func(b *testing.B) {
			data, err := json.Marshal(struct {
				EventLog []byte `json:"event_log"`
			}{make([]byte, logBytes)})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			var v struct {
				EventLog []byte `json:"event_log"`
			}
			for b.Loop() {
				if err := json.Unmarshal(data, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
