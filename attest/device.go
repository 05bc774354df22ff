package attest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	goattest "github.com/google/go-attestation/attest"
	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// DefaultDevice is the TPM device OpenTPM opens when given "": the kernel's
// resource manager.
const DefaultDevice = "/dev/tpmrm0"

// TCG NV indices of the low-range EK certificates and template nonces.
const (
	nvRSACert  = 0x01c00002
	nvRSANonce = 0x01c00003
	nvECCCert  = 0x01c0000a
	nvECCNonce = 0x01c0000b
)

// ErrTPM is what a Device's methods wrap when the TPM refused a command or
// could not be reached.
var ErrTPM = errors.New("attest: the TPM failed")

// Device is a TPM 2.0 reached through a command channel, driven with
// go-tpm. It reads the EKs from the TCG reference templates (RSA-2048 and
// ECC P-256, with the NV template nonce where the TPM has one), reads their
// certificates from NV, creates an ECC P-256 attestation key as a primary
// key in the endorsement hierarchy, and activates credentials with the EK
// policy (PolicySecret on the endorsement hierarchy), and quotes PCRs 0-7
// of every active PCR bank with the AK (Quoter). It writes nothing to the
// TPM's NV: no key is persisted.
//
// At most three objects are loaded at once (the AK and the two EKs), which
// fits the reference simulator. A Device is safe for concurrent use, one
// command at a time. Close flushes what it loaded and closes the channel.
type Device struct {
	mu     sync.Mutex
	tpm    transport.TPMCloser
	closed bool
	eks    []EK
	loaded map[KeyKind]loadedKey
	ak     *loadedKey
	akp    AKParameters
	// platform marks the machine's own TPM (OpenTPM), whose PCRs the
	// platform's event log describes.
	platform bool
}

type loadedKey struct {
	handle tpm2.TPMHandle
	name   tpm2.TPM2BName
}

// OpenChannel returns a Device that sends TPM commands over rwc, such as a
// TPM character device, a swtpm TCP socket, or a simulator. On a stream
// (anything but an *os.File) a response may arrive in pieces: the Device
// reads each one whole, by the size in its header. The Device owns rwc: its
// Close closes rwc.
func OpenChannel(rwc io.ReadWriteCloser) *Device {
	if _, ok := rwc.(*os.File); !ok {
		rwc = &framed{rwc: rwc}
	}
	return &Device{tpm: transport.FromReadWriteCloser(rwc), loaded: map[KeyKind]loadedKey{}}
}

// framed returns one whole TPM response per Read, however the stream
// beneath splits it.
type framed struct {
	rwc     io.ReadWriteCloser
	pending []byte
}

// maxResponse bounds a TPM response (TPM2's largest is far smaller).
const maxResponse = 1 << 16

func (f *framed) Read(p []byte) (int, error) {
	if len(f.pending) == 0 {
		hdr := make([]byte, 10) // tag, size, response code
		if _, err := io.ReadFull(f.rwc, hdr); err != nil {
			return 0, err
		}
		size := int(binary.BigEndian.Uint32(hdr[2:6]))
		if size < len(hdr) || size > maxResponse {
			return 0, fmt.Errorf("a TPM response of %d bytes", size)
		}
		rsp := make([]byte, size)
		copy(rsp, hdr)
		if _, err := io.ReadFull(f.rwc, rsp[len(hdr):]); err != nil {
			return 0, err
		}
		f.pending = rsp
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

func (f *framed) Write(p []byte) (int, error) { return f.rwc.Write(p) }
func (f *framed) Close() error                { return f.rwc.Close() }

// Close flushes the keys the Device loaded and closes its channel. It is
// safe to call more than once.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	for k, l := range d.loaded {
		d.flush(l.handle)
		delete(d.loaded, k)
	}
	if d.ak != nil {
		d.flush(d.ak.handle)
		d.ak = nil
	}
	return d.tpm.Close()
}

var errClosed = fmt.Errorf("%w: the device is closed", ErrTPM)

func (d *Device) flush(h tpm2.TPMHandle) {
	_, _ = tpm2.FlushContext{FlushHandle: h}.Execute(d.tpm)
}

