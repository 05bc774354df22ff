//go:build cgo

package attesttest_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	goattest "github.com/google/go-attestation/attest"
	legacy "github.com/google/go-tpm/legacy/tpm2"
	"github.com/google/go-tpm/legacy/tpm2/credactivation"
	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

func goParams(ak attest.AKParameters) goattest.AttestationParameters {
	return goattest.AttestationParameters{Public: ak.Public, CreateData: ak.CreateData, CreateAttestation: ak.CreateAttestation, CreateSignature: ak.CreateSignature}
}

// The software TPM's AK passes go-attestation's checks, and is the same
// kind of key as the one attest.Device makes on the reference TPM.
func TestSoftAKLikeSimulatorAK(t *testing.T) {
	soft := attesttest.MakeSoftTPM(t, &attesttest.SoftConfig{NoRSA: true})
	softAK, _ := soft.AK()
	simAK, err := attesttest.NewSimulatorDevice(t, 0).AK()
	if err != nil {
		t.Fatal(err)
	}
	for name, ak := range map[string]attest.AKParameters{"software": softAK, "simulator's": simAK} {
		p := goattest.ActivationParameters{AK: goParams(ak)}
		if err := p.CheckAKParameters(); err != nil {
			t.Fatalf("go-attestation refuses the %s AK: %v", name, err)
		}
		// A changed attestation is refused.
		ak.CreateAttestation = bytes.Clone(ak.CreateAttestation)
		ak.CreateAttestation[len(ak.CreateAttestation)-1] ^= 1
		p = goattest.ActivationParameters{AK: goParams(ak)}
		if err := p.CheckAKParameters(); err == nil {
			t.Errorf("go-attestation accepts the %s AK with a changed attestation", name)
		}
	}
	if a, b := akKind(t, softAK), akKind(t, simAK); a != b {
		t.Errorf("the software AK %s differs from the simulator's %s", a, b)
	}
}

// akKind is what makes an AK the kind of key it is: its type, name
// algorithm, attributes and ECC parameters.
func akKind(t *testing.T, ak attest.AKParameters) string {
	t.Helper()
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](ak.Public)
	if err != nil {
		t.Fatal(err)
	}
	ecc, err := pub.Parameters.ECCDetail()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("type %d, name algorithm %d, attributes %+v, ECC parameters %x", pub.Type, pub.NameAlg, pub.ObjectAttributes, tpm2.Marshal(ecc))
}

