package attesttest

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/google/go-tpm/tpm2"
)

// SoftTPM is a software TPM in pure Go for load tests: it holds an RSA-2048
// EK, an ECC P-256 EK (either may be absent), and an ECC P-256 attestation
// key, and performs credential activation with the TPM's math (RSA-OAEP or
// ECDH with KDFe for the seed, KDFa, the HMAC integrity check, AES-128-CFB),
// refusing a challenge that names another AK as a TPM does. Its AK
// parameters are those a TPM's TPM2_CertifyCreation produces, and pass
// go-attestation's checks. It holds PCRs 0-7 of each of its active PCR
// banks (SoftConfig.Banks), all zero until Measure extends a boot log into
// them or ExtendBank extends one bank, and quotes them with its AK as
// TPM2_Quote does: the selection of the four known banks narrowed to its
// active ones, with a PCR digest over the active banks' values. It is no
// TPM: its keys live in memory, and it proves nothing about a machine.
//
// A SoftTPM implements attest.TPM and attest.Quoter and is safe for
// concurrent use.
type SoftTPM struct {
	rsaEK  *rsa.PrivateKey
	eccEK  *ecdh.PrivateKey
	eccPub *ecdsa.PublicKey
	ak     *ecdsa.PrivateKey
	akName []byte // TPM2B_NAME contents: nameAlg || digest
	akp    attest.AKParameters
	mu     sync.Mutex
	pcrs   map[crypto.Hash]*[quotedPCRs][]byte // PCRs 0-7 of each active bank
}

// SoftConfig chooses a SoftTPM's keys and PCR banks. A nil *SoftConfig
// gives a TPM with both EKs, freshly generated, and the four banks of
// Banks.
type SoftConfig struct {
	// RSAEK is the RSA-2048 EK's private key. Nil: a new key (about 0.1 s
	// of CPU), unless NoRSA.
	RSAEK *rsa.PrivateKey
	// NoRSA leaves the TPM without an RSA EK.
	NoRSA bool
	// ECCEK is the ECC P-256 EK's private key. Nil: a new key, unless
	// NoECC.
	ECCEK *ecdsa.PrivateKey
	// NoECC leaves the TPM without an ECC EK.
	NoECC bool
	// Banks are the active PCR banks, each one of Banks. Nil: all four,
	// as the reference simulator and a swtpm that swtpm_setup did not
	// configure have them.
	Banks []crypto.Hash
}

// NewSoftTPM returns a SoftTPM with the keys and PCR banks cfg chooses.
func NewSoftTPM(cfg *SoftConfig) (*SoftTPM, error) {
	var c SoftConfig
	if cfg != nil {
		c = *cfg
	}
	if c.NoRSA && c.NoECC {
		return nil, errors.New("attesttest: a SoftTPM needs at least one EK")
	}
	banks, err := checkBanks(c.Banks)
	if err != nil {
		return nil, err
	}
	s := &SoftTPM{pcrs: map[crypto.Hash]*[quotedPCRs][]byte{}}
	for _, h := range banks {
		var pcrs [quotedPCRs][]byte
		for i := range pcrs {
			pcrs[i] = make([]byte, h.Size())
		}
		s.pcrs[h] = &pcrs
	}
	if !c.NoRSA {
		s.rsaEK = c.RSAEK
		if s.rsaEK == nil {
			if s.rsaEK, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
				return nil, err
			}
		}
		if s.rsaEK.N.BitLen() != 2048 {
			return nil, errors.New("attesttest: the RSA EK must have 2048 bits")
		}
	}
	if !c.NoECC {
		k := c.ECCEK
		if k == nil {
			if k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
				return nil, err
			}
		}
		if k.Curve != elliptic.P256() {
			return nil, errors.New("attesttest: the ECC EK must be on P-256")
		}
		if s.eccEK, err = k.ECDH(); err != nil {
			return nil, err
		}
		s.eccPub = &k.PublicKey
	}
	if s.ak, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	if err := s.certifyAK(); err != nil {
		return nil, err
	}
	return s, nil
}