// EKs returns the RSA-2048 and ECC P-256 EKs, with their NV certificates.
// A TPM without an ECC EK (one that cannot create it) presents the RSA EK
// alone. Errors wrap ErrTPM.
func (d *Device) EKs() ([]EK, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosed
	}
	if d.eks != nil {
		return append([]EK(nil), d.eks...), nil
	}
	var eks []EK
	var firstErr error
	for _, kind := range []KeyKind{RSA2048, ECCP256} {
		ek, err := d.loadEK(kind)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		eks = append(eks, ek)
	}
	if len(eks) == 0 {
		return nil, firstErr
	}
	d.eks = eks
	return append([]EK(nil), eks...), nil
}

// ekTemplate returns the TCG low-range EK template of kind, with the nonce
// of its NV index in the unique field where the TPM has one.
func (d *Device) ekTemplate(kind KeyKind) tpm2.TPMTPublic {
	switch kind {
	case RSA2048:
		t := tpm2.RSAEKTemplate
		if nonce, err := d.readNV(nvRSANonce); err == nil && len(nonce) > 0 {
			unique := make([]byte, 256)
			copy(unique, nonce)
			t.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: unique})
		}
		return t
	default:
		t := tpm2.ECCEKTemplate
		if nonce, err := d.readNV(nvECCNonce); err == nil && len(nonce) > 0 {
			x := make([]byte, 32)
			copy(x, nonce)
			t.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
				X: tpm2.TPM2BECCParameter{Buffer: x},
				Y: tpm2.TPM2BECCParameter{Buffer: make([]byte, 32)},
			})
		}
		return t
	}
}

// loadEK creates the EK of kind (a primary key: the same key every time)
// and keeps it loaded for the activation that follows.
func (d *Device) loadEK(kind KeyKind) (EK, error) {
	if l, ok := d.loaded[kind]; ok {
		d.flush(l.handle)
		delete(d.loaded, kind)
	}
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.TPMRHEndorsement,
		InPublic:      tpm2.New2B(d.ekTemplate(kind)),
	}.Execute(d.tpm)
	if err != nil {
		return EK{}, fmt.Errorf("%w: create the %s EK: %w", ErrTPM, kind, err)
	}
	pub, err := publicKey(&rsp.OutPublic)
	if err != nil {
		d.flush(rsp.ObjectHandle)
		return EK{}, fmt.Errorf("%w: the %s EK: %w", ErrTPM, kind, err)
	}
	if k, err := kindOf(pub); err != nil || k != kind {
		d.flush(rsp.ObjectHandle)
		return EK{}, fmt.Errorf("%w: the %s EK is not of its kind", ErrTPM, kind)
	}
	d.loaded[kind] = loadedKey{handle: rsp.ObjectHandle, name: rsp.Name}
	ek := EK{Kind: kind, Public: pub}
	idx := tpm2.TPMHandle(nvRSACert)
	if kind == ECCP256 {
		idx = nvECCCert
	}
	if cert, err := d.readNV(idx); err == nil && len(cert) > 0 {
		ek.Certificate = certFor(pub, trimDER(cert))
	}
	return ek, nil
}

// certFor returns der when it is a certificate of pub, and nil otherwise:
// a TPM may hold a certificate of an EK made from another template, and a
// claim carries only its own EKs' certificates. go-attestation's parser
// takes the certificates some makers encode loosely.
func certFor(pub any, der []byte) []byte {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		if cert, err = goattest.ParseEKCertificate(der); err != nil {
			return nil
		}
	}
	k, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !k.Equal(pub) {
		return nil
	}
	return der
}

func publicKey(p *tpm2.TPM2BPublic) (any, error) {
	t, err := p.Contents()
	if err != nil {
		return nil, err
	}
	pub, err := tpm2.Pub(*t)
	if err != nil {
		return nil, err
	}
	switch k := pub.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
		return k, nil
	}
	return nil, fmt.Errorf("unexpected key type %T", pub)
}