// loadEK imports an EK's private key into the simulator as a restricted
// decryption key, so that the reference TPM and the software
// TPM hold the same EK.
func loadEK(t *testing.T, tpm transport.TPM, priv any) tpm2.AuthHandle {
	t.Helper()
	attrs := tpm2.TPMAObject{UserWithAuth: true, Restricted: true, Decrypt: true, NoDA: true}
	sym := tpm2.TPMTSymDefObject{
		Algorithm: tpm2.TPMAlgAES,
		KeyBits:   tpm2.NewTPMUSymKeyBits(tpm2.TPMAlgAES, tpm2.TPMKeyBits(128)),
		Mode:      tpm2.NewTPMUSymMode(tpm2.TPMAlgAES, tpm2.TPMAlgCFB),
	}
	var pub tpm2.TPMTPublic
	var sens tpm2.TPMTSensitive
	// A restricted decryption key is a parent: it needs a seed.
	seed := tpm2.TPM2BDigest{Buffer: make([]byte, 32)}
	rand.Read(seed.Buffer)
	switch k := priv.(type) {
	case *rsa.PrivateKey:
		pub = tpm2.TPMTPublic{Type: tpm2.TPMAlgRSA, NameAlg: tpm2.TPMAlgSHA256, ObjectAttributes: attrs,
			Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &tpm2.TPMSRSAParms{Symmetric: sym, KeyBits: 2048}),
			Unique:     tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: k.N.Bytes()})}
		sens = tpm2.TPMTSensitive{SensitiveType: tpm2.TPMAlgRSA, SeedValue: seed,
			Sensitive: tpm2.NewTPMUSensitiveComposite(tpm2.TPMAlgRSA, &tpm2.TPM2BPrivateKeyRSA{Buffer: k.Primes[0].Bytes()})}
	case *ecdsa.PrivateKey:
		pub = tpm2.TPMTPublic{Type: tpm2.TPMAlgECC, NameAlg: tpm2.TPMAlgSHA256, ObjectAttributes: attrs,
			Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{Symmetric: sym, CurveID: tpm2.TPMECCNistP256}),
			Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
				X: tpm2.TPM2BECCParameter{Buffer: k.X.FillBytes(make([]byte, 32))},
				Y: tpm2.TPM2BECCParameter{Buffer: k.Y.FillBytes(make([]byte, 32))}})}
		sens = tpm2.TPMTSensitive{SensitiveType: tpm2.TPMAlgECC, SeedValue: seed,
			Sensitive: tpm2.NewTPMUSensitiveComposite(tpm2.TPMAlgECC, &tpm2.TPM2BECCParameter{Buffer: mustBytes(k.Bytes())})}
	}
	// Import it in the clear under a storage key, then load it.
	srk, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHOwner, InPublic: tpm2.New2B(tpm2.ECCSRKTemplate)}.Execute(tpm)
	if err != nil {
		t.Fatalf("CreatePrimary SRK: %v", err)
	}
	defer tpm2.FlushContext{FlushHandle: srk.ObjectHandle}.Execute(tpm)
	parent := tpm2.AuthHandle{Handle: srk.ObjectHandle, Name: srk.Name, Auth: tpm2.PasswordAuth(nil)}
	imp, err := tpm2.Import{
		ParentHandle: parent,
		ObjectPublic: tpm2.New2B(pub),
		Duplicate:    tpm2.TPM2BPrivate{Buffer: tpm2.Marshal(tpm2.TPM2BPrivate{Buffer: tpm2.Marshal(sens)})},
	}.Execute(tpm)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	rsp, err := tpm2.Load{ParentHandle: parent, InPrivate: imp.OutPrivate, InPublic: tpm2.New2B(pub)}.Execute(tpm)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { tpm2.FlushContext{FlushHandle: rsp.ObjectHandle}.Execute(tpm) })
	return tpm2.AuthHandle{Handle: rsp.ObjectHandle, Name: rsp.Name, Auth: tpm2.PasswordAuth(nil)}
}

