package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// A CertReloader serves the certificate at certFile and keyFile, and reads it
// again when either file changes (as an ACME client renews it), checking at
// most every recheck. A renewal that does not load leaves the old
// certificate in use and is logged.
type CertReloader struct {
	certFile, keyFile string
	recheck           time.Duration
	logf              func(msg string, args ...any)

	mu        sync.Mutex
	cert      *tls.Certificate
	notAfter  time.Time
	modTime   time.Time
	checkedAt time.Time
}

func newCertReloader(certFile, keyFile string, logf func(string, ...any)) (*CertReloader, error) {
	r := &CertReloader{certFile: certFile, keyFile: keyFile, recheck: 30 * time.Second, logf: logf}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// StaticCert serves one certificate that never changes (the demo's).
func StaticCert(c tls.Certificate) (*CertReloader, error) {
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil, err
	}
	c.Leaf = leaf
	return &CertReloader{cert: &c, notAfter: leaf.NotAfter}, nil
}

func (r *CertReloader) load() error {
	st, err := os.Stat(r.certFile)
	if err != nil {
		return err
	}
	kst, err := os.Stat(r.keyFile)
	if err != nil {
		return err
	}
	mod := st.ModTime()
	if kst.ModTime().After(mod) {
		mod = kst.ModTime()
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s: %w", r.certFile, err)
	}
	if c.Leaf == nil {
		return errors.New("TLS certificate: no leaf")
	}
	r.mu.Lock()
	r.cert, r.notAfter, r.modTime = &c, c.Leaf.NotAfter, mod
	r.mu.Unlock()
	return nil
}

// getCertificate is tls.Config.GetCertificate.
func (r *CertReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	due := r.certFile != "" && time.Since(r.checkedAt) >= r.recheck
	if due {
		r.checkedAt = time.Now()
	}
	modTime := r.modTime
	r.mu.Unlock()
	if due {
		if st, err := os.Stat(r.certFile); err == nil && st.ModTime().After(modTime) {
			if err := r.load(); err != nil && r.logf != nil {
				r.logf("fleetd: keeping the old TLS certificate", "error", err.Error())
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert, nil
}

// expiry returns the NotAfter of the certificate in use, after reading
// a renewed one as a handshake does: a fleetd that no machine reached
// since the renewal reports the new certificate's expiry, not the old's.
func (r *CertReloader) expiry() time.Time {
	r.getCertificate(nil)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.notAfter
}
