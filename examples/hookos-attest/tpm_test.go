//go:build linux

package main

import (
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/internal/testenv"
)

// The agent speaks to swtpm on its unix socket, one connection after
// another: each time it reads the RSA EK that the EK certificate swtpm_setup
// made certifies.
func TestIntegrationSWTPMServerSocket(t *testing.T) {
	dir := t.TempDir()
	swtpm, state := testenv.ManufactureTPM(t, dir)
	sock := filepath.Join(dir, "tpm.sock")
	testenv.ServeTPM(t, swtpm, state, sock)
	var first string
	for i := range 2 { // a closed connection leaves the server to the next
		dev, err := openTPM(sock)
		if err != nil {
			t.Fatalf("openTPM(%s): %v", sock, err)
		}
		eks, err := dev.EKs()
		if err != nil {
			dev.Close()
			t.Fatalf("EKs over the socket: %v", err)
		}
		h, err := attest.EKHash(eks[0].Public)
		if err != nil || i == 1 && h != first {
			t.Errorf("open %d: the RSA EK hash is %s (%v), want %s as before", i, h, err, first)
		}
		first = h
		cert, err := x509.ParseCertificate(eks[0].Certificate)
		if err != nil {
			t.Errorf("open %d: the RSA EK's certificate: %v", i, err)
		} else if ch, err := attest.EKHash(cert.PublicKey); err != nil || ch != h {
			t.Errorf("open %d: the certificate certifies the EK %s (%v), want %s", i, ch, err, h)
		}
		if err := dev.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func TestTPMServerGone(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "tpm.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the socket file stays, and nothing listens on it
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the socket file: %v, %v", fi, err)
	}
	_, err = openTPM(sock)
	var op *net.OpError
	if !errors.Is(err, attest.ErrTPM) || !errors.As(err, &op) {
		t.Errorf("openTPM of a socket nobody listens on = %v, want attest.ErrTPM and the dial's error", err)
	}
}
