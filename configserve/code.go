package configserve

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
)

// codeBytes is the number of random bytes in an install code: 256 bits.
const codeBytes = 32

// CodeLen is the length of an install code's text: codeBytes in unpadded
// base64url.
const CodeLen = 43

// NewCode returns a fresh install code: 256 bits from crypto/rand as 43
// characters of unpadded base64url (A-Z, a-z, 0-9, '-' and '_'), safe in a
// URL path and a kernel argument without escaping.
//
// The code is a secret: whoever holds it can fetch the node's config once.
// Never log it and never put it in a journal line; Put, the Server's logs and
// its events never carry it.
func NewCode() string {
	var b [codeBytes]byte
	rand.Read(b[:]) // never fails: crypto/rand crashes the program rather than return an error
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ValidCode reports whether s has the shape of an install code NewCode
// makes: CodeLen characters of the base64url alphabet. It looks at every
// byte whatever it finds, so its time depends only on len(s).
func ValidCode(s string) bool {
	if len(s) != CodeLen {
		return false
	}
	var bad byte
	for i := 0; i < len(s); i++ {
		bad |= notBase64URL[s[i]]
	}
	return bad == 0
}

// notBase64URL is 1 for every byte outside the base64url alphabet.
var notBase64URL = func() (t [256]byte) {
	for i := range t {
		t[i] = 1
	}
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
		t[c] = 0
	}
	return t
}()

// digest is what the Server keys configs and spent codes by: the SHA-256 of
// the code's text. The Server never keeps a code's text.
type digest [sha256.Size]byte

func digestOf(code string) digest { return sha256.Sum256([]byte(code)) }
