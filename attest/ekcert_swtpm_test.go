//go:build linux

package attest_test

import (
	"crypto/x509"
	"encoding/asn1"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/internal/testenv"
)

var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// The runbook's "pending-approval, even when a trusted maker certified
// each EK", on swtpm as swtpm_setup manufactures it: its local CA
// certified the EKs (the RSA EK at least), and a test that trusts that CA's root verifies each
// certificate in NV, of the key the client presents; fleetd, which trusts
// no EK certificate authority, tells the TPM pending-approval all the same
// while no entry approves an EK, and once one does the whole flow, client
// to server, over swtpm's socket as a command channel, attests
// it. (TestCertifiedEKPendingApproval proves the same on the reference
// simulator with a CA of the test's own, and that the certificates reach
// the server.)
func TestIntegrationSWTPMCertifiedEKPendingApproval(t *testing.T) {
	swtpm, state := testenv.ManufactureTPM(t, t.TempDir())
	pool := func(file string) *x509.CertPool {
		p := x509.NewCertPool()
		pem, err := os.ReadFile(filepath.Join(filepath.Dir(state), "ca", file))
		if err != nil || !p.AppendCertsFromPEM(pem) {
			t.Fatalf("swtpm_localca's %s is no PEM certificate: %v", file, err)
		}
		return p
	}
	roots, intermediates := pool("swtpm-localca-rootca-cert.pem"), pool("issuercert.pem")

	dev := attest.OpenChannel(startSWTPM(t, swtpm, state))
	t.Cleanup(func() { dev.Close() })
	eks, err := dev.EKs()
	if err != nil {
		t.Fatal(err)
	}
	if len(eks) != 2 || eks[0].Kind != attest.RSA2048 || eks[1].Kind != attest.ECCP256 {
		t.Fatalf("EKs %+v, want RSA-2048 and ECC P-256", eks)
	}
	certified := 0
	for _, ek := range eks {
		if len(ek.Certificate) == 0 {
			continue
		}
		c, err := x509.ParseCertificate(ek.Certificate)
		if err != nil {
			t.Fatalf("the %s EK's certificate: %v", ek.Kind, err)
		}
		if !reflect.DeepEqual(c.PublicKey, ek.Public) {
			t.Fatalf("the %s EK's certificate certifies another key", ek.Kind)
		}
		// The TCG EK profile names the TPM's maker, model and version in a
		// critical subjectAltName of directoryName form only, which
		// crypto/x509 leaves unhandled: that extension, and no other, is
		// taken as read.
		c.UnhandledCriticalExtensions = slices.DeleteFunc(c.UnhandledCriticalExtensions, func(id asn1.ObjectIdentifier) bool {
			return id.Equal(oidSubjectAltName)
		})
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Fatalf("the %s EK's certificate does not chain to swtpm_localca's root: %v", ek.Kind, err)
		}
		certified++
	}
	if certified == 0 || len(eks[0].Certificate) == 0 {
		t.Fatalf("%d of %d EKs certified; want the RSA EK's at least", certified, len(eks))
	}

	approved := attesttest.Approved(t, dev)
	for _, tc := range []verdictCase{
		{name: "no entry names the serial", verdict: attest.PendingApproval, console: "attest: FAILED pending-approval\nattest: no entry names the serial\n"},
		{name: "the entry approves its EKs", binding: &approved, verdict: attest.Attested, console: "attest: PASSED\n"},
	} {
		attestsAs(t, newFleet(t, nil), dev, nil, tc)
	}
	t.Logf("%d of %d EKs certified by swtpm_localca", certified, len(eks))
}
