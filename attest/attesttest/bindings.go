package attesttest

import (
	"context"
	"sync"
	"testing"

	"github.com/fleetkit/fleet/attest"
)

// Bindings is an in-memory attest.Bindings that counts its calls. The zero
// value knows no serial. It is safe for concurrent use.
type Bindings struct {
	mu    sync.Mutex
	m     map[string]attest.Binding
	calls int
	err   error
}

// Set makes serial's binding b.
func (b *Bindings) Set(serial string, binding attest.Binding) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]attest.Binding{}
	}
	b.m[serial] = binding
}

// SetError makes Binding fail with err for every serial, or answer again
// when err is nil.
func (b *Bindings) SetError(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = err
}

// Calls returns how many times Binding was called.
func (b *Bindings) Calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// Binding implements attest.Bindings.
func (b *Bindings) Binding(_ context.Context, serial string) (attest.Binding, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.err != nil {
		return attest.Binding{}, b.err
	}
	return b.m[serial], nil
}

// Approve returns the authored binding that approves the EKs tpm presents.
func Approve(tpm attest.TPM) (attest.Binding, error) {
	eks, err := tpm.EKs()
	if err != nil {
		return attest.Binding{}, err
	}
	b := attest.Binding{Found: true, Authored: true}
	for _, ek := range eks {
		h, err := attest.EKHash(ek.Public)
		if err != nil {
			return attest.Binding{}, err
		}
		switch ek.Kind {
		case attest.RSA2048:
			b.RSA2048 = h
		case attest.ECCP256:
			b.ECCP256 = h
		}
	}
	return b, nil
}

// Approved is Approve that ends tb when tpm's EKs cannot be read.
func Approved(tb testing.TB, tpm attest.TPM) attest.Binding {
	tb.Helper()
	b, err := Approve(tpm)
	if err != nil {
		tb.Fatalf("attesttest: approve the TPM's EKs: %v", err)
	}
	return b
}
