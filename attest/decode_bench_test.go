package attest

import (
	"encoding/json"
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
