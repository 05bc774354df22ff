package attest

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

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