// MakeSoftTPM is NewSoftTPM that ends tb when the SoftTPM cannot be made.
func MakeSoftTPM(tb testing.TB, cfg *SoftConfig) *SoftTPM {
	tb.Helper()
	s, err := NewSoftTPM(cfg)
	if err != nil {
		tb.Fatalf("attesttest: make a SoftTPM: %v", err)
	}
	return s
}

// EKs returns the EKs, RSA first; a SoftTPM has no EK certificates.
func (s *SoftTPM) EKs() ([]attest.EK, error) {
	var eks []attest.EK
	if s.rsaEK != nil {
		eks = append(eks, attest.EK{Kind: attest.RSA2048, Public: &s.rsaEK.PublicKey})
	}
	if s.eccEK != nil {
		eks = append(eks, attest.EK{Kind: attest.ECCP256, Public: s.eccPub})
	}
	return eks, nil
}

// AK returns the attestation key's parameters.
func (s *SoftTPM) AK() (attest.AKParameters, error) { return s.akp, nil }

// akPublic is the AK's public area, as a TPM returns it for attest.Device's
// template: the template with the key's point (x, y) as its unique field.
func akPublic(x, y []byte) tpm2.TPMTPublic {
	pub := attest.AKTemplate()
	pub.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
		X: tpm2.TPM2BECCParameter{Buffer: x},
		Y: tpm2.TPM2BECCParameter{Buffer: y},
	})
	return pub
}

// certifyAK builds what TPM2_CreatePrimary and TPM2_CertifyCreation give a
// TPM's client: the AK's public area, its creation data, the creation
// attestation and the AK's signature over it.
func (s *SoftTPM) certifyAK() error {
	x := s.ak.X.FillBytes(make([]byte, 32))
	y := s.ak.Y.FillBytes(make([]byte, 32))
	pub := tpm2.Marshal(akPublic(x, y))
	digest := sha256.Sum256(pub)
	s.akName = append([]byte{0x00, 0x0b}, digest[:]...) // TPM_ALG_SHA256
	parent := binary.BigEndian.AppendUint32(nil, uint32(tpm2.TPMRHEndorsement))
	createData := tpm2.Marshal(tpm2.TPMSCreationData{
		PCRSelect:           tpm2.TPMLPCRSelection{},
		ParentNameAlg:       tpm2.TPMAlgNull,
		ParentName:          tpm2.TPM2BName{Buffer: parent},
		ParentQualifiedName: tpm2.TPM2BName{Buffer: parent},
	})
	creationHash := sha256.Sum256(createData)
	att := tpm2.Marshal(tpm2.TPMSAttest{
		Magic:           tpm2.TPMGeneratedValue,
		Type:            tpm2.TPMSTAttestCreation,
		QualifiedSigner: tpm2.TPM2BName{Buffer: s.akName},
		ClockInfo:       tpm2.TPMSClockInfo{Safe: true},
		Attested: tpm2.NewTPMUAttest(tpm2.TPMSTAttestCreation, &tpm2.TPMSCreationInfo{
			ObjectName:   tpm2.TPM2BName{Buffer: s.akName},
			CreationHash: tpm2.TPM2BDigest{Buffer: creationHash[:]},
		}),
	})
	sig, err := sign(s.ak, att)
	if err != nil {
		return err
	}
	s.akp = attest.AKParameters{Public: pub, CreateData: createData, CreateAttestation: att, CreateSignature: sig}
	return nil
}

// sign is key's ECDSA signature over data's SHA-256, as a TPMT_SIGNATURE.
func sign(key *ecdsa.PrivateKey, data []byte) ([]byte, error) {
	h := sha256.Sum256(data)
	r, s, err := ecdsa.Sign(rand.Reader, key, h[:])
	if err != nil {
		return nil, err
	}
	return tpm2.Marshal(tpm2.TPMTSignature{
		SigAlg: tpm2.TPMAlgECDSA,
		Signature: tpm2.NewTPMUSignature(tpm2.TPMAlgECDSA, &tpm2.TPMSSignatureECC{
			Hash:       tpm2.TPMAlgSHA256,
			SignatureR: tpm2.TPM2BECCParameter{Buffer: r.FillBytes(make([]byte, 32))},
			SignatureS: tpm2.TPM2BECCParameter{Buffer: s.FillBytes(make([]byte, 32))},
		}),
	}), nil
}