// The same challenge, made by the server's code (go-tpm's credactivation,
// as go-attestation's Generate uses it), opens to the same secret in the
// reference TPM and in the software TPM holding the same EK; both refuse it
// changed, and both refuse it under another AK's name.
func TestSameChallengeMathAsSimulator(t *testing.T) {
	rsaEK, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	eccEK, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	soft := attesttest.MakeSoftTPM(t, &attesttest.SoftConfig{RSAEK: rsaEK, ECCEK: eccEK})
	tpm := transport.FromReadWriter(attesttest.StartSimulator(t, 0))

	// An object in the simulator for the challenge to name: its AK.
	ak, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHOwner, InPublic: tpm2.New2B(tpm2.ECCSRKTemplate)}.Execute(tpm)
	if err != nil {
		t.Fatal(err)
	}
	defer tpm2.FlushContext{FlushHandle: ak.ObjectHandle}.Execute(tpm)
	name := ak.Name.Buffer
	digest := &legacy.HashValue{Alg: legacy.AlgSHA256, Value: name[2:]}

	for _, tc := range []struct {
		kind attest.KeyKind
		priv any
		pub  any
	}{
		{attest.RSA2048, rsaEK, &rsaEK.PublicKey},
		{attest.ECCP256, eccEK, &eccEK.PublicKey},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			ek := loadEK(t, tpm, tc.priv)
			activateSim := func(cred, secret []byte) ([]byte, error) {
				rsp, err := tpm2.ActivateCredential{
					ActivateHandle: tpm2.AuthHandle{Handle: ak.ObjectHandle, Name: ak.Name, Auth: tpm2.PasswordAuth(nil)},
					KeyHandle:      ek,
					CredentialBlob: tpm2.TPM2BIDObject{Buffer: cred[2:]},
					Secret:         tpm2.TPM2BEncryptedSecret{Buffer: secret[2:]},
				}.Execute(tpm)
				if err != nil {
					return nil, err
				}
				return rsp.CertInfo.Buffer, nil
			}
			for i := 0; i < 3; i++ {
				want := make([]byte, 32)
				rand.Read(want)
				cred, secret, err := credactivation.Generate(digest, tc.pub, 16, want)
				if err != nil {
					t.Fatal(err)
				}
				got, err := activateSim(cred, secret)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("the simulator opened %x, %v; want %x", got, err, want)
				}
				got, err = soft.ActivateWith(name, attest.Challenge{Kind: tc.kind, Credential: cred, Secret: secret})
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("the software TPM opened %x, %v; want %x", got, err, want)
				}
				// Changed: both refuse.
				bad := bytes.Clone(cred)
				bad[len(bad)-1] ^= 1
				if _, err := activateSim(bad, secret); err == nil {
					t.Error("the simulator opened a changed credential")
				}
				if _, err := soft.ActivateWith(name, attest.Challenge{Kind: tc.kind, Credential: bad, Secret: secret}); !errors.Is(err, attesttest.ErrIntegrity) {
					t.Errorf("the software TPM opened a changed credential: %v", err)
				}
				// Under another AK's name: the software TPM refuses, as the
				// TPM refuses a credential for another object.
				if _, err := soft.ActivateCredential(attest.Challenge{Kind: tc.kind, Credential: cred, Secret: secret}); !errors.Is(err, attesttest.ErrIntegrity) {
					t.Errorf("the software TPM opened a challenge for another AK: %v", err)
				}
			}
			// The reference TPM's own TPM2_MakeCredential, for the software
			// TPM's EK and AK, opens in the software TPM.
			want := []byte("made by the reference TPM")
			mc, err := tpm2.MakeCredential{
				Handle:     ek.Handle,
				Credential: tpm2.TPM2BDigest{Buffer: want},
				ObjectName: tpm2.TPM2BName{Buffer: soft.AKName()},
			}.Execute(tpm)
			if err != nil {
				t.Fatalf("MakeCredential: %v", err)
			}
			got, err := soft.ActivateCredential(attest.Challenge{Kind: tc.kind, Credential: tpm2.Marshal(mc.CredentialBlob), Secret: tpm2.Marshal(mc.Secret)})
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("the software TPM opened %q, %v", got, err)
			}
		})
	}
}

