// Package testcert makes the self-signed serving certificate that fleet's
// demo and tests run fleetd with: an ECDSA P-256 key and a certificate,
// its own CA, for the given DNS names and IP addresses, valid for a day
// (or until a given time); and an approver's client certificate with the
// CA that issued it.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// A Cert is a certificate and its key.
type Cert struct {
	TLS  tls.Certificate // with Leaf set
	Pool *x509.CertPool  // trusts the certificate
}

// New makes a certificate for hosts: each an IP address or a DNS name. The
// first names the certificate's subject.
func New(hosts ...string) (*Cert, error) {
	return NewUntil(time.Now().Add(24*time.Hour), hosts...)
}

// NewUntil is New with a certificate valid until notAfter.
func NewUntil(notAfter time.Time, hosts ...string) (*Cert, error) {
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if len(hosts) > 0 {
		tmpl.Subject = pkix.Name{CommonName: hosts[0]}
	}
	return issue(tmpl, nil)
}

// NewClient makes a CA and a client certificate for user that the CA
// issued, both valid for a day: an approver's, as fleetd's
// FLEET_APPROVER_CA trusts the CA.
func NewClient(user string) (ca, client *Cert, err error) {
	ca, err = issue(&x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "approvers"},
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil)
	if err != nil {
		return nil, nil, err
	}
	client, err = issue(&x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: user},
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
	return ca, client, err
}

// issue makes a new key and the certificate tmpl for it, valid from an
// hour ago, signed by parent, or by itself when parent is nil.
func issue(tmpl *x509.Certificate, parent *Cert) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	signer, signerKey := tmpl, any(key)
	if parent != nil {
		signer, signerKey = parent.TLS.Leaf, parent.TLS.PrivateKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &Cert{TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, Pool: pool}, nil
}

// WriteFiles writes the certificate and its key as PEM files in dir,
// fleetd.crt and fleetd.key (FLEET_TLS_CERT, FLEET_TLS_KEY).
func (c *Cert) WriteFiles(dir string) (certFile, keyFile string, err error) {
	kder, err := x509.MarshalPKCS8PrivateKey(c.TLS.PrivateKey)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "fleetd.crt"), filepath.Join(dir, "fleetd.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.TLS.Certificate[0]}), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}