// Errors ActivateCredential returns, as a TPM would refuse.
var (
	// ErrNoEK: the challenge is for an EK kind this TPM lacks.
	ErrNoEK = errors.New("attesttest: no EK of the challenge's kind")
	// ErrIntegrity: the challenge's HMAC does not verify, as when it names
	// another AK or was changed (a TPM's TPM_RC_INTEGRITY).
	ErrIntegrity = errors.New("attesttest: the credential's integrity check failed")
	// ErrBadChallenge: the challenge does not decode.
	ErrBadChallenge = errors.New("attesttest: the challenge does not decode")
)

// ActivateCredential decrypts c as TPM2_ActivateCredential does with the
// EK of c.Kind and the AK.
func (s *SoftTPM) ActivateCredential(c attest.Challenge) ([]byte, error) {
	return s.ActivateWith(s.akName, c)
}

// ActivateWith is ActivateCredential as if the challenge were activated
// with an AK of another name (a TPM2B_NAME's contents): a test's way to
// show that a challenge made for one AK does not open with another.
func (s *SoftTPM) ActivateWith(akName []byte, c attest.Challenge) ([]byte, error) {
	cred, err := unsize(c.Credential)
	if err != nil {
		return nil, fmt.Errorf("%w: credential: %w", ErrBadChallenge, err)
	}
	encSecret, err := unsize(c.Secret)
	if err != nil {
		return nil, fmt.Errorf("%w: secret: %w", ErrBadChallenge, err)
	}
	var seed []byte
	switch c.Kind {
	case attest.RSA2048:
		if s.rsaEK == nil {
			return nil, ErrNoEK
		}
		seed, err = rsa.DecryptOAEP(sha256.New(), nil, s.rsaEK, encSecret, []byte("IDENTITY\x00"))
		if err != nil {
			return nil, fmt.Errorf("%w: the seed does not decrypt", ErrBadChallenge)
		}
	case attest.ECCP256:
		if s.eccEK == nil {
			return nil, ErrNoEK
		}
		seed, err = s.eccSeed(encSecret)
		if err != nil {
			return nil, err
		}
	default:
		return nil, ErrNoEK
	}
	return s.unwrap(akName, cred, seed)
}

// AKName returns the AK's name (nameAlg || SHA-256 of its public area).
func (s *SoftTPM) AKName() []byte { return bytes.Clone(s.akName) }

// eccSeed recovers the seed of an ECC challenge: the ephemeral point in the
// encrypted secret, ECDH with the EK, then KDFe.
func (s *SoftTPM) eccSeed(encSecret []byte) ([]byte, error) {
	x, rest, err := take2B(encSecret)
	if err != nil {
		return nil, fmt.Errorf("%w: the ephemeral point: %w", ErrBadChallenge, err)
	}
	y, rest, err := take2B(rest)
	if err != nil || len(rest) != 0 || len(x) > 32 || len(y) > 32 {
		return nil, fmt.Errorf("%w: the ephemeral point", ErrBadChallenge)
	}
	point := make([]byte, 65)
	point[0] = 4
	copy(point[1+32-len(x):33], x)
	copy(point[33+32-len(y):], y)
	eph, err := ecdh.P256().NewPublicKey(point)
	if err != nil {
		return nil, fmt.Errorf("%w: the ephemeral point is not on P-256", ErrBadChallenge)
	}
	z, err := s.eccEK.ECDH(eph)
	if err != nil {
		return nil, fmt.Errorf("%w: ECDH: %w", ErrBadChallenge, err)
	}
	ek, err := s.eccPub.Bytes()
	if err != nil {
		return nil, fmt.Errorf("%w: the ECC EK: %w", ErrBadChallenge, err)
	}
	return tpm2.KDFe(crypto.SHA256, z, "IDENTITY", point[1:33], ek[1:33], 256), nil
}