// readNV reads a whole NV index, in chunks the TPM accepts.
func (d *Device) readNV(index tpm2.TPMHandle) ([]byte, error) {
	pub, err := tpm2.NVReadPublic{NVIndex: index}.Execute(d.tpm)
	if err != nil {
		return nil, err
	}
	nv, err := pub.NVPublic.Contents()
	if err != nil {
		return nil, err
	}
	const chunk = 512
	size := int(nv.DataSize)
	out := make([]byte, 0, size)
	auths := []tpm2.TPMHandle{index, tpm2.TPMRHOwner}
	for len(out) < size {
		n := min(chunk, size-len(out))
		var data []byte
		var rerr error
		for _, a := range auths {
			auth := tpm2.AuthHandle{Handle: a, Auth: tpm2.PasswordAuth(nil)}
			if a == index {
				auth.Name = pub.NVName
			}
			rsp, err := tpm2.NVRead{
				AuthHandle: auth,
				NVIndex:    tpm2.NamedHandle{Handle: index, Name: pub.NVName},
				Size:       uint16(n),
				Offset:     uint16(len(out)),
			}.Execute(d.tpm)
			if err == nil {
				data, rerr = rsp.Data.Buffer, nil
				auths = []tpm2.TPMHandle{a}
				break
			}
			rerr = err
		}
		if rerr != nil {
			return nil, rerr
		}
		if len(data) == 0 {
			break
		}
		out = append(out, data...)
	}
	return out, nil
}

// trimDER drops the padding some TPMs leave after a DER certificate in NV.
func trimDER(b []byte) []byte {
	if len(b) < 4 || b[0] != 0x30 {
		return b
	}
	var n int
	switch {
	case b[1] < 0x80:
		n = 2 + int(b[1])
	case b[1] == 0x81:
		n = 3 + int(b[2])
	case b[1] == 0x82:
		n = 4 + (int(b[2])<<8 | int(b[3]))
	default:
		return b
	}
	if n <= len(b) {
		return b[:n]
	}
	return b
}

// AKTemplate returns the template Device creates its attestation key (AK)
// from: an ECC P-256 restricted signing key (ECDSA, SHA-256) that
// go-attestation's server checks accept, with a unique field of two
// 32-byte zero coordinates. The public area a TPM returns for the AK is
// this template with the key's point as its unique field; its hash is the
// AK's name.
func AKTemplate() tpm2.TPMTPublic {
	return tpm2.TPMTPublic{
		Type:    tpm2.TPMAlgECC,
		NameAlg: tpm2.TPMAlgSHA256,
		ObjectAttributes: tpm2.TPMAObject{
			FixedTPM:            true,
			FixedParent:         true,
			SensitiveDataOrigin: true,
			UserWithAuth:        true,
			NoDA:                true,
			Restricted:          true,
			SignEncrypt:         true,
		},
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
			Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
			Scheme: tpm2.TPMTECCScheme{
				Scheme: tpm2.TPMAlgECDSA,
				Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSigSchemeECDSA{
					HashAlg: tpm2.TPMAlgSHA256,
				}),
			},
			CurveID: tpm2.TPMECCNistP256,
			KDF:     tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
			X: tpm2.TPM2BECCParameter{Buffer: make([]byte, 32)},
			Y: tpm2.TPM2BECCParameter{Buffer: make([]byte, 32)},
		}),
	}
}

// AK creates the attestation key on first use (a primary key in the
// endorsement hierarchy, certified by TPM2_CertifyCreation with itself) and
// returns its parameters. Errors wrap ErrTPM.
func (d *Device) AK() (AKParameters, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return AKParameters{}, errClosed
	}
	if d.ak != nil {
		return d.akp, nil
	}
	create := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.TPMRHEndorsement,
		InPublic:      tpm2.New2B(AKTemplate()),
	}
	rsp, err := create.Execute(d.tpm)
	if err != nil && len(d.loaded) > 0 {
		// A TPM without a resource manager may lack a slot for the AK
		// beside both EKs: make room (ActivateCredential loads an EK again
		// when it needs one) and try once more.
		for k, l := range d.loaded {
			d.flush(l.handle)
			delete(d.loaded, k)
		}
		rsp, err = create.Execute(d.tpm)
	}
	if err != nil {
		return AKParameters{}, fmt.Errorf("%w: create the AK: %w", ErrTPM, err)
	}
	cert, err := tpm2.CertifyCreation{
		SignHandle:     tpm2.AuthHandle{Handle: rsp.ObjectHandle, Name: rsp.Name, Auth: tpm2.PasswordAuth(nil)},
		ObjectHandle:   tpm2.NamedHandle{Handle: rsp.ObjectHandle, Name: rsp.Name},
		CreationHash:   rsp.CreationHash,
		InScheme:       tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
		CreationTicket: rsp.CreationTicket,
	}.Execute(d.tpm)
	if err != nil {
		d.flush(rsp.ObjectHandle)
		return AKParameters{}, fmt.Errorf("%w: certify the AK's creation: %w", ErrTPM, err)
	}
	d.ak = &loadedKey{handle: rsp.ObjectHandle, name: rsp.Name}
	d.akp = AKParameters{
		Public:            bytes.Clone(rsp.OutPublic.Bytes()),
		CreateData:        bytes.Clone(rsp.CreationData.Bytes()),
		CreateAttestation: bytes.Clone(cert.CertifyInfo.Bytes()),
		CreateSignature:   tpm2.Marshal(cert.Signature),
	}
	return d.akp, nil
}

