package attest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"
)

// A session is the state between a claim and its proof. It travels to the
// client and back sealed with AES-256-GCM under the server's sealing key, so
// any replica that holds the key can finish it, and the client can neither
// read nor change it. It holds the activation secrets, so it is never
// logged.
type session struct {
	id      [16]byte
	expires time.Time
	serial  string
	mac     net.HardwareAddr
	lldp    *LLDP
	// per kind (index RSA2048, ECCP256): presented EK hash and the
	// activation secret of its challenge.
	hash    [3]string
	secret  [3][secretLen]byte
	binding Binding
	// akPublic is the checked AK's TPMT_PUBLIC, which a proof's quote must
	// verify with; nil in a session of format 1, sealed before quotes.
	akPublic []byte
}

// sessionFormat is the format marshal writes; unmarshalSession reads it
// and format 1 (the same without the AK).
const sessionFormat = 2

// sessionAAD binds a sealed blob to its use.
var sessionAAD = []byte("fleet attest session v1")

// errSessionInvalid is what opening a session returns when the blob was not
// sealed by this key, was changed, or does not decode.
var errSessionInvalid = errors.New("attest: the session is not one this server sealed")

type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, errors.New("attest: the sealing key must have 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(ss *session) ([]byte, error) {
	plain := ss.marshal()
	ns := s.aead.NonceSize()
	out := make([]byte, ns, ns+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, err
	}
	return s.aead.Seal(out, out[:ns], plain, sessionAAD), nil
}

func (s *sealer) open(blob []byte) (*session, error) {
	ns := s.aead.NonceSize()
	if len(blob) < ns+s.aead.Overhead() {
		return nil, errSessionInvalid
	}
	plain, err := s.aead.Open(nil, blob[:ns], blob[ns:], sessionAAD)
	if err != nil {
		return nil, errSessionInvalid
	}
	ss, err := unmarshalSession(plain)
	if err != nil {
		return nil, errSessionInvalid
	}
	return ss, nil
}

func (ss *session) idString() string { return hex.EncodeToString(ss.id[:]) }

// marshal encodes the session compactly: a format byte, the id, the expiry,
// then length-prefixed strings and flags.
func (ss *session) marshal() []byte {
	b := make([]byte, 0, 384)
	b = append(b, sessionFormat)
	b = append(b, ss.id[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(ss.expires.UnixNano()))
	b = appendString(b, ss.serial)
	b = appendString(b, ss.mac.String())
	if ss.lldp == nil {
		b = append(b, 0)
	} else {
		l := ss.lldp
		b = append(b, 1, l.ChassisIDSubtype, l.PortIDSubtype)
		b = appendString(b, l.ChassisID)
		b = appendString(b, l.PortID)
		b = appendString(b, l.PortDescription)
		b = appendString(b, l.SystemName)
	}
	for _, k := range []KeyKind{RSA2048, ECCP256} {
		b = appendString(b, ss.hash[k])
		if ss.hash[k] != "" {
			b = append(b, ss.secret[k][:]...)
		}
	}
	b = append(b, flag(ss.binding.Found), flag(ss.binding.Authored))
	b = appendString(b, ss.binding.RSA2048)
	b = appendString(b, ss.binding.ECCP256)
	b = binary.BigEndian.AppendUint16(b, uint16(len(ss.akPublic)))
	b = append(b, ss.akPublic...)
	return b
}

func flag(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// reader decodes what marshal wrote; any short read sets err.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("short session")

func (r *reader) next(n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.err = errShort
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if v := r.next(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) string() string {
	v := r.next(2)
	if v == nil {
		return ""
	}
	return string(r.next(int(binary.BigEndian.Uint16(v))))
}

func unmarshalSession(b []byte) (*session, error) {
	r := &reader{b: b}
	format := r.byte()
	if format != 1 && format != sessionFormat {
		return nil, errors.New("unknown session format")
	}
	ss := &session{}
	copy(ss.id[:], r.next(16))
	if v := r.next(8); v != nil {
		ss.expires = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
	}
	ss.serial = r.string()
	if mac := r.string(); mac != "" {
		hw, err := net.ParseMAC(mac)
		if err != nil {
			return nil, fmt.Errorf("the session's MAC: %w", err)
		}
		ss.mac = hw
	}
	if r.byte() == 1 {
		l := &LLDP{ChassisIDSubtype: r.byte(), PortIDSubtype: r.byte()}
		l.ChassisID = r.string()
		l.PortID = r.string()
		l.PortDescription = r.string()
		l.SystemName = r.string()
		ss.lldp = l
	}
	for _, k := range []KeyKind{RSA2048, ECCP256} {
		ss.hash[k] = r.string()
		if ss.hash[k] != "" {
			copy(ss.secret[k][:], r.next(secretLen))
		}
	}
	ss.binding.Found = r.byte() == 1
	ss.binding.Authored = r.byte() == 1
	ss.binding.RSA2048 = r.string()
	ss.binding.ECCP256 = r.string()
	if format >= 2 {
		if v := r.next(2); v != nil {
			ss.akPublic = bytes.Clone(r.next(int(binary.BigEndian.Uint16(v))))
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, errors.New("data after the session")
	}
	return ss, nil
}
