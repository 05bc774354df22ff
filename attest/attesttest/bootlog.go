package attesttest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	_ "crypto/sha1" // the SHA-1 PCR bank
	"crypto/sha256"
	_ "crypto/sha512" // the SHA-384 and SHA-512 PCR banks
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// Event types of the TCG PC Client platform firmware profile that a
// BootLog writes.
const (
	EvNoAction                   uint32 = 0x00000003
	EvSeparator                  uint32 = 0x00000004
	EvSCRTMVersion               uint32 = 0x00000008
	EvEFIVariableDriverConfig    uint32 = 0x80000001
	EvEFIBootServicesApplication uint32 = 0x80000003
	EvEFIVariableAuthority       uint32 = 0x800000e0
	sha256Size                          = 32
	quotedPCRs                          = 8
	efiGlobalVariable                   = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
	efiImageSecurityDatabase            = "d719b2cb-3d3a-4596-a3bc-dad00e67656f"
	efiCertX509                         = "a5c059a1-94e4-4aa7-87b5-ab155c2bf072"
	efiCertSHA256                       = "c1c41626-504c-4092-aca9-41f936934328"
	ownerGUID                           = "77fa9abd-0359-4d32-bd60-28f4e78f784b"
)

// Banks are the PCR banks a BootLog and a SoftTPM have unless told
// otherwise, and the ones attest quotes: SHA-1, SHA-256, SHA-384 and
// SHA-512, as OVMF logs them with a TPM whose four banks are active.
func Banks() []crypto.Hash {
	return []crypto.Hash{crypto.SHA1, crypto.SHA256, crypto.SHA384, crypto.SHA512}
}

// bankAlgs are the TPM algorithms of the banks of Banks.
var bankAlgs = map[crypto.Hash]tpm2.TPMAlgID{
	crypto.SHA1: tpm2.TPMAlgSHA1, crypto.SHA256: tpm2.TPMAlgSHA256,
	crypto.SHA384: tpm2.TPMAlgSHA384, crypto.SHA512: tpm2.TPMAlgSHA512,
}

// tpmAlg is the TPM algorithm of a bank, 0 for a hash that is no bank.
func tpmAlg(h crypto.Hash) tpm2.TPMAlgID { return bankAlgs[h] }

// BankName names a bank as attest's reasons and its wire do: "sha256"
// for crypto.SHA256, whose name is "SHA-256".
func BankName(h crypto.Hash) string {
	if tpmAlg(h) == 0 {
		return fmt.Sprintf("hash %d", uint(h))
	}
	return strings.ToLower(strings.ReplaceAll(h.String(), "-", ""))
}

func bankNames(hs []crypto.Hash) string {
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = BankName(h)
	}
	return strings.Join(names, ", ")
}

// Selection selects pcrs of each bank of banks, in order, as a client asks
// a TPM to quote or read them.
func Selection(banks []crypto.Hash, pcrs ...uint) tpm2.TPMLPCRSelection {
	var sel tpm2.TPMLPCRSelection
	for _, h := range banks {
		sel.PCRSelections = append(sel.PCRSelections, tpm2.TPMSPCRSelection{Hash: tpmAlg(h), PCRSelect: tpm2.PCClientCompatible.PCRs(pcrs...)})
	}
	return sel
}

// checkBanks checks a set of banks: each one of Banks, none twice. None:
// Banks.
func checkBanks(banks []crypto.Hash) ([]crypto.Hash, error) {
	if len(banks) == 0 {
		return Banks(), nil
	}
	for i, h := range banks {
		if tpmAlg(h) == 0 {
			return nil, fmt.Errorf("attesttest: %s is not a PCR bank", BankName(h))
		}
		if slices.Contains(banks[:i], h) {
			return nil, fmt.Errorf("attesttest: the %s bank twice", BankName(h))
		}
	}
	return slices.Clone(banks), nil
}

// BootLog is a synthetic UEFI event log in the TCG crypto-agile format,
// as firmware leaves it at /sys/kernel/security/tpm0/binary_bios_measurements:
// a Spec ID event that lists its PCR banks, then events that each carry a
// digest per bank. It knows the PCR values its events give in each bank
// when extended from zero. A test extends its events into a TPM
// (ExtendInto, SoftTPM.Measure) so that a quote covers them. A BootLog is
// not safe for concurrent use while events are added.
type BootLog struct {
	banks  []crypto.Hash
	log    []byte
	events []measured
	pcrs   [][quotedPCRs][]byte // per bank, as banks
}

type measured struct {
	pcr     int
	digests [][]byte // per bank, as BootLog.banks
}

