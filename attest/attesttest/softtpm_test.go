package attesttest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
)

func TestSoftTPMRefuses(t *testing.T) {
	if _, err := attesttest.NewSoftTPM(&attesttest.SoftConfig{NoRSA: true, NoECC: true}); err == nil {
		t.Error("a SoftTPM without EKs")
	}
	tpm := attesttest.MakeSoftTPM(t, &attesttest.SoftConfig{NoRSA: true})
	eks, _ := tpm.EKs()
	if len(eks) != 1 || eks[0].Kind != attest.ECCP256 {
		t.Fatalf("EKs %+v", eks)
	}
	for name, tc := range map[string]struct {
		c   attest.Challenge
		err error
	}{
		"no RSA EK":      {attest.Challenge{Kind: attest.RSA2048, Credential: []byte{0, 0}, Secret: []byte{0, 0}}, attesttest.ErrNoEK},
		"no kind":        {attest.Challenge{Credential: []byte{0, 0}, Secret: []byte{0, 0}}, attesttest.ErrNoEK},
		"short":          {attest.Challenge{Kind: attest.ECCP256, Credential: []byte{0}, Secret: []byte{0, 0}}, attesttest.ErrBadChallenge},
		"size lies":      {attest.Challenge{Kind: attest.ECCP256, Credential: []byte{0, 9, 1}, Secret: []byte{0, 0}}, attesttest.ErrBadChallenge},
		"point off P256": {attest.Challenge{Kind: attest.ECCP256, Credential: []byte{0, 2, 0, 0}, Secret: []byte{0, 6, 0, 1, 1, 0, 1, 2}}, attesttest.ErrBadChallenge},
	} {
		if _, err := tpm.ActivateCredential(tc.c); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", name, err, tc.err)
		}
	}
}

func TestBindings(t *testing.T) {
	var b attesttest.Bindings
	got, err := b.Binding(context.Background(), "S1")
	if err != nil || got.Found {
		t.Fatalf("unknown serial: %+v, %v", got, err)
	}
	want := attest.Binding{Found: true, Authored: true, RSA2048: "r"}
	b.Set("S1", want)
	if got, _ := b.Binding(context.Background(), "S1"); got != want {
		t.Errorf("Binding = %+v", got)
	}
	b.SetError(attest.ErrBindingUnavailable)
	if _, err := b.Binding(context.Background(), "S1"); !errors.Is(err, attest.ErrBindingUnavailable) {
		t.Errorf("unavailable: %v", err)
	}
	if b.Calls() != 3 {
		t.Errorf("%d calls, want 3", b.Calls())
	}
}