// mustBytes returns b, and panics on err: for keys a test has just made.
func mustBytes(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// The software TPM quotes as the reference TPM does: with the same banks
// active and the same boot measured, every selection a client may ask for
// comes back narrowed to the active banks alike, with the same PCR
// digest; and ExtendInto refuses a TPM whose active banks are not the
// log's.
func TestQuoteLikeSimulator(t *testing.T) {
	sha1sha256 := []crypto.Hash{crypto.SHA1, crypto.SHA256}
	pcrs07 := []uint{0, 1, 2, 3, 4, 5, 6, 7}
	for _, banks := range [][]crypto.Hash{attesttest.Banks(), sha1sha256, {crypto.SHA256}} {
		t.Run(fmt.Sprint(banks), func(t *testing.T) {
			boot, err := attesttest.SecureBootLog(&attesttest.SecureBootConfig{Enabled: true, Banks: banks})
			if err != nil {
				t.Fatal(err)
			}
			soft := attesttest.MakeSoftTPM(t, &attesttest.SoftConfig{NoRSA: true, Banks: banks})
			soft.Measure(boot)
			sim := attesttest.StartSimulator(t, 0)
			if err := sim.AllocateBanks(banks...); err != nil {
				t.Fatal(err)
			}
			tpm := attesttest.Channel(sim)
			if len(banks) != 4 {
				four := attesttest.NewBootLog()
				four.Add(0, attesttest.EvSeparator, []byte{0, 0, 0, 0})
				if err := four.ExtendInto(tpm); err == nil {
					t.Fatal("a log of the four banks extended into a TPM of fewer")
				}
			}
			if err := boot.ExtendInto(tpm); err != nil {
				t.Fatal(err)
			}
			ak, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHEndorsement, InPublic: tpm2.New2B(attest.AKTemplate())}.Execute(tpm)
			if err != nil {
				t.Fatal(err)
			}
			defer tpm2.FlushContext{FlushHandle: ak.ObjectHandle}.Execute(tpm)
			for name, sel := range map[string]tpm2.TPMLPCRSelection{
				"the four banks":                  attesttest.Selection(attesttest.Banks(), pcrs07...),
				"the four banks, SHA-512 first":   attesttest.Selection([]crypto.Hash{crypto.SHA512, crypto.SHA1, crypto.SHA256, crypto.SHA384}, pcrs07...),
				"PCRs 0-6 and 8":                  attesttest.Selection(attesttest.Banks(), 0, 1, 2, 3, 4, 5, 6, 8),
				"SHA-256 and SHA-384, PCRs 0-7":   attesttest.Selection([]crypto.Hash{crypto.SHA256, crypto.SHA384}, pcrs07...),
				"SHA-1 alone, PCRs 4 and 7":       attesttest.Selection([]crypto.Hash{crypto.SHA1}, 4, 7),
				"the four banks, PCRs 0-7 and 23": attesttest.Selection(attesttest.Banks(), 0, 1, 2, 3, 4, 5, 6, 7, 23),
				"the four banks, PCR 16 alone":    attesttest.Selection(attesttest.Banks(), 16),
				"the four banks, PCRs 1, 3 and 5": attesttest.Selection(attesttest.Banks(), 1, 3, 5),
			} {
				nonce := []byte("nonce " + name)
				rsp, err := tpm2.Quote{
					SignHandle:     tpm2.AuthHandle{Handle: ak.ObjectHandle, Name: ak.Name, Auth: tpm2.PasswordAuth(nil)},
					QualifyingData: tpm2.TPM2BData{Buffer: nonce},
					InScheme:       tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
					PCRSelect:      sel,
				}.Execute(tpm)
				if err != nil {
					t.Fatalf("%s: the simulator's quote: %v", name, err)
				}
				want := quoteInfo(t, rsp.Quoted.Bytes())
				q, err := soft.QuoteSelection(nonce, sel)
				if err != nil {
					t.Fatalf("%s: the software TPM's quote: %v", name, err)
				}
				got := quoteInfo(t, q.Quote)
				if !bytes.Equal(tpm2.Marshal(got.PCRSelect), tpm2.Marshal(want.PCRSelect)) {
					t.Errorf("%s: the software TPM quotes the selection %+v, the simulator %+v", name, got.PCRSelect, want.PCRSelect)
				}
				if !bytes.Equal(got.PCRDigest.Buffer, want.PCRDigest.Buffer) {
					t.Errorf("%s: the software TPM's PCR digest %x, the simulator's %x", name, got.PCRDigest.Buffer, want.PCRDigest.Buffer)
				}
			}
			// The values the software TPM reports are the simulator's.
			for _, h := range banks {
				read, err := tpm2.PCRRead{PCRSelectionIn: attesttest.Selection([]crypto.Hash{h}, pcrs07...)}.Execute(tpm)
				if err != nil {
					t.Fatal(err)
				}
				softPCRs := soft.BankPCRs(h)
				for i, d := range read.PCRValues.Digests {
					if !bytes.Equal(d.Buffer, softPCRs[i]) || !bytes.Equal(d.Buffer, boot.BankPCRs(h)[i]) {
						t.Errorf("PCR %d of bank %v: the simulator %x, the software TPM %x, the log %x", i, h, d.Buffer, softPCRs[i], boot.BankPCRs(h)[i])
					}
				}
			}
		})
	}
}

// quoteInfo decodes a quote's TPMS_ATTEST.
func quoteInfo(t *testing.T, quote []byte) *tpm2.TPMSQuoteInfo {
	t.Helper()
	att, err := tpm2.Unmarshal[tpm2.TPMSAttest](quote)
	if err != nil {
		t.Fatal(err)
	}
	info, err := att.Attested.Quote()
	if err != nil {
		t.Fatal(err)
	}
	return info
}