// NewBootLog returns a log with the PCR banks banks that holds only its
// Spec ID header event. No banks: the four of Banks. It panics on a hash
// that is no PCR bank, or a bank given twice.
func NewBootLog(banks ...crypto.Hash) *BootLog {
	banks, err := checkBanks(banks)
	if err != nil {
		panic(err.Error())
	}
	spec := []byte("Spec ID Event03\x00")
	spec = binary.LittleEndian.AppendUint32(spec, 0) // platform class
	spec = append(spec, 0, 2, 0, 2)                  // version 2.0, errata 0, UINTN of 8 bytes
	spec = binary.LittleEndian.AppendUint32(spec, uint32(len(banks)))
	for _, h := range banks {
		spec = binary.LittleEndian.AppendUint16(spec, uint16(tpmAlg(h)))
		spec = binary.LittleEndian.AppendUint16(spec, uint16(h.Size()))
	}
	spec = append(spec, 0) // no vendor information
	// The header event is in the SHA-1 format: PCR, type, a SHA-1 digest.
	l := &BootLog{banks: banks, pcrs: make([][quotedPCRs][]byte, len(banks))}
	for i, h := range banks {
		for pcr := range l.pcrs[i] {
			l.pcrs[i][pcr] = make([]byte, h.Size())
		}
	}
	l.log = binary.LittleEndian.AppendUint32(l.log, 0)
	l.log = binary.LittleEndian.AppendUint32(l.log, EvNoAction)
	l.log = append(l.log, make([]byte, 20)...)
	l.log = binary.LittleEndian.AppendUint32(l.log, uint32(len(spec)))
	l.log = append(l.log, spec...)
	return l
}

// Banks returns the log's PCR banks, as its Spec ID event lists them.
func (l *BootLog) Banks() []crypto.Hash { return slices.Clone(l.banks) }

// Add appends an event of typ measured into pcr (0-7) whose digest in
// each bank is the bank's hash of data, as firmware measures variables
// and separators.
func (l *BootLog) Add(pcr int, typ uint32, data []byte) {
	l.add(pcr, typ, l.digestsOf(data), data)
}

func (l *BootLog) digestsOf(data []byte) [][]byte {
	digests := make([][]byte, len(l.banks))
	for i, h := range l.banks {
		hh := h.New()
		hh.Write(data)
		digests[i] = hh.Sum(nil)
	}
	return digests
}

func (l *BootLog) add(pcr int, typ uint32, digests [][]byte, data []byte) {
	if pcr < 0 || pcr >= quotedPCRs {
		panic(fmt.Sprintf("attesttest: PCR %d is not one of the quoted PCRs 0-7", pcr))
	}
	l.log = binary.LittleEndian.AppendUint32(l.log, uint32(pcr))
	l.log = binary.LittleEndian.AppendUint32(l.log, typ)
	l.log = binary.LittleEndian.AppendUint32(l.log, uint32(len(l.banks)))
	for i, h := range l.banks {
		l.log = binary.LittleEndian.AppendUint16(l.log, uint16(tpmAlg(h)))
		l.log = append(l.log, digests[i]...)
		l.pcrs[i][pcr] = extend(h, l.pcrs[i][pcr], digests[i])
	}
	l.log = binary.LittleEndian.AppendUint32(l.log, uint32(len(data)))
	l.log = append(l.log, data...)
	l.events = append(l.events, measured{pcr: pcr, digests: digests})
}

// extend is TPM2_PCR_Extend's new value of a PCR of bank h.
func extend(h crypto.Hash, pcr, digest []byte) []byte {
	hh := h.New()
	hh.Write(pcr)
	hh.Write(digest)
	return hh.Sum(nil)
}

// Bytes returns the log as the kernel exposes it.
func (l *BootLog) Bytes() []byte { return append([]byte(nil), l.log...) }

// PCRs returns the values of PCRs 0-7 in the SHA-256 bank (the ones
// attest.BootState.PCRs reports) once every event is extended into PCRs
// that start at zero; nil when the log has no SHA-256 bank.
func (l *BootLog) PCRs() [][]byte { return l.BankPCRs(crypto.SHA256) }

// BankPCRs is PCRs for the bank h; nil when the log does not carry it.
func (l *BootLog) BankPCRs(h crypto.Hash) [][]byte {
	i := slices.Index(l.banks, h)
	if i < 0 {
		return nil
	}
	return clonePCRs(l.pcrs[i][:])
}

// clonePCRs is a copy of PCR values that shares no byte with them.
func clonePCRs(pcrs [][]byte) [][]byte {
	out := make([][]byte, len(pcrs))
	for i, v := range pcrs {
		out[i] = bytes.Clone(v)
	}
	return out
}

