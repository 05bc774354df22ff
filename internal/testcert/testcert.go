// Package testcert makes the self-signed serving certificate that fleet's
// demo and tests run fleetd with: an ECDSA P-256 key and a certificate,
// its own CA, for the given DNS names and IP addresses, valid for a day
// (or until a given time).
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

// A Cert is a self-signed serving certificate and its key.
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
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		NotBefore:             time.Now().Add(-time.Hour),
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
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