// ActivateCredential decrypts c with the EK of c.Kind under the EK's policy
// and the AK, and returns the secret. The EK is flushed afterwards. Errors
// wrap ErrTPM.
func (d *Device) ActivateCredential(c Challenge) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosed
	}
	if d.ak == nil {
		return nil, fmt.Errorf("%w: no AK: call AK first", ErrTPM)
	}
	cred, err := unsize(c.Credential)
	if err != nil {
		return nil, fmt.Errorf("%w: the %s challenge's credential: %w", ErrTPM, c.Kind, err)
	}
	secret, err := unsize(c.Secret)
	if err != nil {
		return nil, fmt.Errorf("%w: the %s challenge's secret: %w", ErrTPM, c.Kind, err)
	}
	ek, ok := d.loaded[c.Kind]
	if !ok {
		if c.Kind != RSA2048 && c.Kind != ECCP256 {
			return nil, fmt.Errorf("%w: a challenge for an EK of kind %s", ErrTPM, c.Kind)
		}
		if _, err := d.loadEK(c.Kind); err != nil {
			return nil, err
		}
		ek = d.loaded[c.Kind]
	}
	defer func() {
		d.flush(ek.handle)
		delete(d.loaded, c.Kind)
	}()
	rsp, err := tpm2.ActivateCredential{
		ActivateHandle: tpm2.AuthHandle{Handle: d.ak.handle, Name: d.ak.name, Auth: tpm2.PasswordAuth(nil)},
		KeyHandle: tpm2.AuthHandle{
			Handle: ek.handle,
			Name:   ek.name,
			Auth:   tpm2.Policy(tpm2.TPMAlgSHA256, 16, ekPolicy),
		},
		CredentialBlob: tpm2.TPM2BIDObject{Buffer: cred},
		Secret:         tpm2.TPM2BEncryptedSecret{Buffer: secret},
	}.Execute(d.tpm)
	if err != nil {
		return nil, fmt.Errorf("%w: activate the %s credential: %w", ErrTPM, c.Kind, err)
	}
	return bytes.Clone(rsp.CertInfo.Buffer), nil
}

// ekPolicy satisfies the TCG EK policy: PolicySecret on the endorsement
// hierarchy.
func ekPolicy(t transport.TPM, handle tpm2.TPMISHPolicy, nonceTPM tpm2.TPM2BNonce) error {
	_, err := tpm2.PolicySecret{
		AuthHandle:    tpm2.TPMRHEndorsement,
		PolicySession: handle,
		NonceTPM:      nonceTPM,
	}.Execute(t)
	return err
}

// unsize strips the 2-byte size of a TPM2B and checks it.
func unsize(b []byte) ([]byte, error) {
	if len(b) < 2 {
		return nil, errors.New("shorter than its size")
	}
	n := int(b[0])<<8 | int(b[1])
	if n != len(b)-2 {
		return nil, fmt.Errorf("its size says %d bytes, but %d follow", n, len(b)-2)
	}
	return b[2:], nil
}