// ExtendInto extends every event into t's PCRs, in the log's order, as
// firmware does while it boots: one TPM2_PCR_Extend per event, with its
// digest in every bank of the log. It first asks t which banks are
// active (TPM2_GetCapability, TPM_CAP_PCRS) and returns an error, having
// extended nothing, when they are not exactly the log's: a bank the log
// does not carry would stay at zero, and one the TPM lacks would be
// ignored, and a test would then quote a boot other than the one it
// means. A test that wants such a TPM measures a SoftTPM (Measure,
// ExtendBank).
func (l *BootLog) ExtendInto(t transport.TPM) error {
	active, err := activeBanks(t)
	if err != nil {
		return err
	}
	missing := func(h crypto.Hash) bool { return !slices.Contains(active, h) }
	if len(active) != len(l.banks) || slices.ContainsFunc(l.banks, missing) {
		return fmt.Errorf("attesttest: the TPM's active PCR banks (%s) are not the log's (%s)", bankNames(active), bankNames(l.banks))
	}
	for _, e := range l.events {
		var digests tpm2.TPMLDigestValues
		for i, h := range l.banks {
			digests.Digests = append(digests.Digests, tpm2.TPMTHA{HashAlg: tpmAlg(h), Digest: e.digests[i]})
		}
		_, err := tpm2.PCRExtend{
			PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(e.pcr), Auth: tpm2.PasswordAuth(nil)},
			Digests:   digests,
		}.Execute(t)
		if err != nil {
			return fmt.Errorf("attesttest: extend PCR %d: %w", e.pcr, err)
		}
	}
	return nil
}

// activeBanks asks t for its active PCR banks: those with any PCR
// allocated.
func activeBanks(t transport.TPM) ([]crypto.Hash, error) {
	rsp, err := tpm2.GetCapability{Capability: tpm2.TPMCapPCRs, PropertyCount: 1}.Execute(t)
	if err != nil {
		return nil, fmt.Errorf("attesttest: read the TPM's PCR banks: %w", err)
	}
	sel, err := rsp.CapabilityData.Data.AssignedPCR()
	if err != nil {
		return nil, fmt.Errorf("attesttest: read the TPM's PCR banks: %w", err)
	}
	var active []crypto.Hash
	for _, s := range sel.PCRSelections {
		if !slices.ContainsFunc(s.PCRSelect, func(b byte) bool { return b != 0 }) {
			continue
		}
		h, err := s.Hash.Hash()
		if err != nil {
			return nil, fmt.Errorf("attesttest: the TPM has an active PCR bank of algorithm 0x%04x", uint16(s.Hash))
		}
		active = append(active, h)
	}
	return active, nil
}

// SecureBootConfig describes the boot a SecureBootLog measures.
type SecureBootConfig struct {
	// Enabled is the SecureBoot variable: 1 when true, 0 when false.
	Enabled bool
	// PK, KEK and DB are the DER certificates of the Secure Boot
	// variables. Nil: one generated certificate each, with the subjects
	// "CN=attesttest PK", "CN=attesttest KEK" and "CN=attesttest db".
	PK, KEK, DB []byte
	// DBX are the SHA-256 hashes of dbx. Nil: one, of "attesttest dbx".
	DBX [][sha256Size]byte
	// BootLoader is the boot loader's image, whose digest goes into PCR
	// 4. Nil: "attesttest boot loader".
	BootLoader []byte
	// Banks are the log's PCR banks (NewBootLog). Nil: the four of
	// Banks.
	Banks []crypto.Hash
}

// SecureBootLog returns the log of a UEFI boot as go-attestation's
// ParseSecurebootState reads it: the firmware version into PCR 0; the
// SecureBoot, PK, KEK, db and dbx variables into PCR 7
// (EV_EFI_VARIABLE_DRIVER_CONFIG); a separator into each of PCRs 0-7; then,
// when Secure Boot is enabled, the db certificate that verified the boot
// loader (EV_EFI_VARIABLE_AUTHORITY) into PCR 7; and the boot loader's image
// into PCR 4.
func SecureBootLog(c *SecureBootConfig) (*BootLog, error) {
	var cfg SecureBootConfig
	if c != nil {
		cfg = *c
	}
	banks, err := checkBanks(cfg.Banks)
	if err != nil {
		return nil, err
	}
	for _, k := range []struct {
		der  *[]byte
		name string
	}{{&cfg.PK, "PK"}, {&cfg.KEK, "KEK"}, {&cfg.DB, "db"}} {
		if *k.der != nil {
			continue
		}
		der, err := Certificate("attesttest " + k.name)
		if err != nil {
			return nil, err
		}
		*k.der = der
	}
	if cfg.DBX == nil {
		cfg.DBX = [][sha256Size]byte{sha256.Sum256([]byte("attesttest dbx"))}
	}
	if cfg.BootLoader == nil {
		cfg.BootLoader = []byte("attesttest boot loader")
	}
	l := NewBootLog(banks...)
	l.Add(0, EvSCRTMVersion, utf16z("attesttest firmware 1.0"))
	sb := byte(0)
	if cfg.Enabled {
		sb = 1
	}
	l.Add(7, EvEFIVariableDriverConfig, variableData(efiGlobalVariable, "SecureBoot", []byte{sb}))
	l.Add(7, EvEFIVariableDriverConfig, variableData(efiGlobalVariable, "PK", certList(cfg.PK)))
	l.Add(7, EvEFIVariableDriverConfig, variableData(efiGlobalVariable, "KEK", certList(cfg.KEK)))
	l.Add(7, EvEFIVariableDriverConfig, variableData(efiImageSecurityDatabase, "db", certList(cfg.DB)))
	l.Add(7, EvEFIVariableDriverConfig, variableData(efiImageSecurityDatabase, "dbx", hashList(cfg.DBX)))
	for pcr := 0; pcr < quotedPCRs; pcr++ {
		l.Add(pcr, EvSeparator, []byte{0, 0, 0, 0})
	}
	if cfg.Enabled {
		sig := append(guid(ownerGUID), cfg.DB...)
		l.Add(7, EvEFIVariableAuthority, variableData(efiImageSecurityDatabase, "db", sig))
	}
	l.add(4, EvEFIBootServicesApplication, l.digestsOf(cfg.BootLoader), make([]byte, 32))
	return l, nil
}

