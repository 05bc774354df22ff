package attest

import (
	"bytes"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"
)

func seedClaim(t testing.TB) []byte {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(claimMsg{
		Version: 1, Serial: "FLK-0001", MAC: "52:54:00:12:34:56",
		LLDP: &LLDP{ChassisIDSubtype: 4, ChassisID: "74:83:c2:00:00:01", PortIDSubtype: 5, PortID: "Port 7"},
		EKs:  []ekMsg{{Kind: "eccp256", Public: der}},
		AK:   akMsg{Public: []byte{1}, CreateData: []byte{2}, CreateAttestation: []byte{3}, CreateSignature: []byte{4}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzDecodeClaim(f *testing.F) {
	f.Add(seedClaim(f))
	f.Add([]byte(`{"version":1,"serial":"S","mac":"52:54:00:12:34:56","lldp":null,"eks":[],"ak":{}}`))
	f.Add([]byte(`{"version":1,"serial":"S","mac":"52-54-00-12-34-56","eks":[{"kind":"rsa2048","public":"MAA="}]}`))
	f.Add([]byte(`{"version":1,"serial":"S","mac":"52:54:00:AB:CD:EF","eks":[{"kind":"rsa2048","public":"MAA="}]}`))
	f.Add([]byte(`{"version":1,"serial":"S","mac":"02:00:5e:10:00:00:00:01","eks":[{"kind":"rsa2048","public":"MAA="}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"version":1}{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeClaim(data)
		if err != nil {
			if c != nil {
				t.Fatal("a claim and an error")
			}
			return
		}
		if checkSerial(c.serial) != nil {
			t.Fatalf("accepted serial %q", c.serial)
		}
		if m, err := parseMAC(c.mac.String()); err != nil || !bytes.Equal(m, c.mac) {
			t.Fatalf("accepted MAC %q", c.mac)
		}
		if c.lldp != nil && checkLLDP(c.lldp) != nil {
			t.Fatalf("accepted LLDP %+v", c.lldp)
		}
		if len(c.eks) < 1 || len(c.eks) > 2 || len(c.eks) == 2 && c.eks[0].kind == c.eks[1].kind {
			t.Fatalf("accepted EKs %+v", c.eks)
		}
		for _, ek := range c.eks {
			h, err := EKHash(ek.pub)
			if err != nil || h != ek.hash || !ValidHash(h) {
				t.Fatalf("EK hash %q, EKHash %q, %v", ek.hash, h, err)
			}
			if k, err := kindOf(ek.pub); err != nil || k != ek.kind {
				t.Fatalf("EK of kind %s is %v, %v", ek.kind, k, err)
			}
		}
		for _, b := range [][]byte{c.ak.Public, c.ak.CreateData, c.ak.CreateAttestation, c.ak.CreateSignature} {
			if len(b) == 0 || len(b) > maxAKField {
				t.Fatalf("accepted an AK field of %d bytes", len(b))
			}
		}
	})
}

func FuzzDecodeProof(f *testing.F) {
	secret := strings.Repeat("A", 43) + "="
	f.Add([]byte(`{"session":"AAAA","secrets":[{"kind":"rsa2048","secret":"` + secret + `"},{"kind":"eccp256","secret":"` + secret + `"}]}`))
	f.Add([]byte(`{"session":"AAAA","secrets":[{"kind":"rsa2048","secret":"` + secret + `"},{"kind":"rsa2048","secret":"` + secret + `"}]}`))
	f.Add([]byte(`{"session":"","secrets":[]}`))
	f.Add([]byte(`{"session":"AAAA","secrets":[{"kind":"x","secret":"AA=="}]}`))
	f.Add([]byte(`nul`))
	bank := func(alg string, size int) string {
		pcr := `"` + base64.StdEncoding.EncodeToString(make([]byte, size)) + `"`
		return `{"alg":"` + alg + `","pcrs":[` + strings.Repeat(pcr+`,`, 7) + pcr + `]}`
	}
	sha256Bank := `[` + bank("sha256", 32) + `]`
	fourBanks := `[` + bank("sha1", 20) + `,` + sha256Bank[1:len(sha256Bank)-1] + `,` + bank("sha384", 48) + `,` + bank("sha512", 64) + `]`
	f.Add([]byte(`{"session":"AAAA","secrets":[{"kind":"eccp256","secret":"` + secret + `"}],"quote":{"quote":"AAAA","signature":"AAAA","banks":` + sha256Bank + `,"event_log_bytes":4}}` + "\x03\x00\x00\x00"))
	f.Add([]byte(`{"session":"AAAA","secrets":[{"kind":"eccp256","secret":"` + secret + `"}],"quote":{"quote":"AAAA","signature":"AAAA","banks":` + sha256Bank + `,"event_log_bytes":5}}` + "\x03\x00\x00\x00"))
	f.Add([]byte(`{"session":"AAAA","secrets":[{"kind":"eccp256","secret":"` + secret + `"}],"quote":{"quote":"AAAA","signature":"AAAA","banks":` + fourBanks + `}}`))
	f.Add([]byte(`{"session":"AAAA","secrets":[{"kind":"eccp256","secret":"` + secret + `"}],"quote":{"quote":"AAAA","signature":"AAAA","banks":[{"alg":"sha1","pcrs":["AAAA"]}]}}`))
	f.Add([]byte(`{"session":"AAAA","secrets":[{"kind":"eccp256","secret":"` + secret + `"}],"quote":null}`))
	unused := eccAK(f, crypto.SHA256).public // an AK that signed nothing
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodeProof(data)
		if err != nil {
			if p != nil {
				t.Fatal("a proof and an error")
			}
			return
		}
		if len(p.session) == 0 || len(p.session) > maxSession {
			t.Fatalf("accepted a session of %d bytes", len(p.session))
		}
		if len(p.secrets) < 1 || len(p.secrets) > 2 {
			t.Fatalf("accepted %d secrets", len(p.secrets))
		}
		for k, s := range p.secrets {
			if k != RSA2048 && k != ECCP256 || len(s) != secretLen {
				t.Fatalf("accepted a %s secret of %d bytes", k, len(s))
			}
		}
		if q := p.quote; q != nil {
			if len(q.Quote) == 0 || len(q.Quote) > maxQuote || len(q.Signature) == 0 || len(q.Signature) > maxQuoteSig ||
				len(q.EventLog) > MaxEventLog || len(q.Banks) == 0 || len(q.Banks) > maxBanks {
				t.Fatalf("accepted a quote of %d bytes, a signature of %d, a log of %d, %d banks", len(q.Quote), len(q.Signature), len(q.EventLog), len(q.Banks))
			}
			seen := map[crypto.Hash]bool{}
			for _, bk := range q.Banks {
				if h, ok := bankNamed(bk.Alg); !ok || h != bk.hash || seen[h] || len(bk.PCRs) != QuotedPCRs {
					t.Fatalf("accepted a bank %q (%v) of %d PCRs", bk.Alg, bk.hash, len(bk.PCRs))
				}
				seen[bk.hash] = true
				for i, d := range bk.PCRs {
					if len(d) != bk.hash.Size() {
						t.Fatalf("accepted PCR %d of the %s bank of %d bytes", i, bk.Alg, len(d))
					}
				}
			}
			// Whatever decodes is checked without a panic, and is never
			// signed by an AK that made no quote.
			if _, err := verifyQuote(unused, QuoteNonce(p.session), q); err == nil {
				t.Fatal("a fuzzed quote verified")
			}
		}
		// Whatever decodes never opens as a session of another key.
		sl, _ := newSealer(make([]byte, 32))
		if _, err := sl.open(p.session); err == nil {
			t.Fatal("a fuzzed session opened")
		}
	})
}

// The session encoding round-trips, and a sealed session opens only
// unchanged.
func TestSessionRoundTrip(t *testing.T) {
	sl, err := newSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	ss := &session{expires: time.Unix(1_800_000_000, 5), serial: "S1", mac: net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}, lldp: &LLDP{ChassisIDSubtype: 4, ChassisID: "c", PortIDSubtype: 5, PortID: "p", PortDescription: "d", SystemName: "n"},
		binding: Binding{Found: true, Authored: true, RSA2048: "r", ECCP256: "e"}, akPublic: []byte{1, 2, 3}}
	ss.hash[ECCP256] = strings.Repeat("a", 64)
	ss.secret[ECCP256][3] = 9
	rand.Read(ss.id[:])
	blob, err := sl.seal(ss)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sl.open(blob)
	if err != nil {
		t.Fatal(err)
	}
	if got.serial != ss.serial || !bytes.Equal(got.mac, ss.mac) || *got.lldp != *ss.lldp || got.binding != ss.binding || got.hash != ss.hash || got.secret != ss.secret || got.id != ss.id || !got.expires.Equal(ss.expires) || !bytes.Equal(got.akPublic, ss.akPublic) {
		t.Fatalf("round trip: %+v, want %+v", got, ss)
	}
	plain := ss.marshal()
	for i := range plain {
		if _, err := unmarshalSession(plain[:i]); err == nil {
			t.Fatalf("a session cut at %d bytes decodes", i)
		}
	}
}

// The fast paths of parseEK agree with crypto/x509, and other keys take
// the slow path.
func TestParseEK(t *testing.T) {
	e, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	r, _ := rsa.GenerateKey(rand.Reader, 2048)
	r3 := &rsa.PublicKey{N: r.N, E: 3}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for name, pub := range map[string]any{"P-256": &e.PublicKey, "RSA-2048": &r.PublicKey, "RSA-2048 e=3": r3, "P-384": &p384.PublicKey} {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		got, h, err := parseEK(der)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, _ := x509.ParsePKIXPublicKey(der)
		if _, ok := got.(*ecdh.PublicKey); ok {
			want, _ = want.(*ecdsa.PublicKey).ECDH()
		}
		if !got.(interface{ Equal(crypto.PublicKey) bool }).Equal(want) {
			t.Errorf("%s: parseEK gave %v, want %v", name, got, want)
		}
		if h != hashDER(der) {
			t.Errorf("%s: hash %s, want %s", name, h, hashDER(der))
		}
	}
	// A P-256 point not on the curve, in the canonical frame, is refused.
	der, _ := x509.MarshalPKIXPublicKey(&e.PublicKey)
	bad := append([]byte{}, der...)
	bad[len(bad)-1] ^= 1
	if _, _, err := parseEK(bad); err == nil {
		t.Error("a point off the curve parses")
	}
	// An RSA modulus whose top byte is under 0x80 is not canonical after
	// the 0x00: it takes the slow path, where crypto/x509 refuses it.
	rder, _ := x509.MarshalPKIXPublicKey(&r.PublicKey)
	p := spkiPrefixes()
	rbad := append([]byte{}, rder...)
	rbad[len(p.rsa)] = 0x01
	if _, _, err := parseEK(rbad); err == nil {
		t.Error("a non-canonical RSA modulus parses")
	}
	// The fast path hashes the bytes as given, so it relies on the parser
	// refusing another encoding of the same key: here a long-form length.
	long := append([]byte{0x30, 0x81, der[1]}, der[2:]...)
	if _, _, err := parseEK(long); err == nil {
		t.Error("a non-canonical encoding of a P-256 key parses")
	}
}

// A session sealed in format 1, before quotes, still opens: without an AK.
func TestSessionFormat1(t *testing.T) {
	ss := &session{expires: time.Unix(1_800_000_000, 0), serial: "S1", mac: net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}, akPublic: []byte{7}}
	ss.hash[RSA2048] = strings.Repeat("b", 64)
	plain := ss.marshal()
	v1 := append([]byte{1}, plain[1:len(plain)-3]...) // no AK: its 2-byte size and 1 byte
	got, err := unmarshalSession(v1)
	if err != nil {
		t.Fatal(err)
	}
	if got.akPublic != nil || got.serial != "S1" || got.hash != ss.hash {
		t.Fatalf("format 1: %+v", got)
	}
	if _, err := unmarshalSession(append([]byte{3}, plain[1:]...)); err == nil {
		t.Fatal("format 3 decodes")
	}
}
