package daemon

import (
	"crypto/subtle"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/fleetkit/fleet/attest"
)

// claim answers GET /v1/claims/{serial} to approvers only: a request with
// the approver token, or with a client certificate FLEET_APPROVER_CA
// issued. Anyone else gets 401 and nothing about the serial. The answer is
// the list of every claim that waits for the serial, oldest first, one per
// TPM, each in attest.WaitingClaim's wire format, or 404 when none does. A waiting claim proves nothing, because another machine
// can send one with this serial: the operator compares it with independent
// evidence, and more than one claim means more than one TPM claims it.
func (d *Daemon) claim(w http.ResponseWriter, r *http.Request) {
	who, ok := d.approver(r)
	if !ok {
		d.log.Warn("fleet.approve", "serial", r.PathValue("serial"), "refused", "not an approver", "peer", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="fleetd approvers"`)
		http.Error(w, "approvers only", http.StatusUnauthorized)
		return
	}
	serial := r.PathValue("serial")
	claims := d.attest.Waiting(serial)
	answer := make([]attest.WaitingClaim, len(claims))
	for i, c := range claims {
		answer[i] = c.Wire()
	}
	if d.peers != nil {
		// Each replica holds the claims whose proofs reached it.
		others, missed := d.peerClaims(r.Context(), serial)
		answer = append(answer, others...)
		if len(missed) > 0 {
			w.Header().Set("Fleet-Replicas-Unanswered", strings.Join(missed, ","))
		}
	}
	d.log.Info("fleet.approve", "serial", serial, "approver", who, "peer", r.RemoteAddr, "claims", len(answer))
	if len(answer) == 0 {
		http.Error(w, fmt.Sprintf("no claim waits for serial %s", serial), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(answer)
}

// approver says who asks, when the request comes from an approver.
func (d *Daemon) approver(r *http.Request) (string, bool) {
	if d.approverCAs != nil && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return "certificate " + r.TLS.VerifiedChains[0][0].Subject.String(), true
	}
	if d.s.ApproverToken == "" {
		return "", false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && subtle.ConstantTimeCompare([]byte(got), []byte(d.s.ApproverToken)) == 1 {
		return "token", true
	}
	return "", false
}

// loadCAs reads a PEM bundle of CA certificates.
func loadCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New(path + ": no PEM certificate")
	}
	return pool, nil
}