// Certificate returns a new self-signed ECDSA P-256 certificate (DER) with
// subject CN=cn, as a stand-in for a Secure Boot key.
func Certificate(cn string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	return x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
}

// variableData is a UEFI_VARIABLE_DATA: the vendor GUID, the name's length
// in UTF-16 units, the data's length, the name (UTF-16LE, no terminator)
// and the data.
func variableData(vendor, name string, data []byte) []byte {
	u := utf16.Encode([]rune(name))
	b := guid(vendor)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(u)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(data)))
	b, _ = binary.Append(b, binary.LittleEndian, u)
	return append(b, data...)
}

// certList is an EFI_SIGNATURE_LIST of one X.509 certificate.
func certList(der []byte) []byte {
	return signatureList(efiCertX509, [][]byte{der})
}

// hashList is an EFI_SIGNATURE_LIST of SHA-256 hashes.
func hashList(hashes [][sha256Size]byte) []byte {
	var entries [][]byte
	for _, h := range hashes {
		entries = append(entries, h[:])
	}
	return signatureList(efiCertSHA256, entries)
}

// signatureList is an EFI_SIGNATURE_LIST of entries of one size, each an
// EFI_SIGNATURE_DATA (owner GUID, data).
func signatureList(typ string, entries [][]byte) []byte {
	if len(entries) == 0 {
		return nil
	}
	size := 16 + len(entries[0])
	b := guid(typ)
	b = binary.LittleEndian.AppendUint32(b, uint32(28+size*len(entries)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	for _, e := range entries {
		b = append(b, guid(ownerGUID)...)
		b = append(b, e...)
	}
	return b
}

// guid encodes an EFI_GUID written as text: its first three fields little
// endian, the last eight bytes as written.
func guid(s string) []byte {
	raw, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(raw) != 16 {
		panic("attesttest: not a GUID: " + s)
	}
	b := binary.LittleEndian.AppendUint32(nil, binary.BigEndian.Uint32(raw[0:4]))
	b = binary.LittleEndian.AppendUint16(b, binary.BigEndian.Uint16(raw[4:6]))
	b = binary.LittleEndian.AppendUint16(b, binary.BigEndian.Uint16(raw[6:8]))
	return append(b, raw[8:]...)
}

// utf16z is s in UTF-16LE with a terminating zero, as firmware writes
// version strings.
func utf16z(s string) []byte {
	b, _ := binary.Append(nil, binary.LittleEndian, append(utf16.Encode([]rune(s)), 0))
	return b
}

// Channel returns a go-tpm transport over a TPM command stream (a swtpm
// socket, a simulator) that reads each response whole, by the size in its
// header, however the stream splits it. It does not close rw.
func Channel(rw io.ReadWriter) transport.TPM { return channel{rw} }

type channel struct{ rw io.ReadWriter }

func (c channel) Send(cmd []byte) ([]byte, error) {
	if _, err := c.rw.Write(cmd); err != nil {
		return nil, err
	}
	hdr := make([]byte, 10)
	if _, err := io.ReadFull(c.rw, hdr); err != nil {
		return nil, err
	}
	size := int(binary.BigEndian.Uint32(hdr[2:6]))
	if size < len(hdr) || size > 1<<16 {
		return nil, errors.New("attesttest: a TPM response of impossible size")
	}
	rsp := make([]byte, size)
	copy(rsp, hdr)
	if _, err := io.ReadFull(c.rw, rsp[len(hdr):]); err != nil {
		return nil, err
	}
	return rsp, nil
}