// unwrap checks the credential's integrity HMAC against the AK's name and
// decrypts the secret inside.
func (s *SoftTPM) unwrap(akName, cred, seed []byte) ([]byte, error) {
	integrity, encIdentity, err := take2B(cred)
	if err != nil {
		return nil, fmt.Errorf("%w: the integrity HMAC: %w", ErrBadChallenge, err)
	}
	macKey := tpm2.KDFa(crypto.SHA256, seed, "INTEGRITY", nil, nil, 256)
	mac := hmac.New(sha256.New, macKey)
	mac.Write(encIdentity)
	mac.Write(akName)
	if !hmac.Equal(mac.Sum(nil), integrity) {
		return nil, ErrIntegrity
	}
	symKey := tpm2.KDFa(crypto.SHA256, seed, "STORAGE", akName, nil, 128)
	block, err := aes.NewCipher(symKey)
	if err != nil {
		return nil, err
	}
	plain := make([]byte, len(encIdentity))
	//lint:ignore SA1019 TPM 2.0 Part 1 §24 encrypts a credential with AES-CFB; the HMAC beside it is its integrity
	cipher.NewCFBDecrypter(block, make([]byte, aes.BlockSize)).XORKeyStream(plain, encIdentity)
	secret, rest, err := take2B(plain)
	if err != nil || len(rest) != 0 {
		return nil, fmt.Errorf("%w: the credential", ErrBadChallenge)
	}
	return secret, nil
}

func unsize(b []byte) ([]byte, error) {
	v, rest, err := take2B(b)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, errors.New("data after the TPM2B")
	}
	return v, nil
}

// take2B splits a TPM2B off the front of b.
func take2B(b []byte) (v, rest []byte, err error) {
	if len(b) < 2 {
		return nil, nil, errors.New("shorter than its size")
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b)-2 < n {
		return nil, nil, fmt.Errorf("its size says %d bytes, but %d follow", n, len(b)-2)
	}
	return b[2 : 2+n], b[2+n:], nil
}

// Measure extends every event of l into the PCRs, as firmware does while
// it boots: each event's digest in each bank the log carries and the TPM
// has active. Unlike ExtendInto it does not compare the banks: a bank the
// TPM lacks is ignored, as TPM2_PCR_Extend ignores it, and a bank the log
// does not carry stays as it is, so that a test can build a TPM whose
// banks disagree with its log.
func (s *SoftTPM) Measure(l *BootLog) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range l.events {
		for i, h := range l.banks {
			if pcrs, ok := s.pcrs[h]; ok {
				pcrs[e.pcr] = extend(h, pcrs[e.pcr], e.digests[i])
			}
		}
	}
}

// ExtendBank extends digest into PCR pcr (0-7) of the bank h alone, as
// TPM2_PCR_Extend does with one digest: as an OS may extend a bank that
// the firmware left alone. It fails for a bank that is not active or a
// digest not of h's size.
func (s *SoftTPM) ExtendBank(h crypto.Hash, pcr int, digest []byte) error {
	if pcr < 0 || pcr >= quotedPCRs {
		return fmt.Errorf("attesttest: PCR %d is not one of PCRs 0-7", pcr)
	}
	if len(digest) != h.Size() {
		return fmt.Errorf("attesttest: a %s digest of %d bytes", BankName(h), len(digest))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pcrs, ok := s.pcrs[h]
	if !ok {
		return fmt.Errorf("attesttest: the %s bank is not active", BankName(h))
	}
	pcrs[pcr] = extend(h, pcrs[pcr], digest)
	return nil
}

// BankPCRs returns the values of PCRs 0-7 in the bank h; nil when it is
// not active.
func (s *SoftTPM) BankPCRs(h crypto.Hash) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	pcrs, ok := s.pcrs[h]
	if !ok {
		return nil
	}
	return clonePCRs(pcrs[:])
}

// quoteSelection is the selection attest.Device quotes: PCRs 0-7 of each
// of the four known banks.
func quoteSelection() tpm2.TPMLPCRSelection { return Selection(Banks(), 0, 1, 2, 3, 4, 5, 6, 7) }

// Quote signs PCRs 0-7 of its active banks with the AK over nonce, as
// attest.Device has a TPM do it: QuoteSelection with PCRs 0-7 of the
// SHA-1, SHA-256, SHA-384 and SHA-512 banks.
func (s *SoftTPM) Quote(nonce []byte) (attest.Quote, error) {
	return s.quote(s.ak, nonce, quoteSelection())
}