// Quote signs PCRs 0-7 of every PCR bank the TPM has active with the AK
// over nonce: one TPM2_Quote whose selection lists every bank the TPM
// implements of SHA-1, SHA-256, SHA-384 and SHA-512 (TPM_CAP_PCRS), which
// the TPM narrows to its active banks in the TPMS_ATTEST it signs. It then
// reads the values of each bank the quote covers (TPM2_PCR_Read, one bank
// per read). Call AK first. Errors wrap ErrTPM.
func (d *Device) Quote(nonce []byte) (Quote, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return Quote{}, errClosed
	}
	if d.ak == nil {
		return Quote{}, fmt.Errorf("%w: no AK: call AK first", ErrTPM)
	}
	implemented, err := d.implementedBanks()
	if err != nil {
		return Quote{}, err
	}
	rsp, err := tpm2.Quote{
		SignHandle:     tpm2.AuthHandle{Handle: d.ak.handle, Name: d.ak.name, Auth: tpm2.PasswordAuth(nil)},
		QualifyingData: tpm2.TPM2BData{Buffer: nonce},
		InScheme:       tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
		PCRSelect:      quotedSelection(implemented),
	}.Execute(d.tpm)
	if err != nil {
		return Quote{}, fmt.Errorf("%w: quote the PCRs: %w", ErrTPM, err)
	}
	att, err := rsp.Quoted.Contents()
	if err != nil {
		return Quote{}, fmt.Errorf("%w: the quote: %w", ErrTPM, err)
	}
	info, err := att.Attested.Quote()
	if err != nil {
		return Quote{}, fmt.Errorf("%w: the quote: %w", ErrTPM, err)
	}
	q := Quote{Quote: bytes.Clone(rsp.Quoted.Bytes()), Signature: tpm2.Marshal(rsp.Signature)}
	for _, s := range info.PCRSelect.PCRSelections {
		if allZero(s.PCRSelect) {
			continue // a bank the TPM does not have active
		}
		h, ok := bankOfAlg(s.Hash)
		if !ok {
			return Quote{}, fmt.Errorf("%w: the TPM quoted a PCR bank of algorithm 0x%04x", ErrTPM, uint16(s.Hash))
		}
		bank, err := d.readBank(s.Hash, h)
		if err != nil {
			return Quote{}, err
		}
		q.Banks = append(q.Banks, bank)
	}
	return q, nil
}

// implementedBanks returns the hash algorithms of the PCR banks the TPM
// implements, active or not (TPM2_GetCapability, TPM_CAP_PCRS): a quote
// asks for each, and a TPM answers TPM_RC_HASH to a bank it does not
// implement.
func (d *Device) implementedBanks() ([]tpm2.TPMAlgID, error) {
	rsp, err := tpm2.GetCapability{Capability: tpm2.TPMCapPCRs, Property: 0, PropertyCount: 16}.Execute(d.tpm)
	if err != nil {
		return nil, fmt.Errorf("%w: read the PCR banks: %w", ErrTPM, err)
	}
	sel, err := rsp.CapabilityData.Data.AssignedPCR()
	if err != nil {
		return nil, fmt.Errorf("%w: read the PCR banks: %w", ErrTPM, err)
	}
	var algs []tpm2.TPMAlgID
	for _, s := range sel.PCRSelections {
		algs = append(algs, s.Hash)
	}
	return algs, nil
}

// readBank reads PCRs 0-7 of the bank of alg (TPM2_PCR_Read returns at
// most eight digests).
func (d *Device) readBank(alg tpm2.TPMAlgID, h crypto.Hash) (PCRBank, error) {
	read, err := tpm2.PCRRead{PCRSelectionIn: tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{
		Hash:      alg,
		PCRSelect: tpm2.PCClientCompatible.PCRs(0, 1, 2, 3, 4, 5, 6, 7),
	}}}}.Execute(d.tpm)
	if err != nil {
		return PCRBank{}, fmt.Errorf("%w: read the %s PCRs: %w", ErrTPM, bankName(h), err)
	}
	if len(read.PCRValues.Digests) != QuotedPCRs {
		return PCRBank{}, fmt.Errorf("%w: the TPM read %d of PCRs 0-7 of the %s bank", ErrTPM, len(read.PCRValues.Digests), bankName(h))
	}
	bank := PCRBank{Hash: h}
	for _, v := range read.PCRValues.Digests {
		if len(v.Buffer) != h.Size() {
			return PCRBank{}, fmt.Errorf("%w: the TPM read a %s PCR of %d bytes", ErrTPM, bankName(h), len(v.Buffer))
		}
		bank.PCRs = append(bank.PCRs, bytes.Clone(v.Buffer))
	}
	return bank, nil
}

var _ Quoter = (*Device)(nil)