// QuoteWith is Quote signed with key instead of the AK, though the quote
// still names the AK as its signer: a test's way to show that a quote
// signed by another key does not verify.
func (s *SoftTPM) QuoteWith(key *ecdsa.PrivateKey, nonce []byte) (attest.Quote, error) {
	return s.quote(key, nonce, quoteSelection())
}

// QuoteSelection signs the PCRs sel selects with the AK over nonce, as
// TPM2_Quote does with any selection a caller asks for: each bank's entry
// is kept, with its bits cleared for a bank that is not active; the PCR
// digest is the SHA-256 (the AK's scheme's hash) of the selected PCRs'
// values, bank by bank in the selection's order, PCRs in ascending order
// (PCRs 8-23 are zero); the signature is ECDSA over the TPMS_ATTEST's
// SHA-256. The quote carries the values of PCRs 0-7 of each bank the
// narrowed selection selects any PCR of, in its order, as a client would
// send them. A selection of a hash that is no bank fails, as a TPM
// answers TPM_RC_HASH.
func (s *SoftTPM) QuoteSelection(nonce []byte, sel tpm2.TPMLPCRSelection) (attest.Quote, error) {
	return s.quote(s.ak, nonce, sel)
}

func (s *SoftTPM) quote(key *ecdsa.PrivateKey, nonce []byte, sel tpm2.TPMLPCRSelection) (attest.Quote, error) {
	if len(nonce) > 64 {
		return attest.Quote{}, errors.New("attesttest: a quote nonce over 64 bytes")
	}
	s.mu.Lock()
	values := make(map[crypto.Hash][quotedPCRs][]byte, len(s.pcrs))
	for h, pcrs := range s.pcrs {
		values[h] = *pcrs // the slices are replaced, never changed, on extend
	}
	s.mu.Unlock()
	var q attest.Quote
	var quoted tpm2.TPMLPCRSelection
	digest := sha256.New()
	for _, ps := range sel.PCRSelections {
		h, err := ps.Hash.Hash()
		if err != nil || tpmAlg(h) != ps.Hash {
			return attest.Quote{}, fmt.Errorf("attesttest: a selection of hash algorithm 0x%04x (TPM_RC_HASH)", uint16(ps.Hash))
		}
		if len(ps.PCRSelect) > 3 {
			return attest.Quote{}, fmt.Errorf("attesttest: a selection of %d bytes, over PCRs 0-23", len(ps.PCRSelect))
		}
		out := tpm2.TPMSPCRSelection{Hash: ps.Hash, PCRSelect: bytes.Clone(ps.PCRSelect)}
		pcrs, active := values[h]
		if !active {
			clear(out.PCRSelect)
		}
		selected := false
		for pcr := 0; pcr < 8*len(out.PCRSelect); pcr++ {
			if out.PCRSelect[pcr/8]&(1<<(pcr%8)) == 0 {
				continue
			}
			selected = true
			if pcr < quotedPCRs {
				digest.Write(pcrs[pcr])
			} else {
				digest.Write(make([]byte, h.Size()))
			}
		}
		if selected {
			q.Banks = append(q.Banks, attest.PCRBank{Hash: h, PCRs: clonePCRs(pcrs[:])})
		}
		quoted.PCRSelections = append(quoted.PCRSelections, out)
	}
	q.Quote = tpm2.Marshal(tpm2.TPMSAttest{
		Magic:           tpm2.TPMGeneratedValue,
		Type:            tpm2.TPMSTAttestQuote,
		QualifiedSigner: tpm2.TPM2BName{Buffer: s.akName},
		ExtraData:       tpm2.TPM2BData{Buffer: nonce},
		ClockInfo:       tpm2.TPMSClockInfo{Safe: true},
		Attested: tpm2.NewTPMUAttest(tpm2.TPMSTAttestQuote, &tpm2.TPMSQuoteInfo{
			PCRSelect: quoted,
			PCRDigest: tpm2.TPM2BDigest{Buffer: digest.Sum(nil)},
		}),
	})
	var err error
	if q.Signature, err = sign(key, q.Quote); err != nil {
		return attest.Quote{}, err
	}
	return q, nil
}

var (
	_ attest.TPM    = (*SoftTPM)(nil)
	_ attest.Quoter = (*SoftTPM)(nil)
)
