package daemon

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/configserve"
)

// Replicas. fleetd runs as several replicas behind one address when
// FLEET_REPLICA names this one and FLEET_PEERS lists them all. A claim, its
// proof, a config fetch and an approver's question may each reach any
// replica:
//
//   - sessions are sealed with FLEET_SEALING_KEY, which every replica
//     holds, and spent sessions are Leases every replica sees
//     (attest/spentlease), so a proof is accepted once across replicas;
//   - a config stays in the memory of the replica that rendered it; a
//     fetch that reaches another replica borrows it from its holder over
//     the peers' API (configserve's Lend and Borrow), so it is served once,
//     and the replica that answered journals it (a holder that dies
//     meanwhile takes no line with it); a loan never settled (its
//     borrower died) is dropped and journaled by the holder, so a
//     borrower that lives tries its settle again until the loan's
//     deadline when the network does not carry it, and hands back,
//     unserved, any loan that a lend request whose answer it never got
//     may have made (the answer lost to a network cut after the lender's
//     kernel saw it acknowledged): a config never served is not dropped
//     for a cut between replicas, and its node is told 503, not 404;
//   - a started run's journal line is written to NetBox before its
//     install code is answered, and a served config's status and line as
//     soon as the node acknowledged it, not queued with others, so that a
//     replica killed after it answered or served loses neither (but for
//     the few milliseconds of those writes);
//   - a machine whose waiting run another replica started gets that run's
//     install code from it (provision's Config.PeerCode), so the run is not
//     replaced;
//   - an approver's GET /v1/claims/<serial> gathers the waiting claims of
//     every replica;
//   - the provision loop runs on the replica that holds the Lease
//     fleet-provision (provision.RunLeader).
//
// The peers' API has a listener of its own (FLEET_PEERS_LISTEN), which the
// machines' Service does not expose; the machines' listener does not
// answer its paths. It speaks mutual TLS: a peer is trusted when it
// presents, as its client certificate, the certificate this replica
// serves (the replicas share it; its public key is compared) and the
// peers' token, derived from the sealing key. Either alone is refused
// with 401. A replica, as the client, checks the same of the peer it
// reaches.

// Paths of the peers' API.
const (
	peersPath  = "/v1/peers/"
	lendPath   = peersPath + "lend"
	settlePath = peersPath + "settle"
	claimsPeer = peersPath + "claims/" // + serial
	codePath   = peersPath + "code"
	dropPath   = peersPath + "drop"
)

// A Peer is one replica of fleetd: its name (FLEET_REPLICA) and the https
// URL other replicas reach it at.
type Peer struct {
	Name string
	URL  string
}

// peers is this replica's view of the others, and the loans it made.
type peers struct {
	self   string
	others []Peer
	token  string // the bearer token of the peers' API
	client *http.Client
	log    *slog.Logger

	// loanLife bounds how long a lender holds a loan it made for this
	// replica: the replicas' config write timeout and
	// configserve.DefaultLoanGrace. A borrower hands a loan back, or
	// settles it, until then.
	loanLife time.Duration
	// handingBack bounds the hand-backs under way (maxHandBacks): a
	// flood of fetches while a peer is cut off costs at most that many.
	handingBack chan struct{}

	mu    sync.Mutex
	loans map[string]*configserve.Loan

	nowhere heldNowhere // borrows whose codes no replica held, by source
}

// peersToken derives the peers' bearer token from the sealing key.
func peersToken(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("fleetd peers"))
	return hex.EncodeToString(m.Sum(nil))
}

// newPeers makes this replica's view of its peers. serving returns the
// certificate this replica serves: a peer must present the same one.
func newPeers(self string, all []Peer, key []byte, log *slog.Logger, serving func() *tls.Certificate) *peers {
	p := &peers{self: self, token: peersToken(key), log: log, loans: map[string]*configserve.Loan{},
		loanLife: configserve.DefaultWriteTimeout + configserve.DefaultLoanGrace, handingBack: make(chan struct{}, maxHandBacks)}
	for _, peer := range all {
		if peer.Name != self {
			p.others = append(p.others, peer)
		}
	}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			// The chain is checked by VerifyConnection: the peer's leaf
			// must be the certificate this replica serves.
			InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				own := serving()
				if len(cs.PeerCertificates) == 0 || own == nil || own.Leaf == nil {
					return errors.New("fleetd: a peer presented no certificate")
				}
				if !bytes.Equal(cs.PeerCertificates[0].RawSubjectPublicKeyInfo, own.Leaf.RawSubjectPublicKeyInfo) {
					return fmt.Errorf("fleetd: the peer's certificate (%s) is not the one this replica serves", cs.PeerCertificates[0].Subject)
				}
				return nil
			},
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	// A replica presents the certificate it serves to its peers.
	tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := serving(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil
	}
	p.client = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	return p
}

// peersHandler is the peers' listener's handler: the peers' API alone.
func (d *Daemon) peersHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+lendPath, d.peersOnly(d.handleLend))
	mux.HandleFunc("POST "+settlePath, d.peersOnly(d.handleSettle))
	mux.HandleFunc("GET "+claimsPeer+"{serial}", d.peersOnly(d.handlePeerClaims))
	mux.HandleFunc("POST "+codePath, d.peersOnly(d.handleCode))
	mux.HandleFunc("POST "+dropPath, d.peersOnly(d.handleDrop))
	return mux
}

// dropRequest asks a replica to let go of the config of a run that ended.
type dropRequest struct {
	Run string `json:"run"`
}

// handleDrop lets go of the config this replica holds for a run that was
// replaced, deleted or ended without success.
func (d *Daemon) handleDrop(w http.ResponseWriter, r *http.Request) {
	var req dropRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxPeerBody)).Decode(&req); err != nil || req.Run == "" {
		http.Error(w, "a drop names a run", http.StatusBadRequest)
		return
	}
	d.configs.DropRun(req.Run)
	w.WriteHeader(http.StatusNoContent)
}

// dropTimeout bounds the asks of a drop at the other replicas.
const dropTimeout = 5 * time.Second

// drop asks every other replica at once to let go of run's config; it
// returns the errors of those that did not answer (their config then
// expires at its TTL).
func (p *peers) drop(ctx context.Context, run string) error {
	ctx, cancel := context.WithTimeout(ctx, dropTimeout)
	defer cancel()
	errs := make([]error, len(p.others))
	var wg sync.WaitGroup
	for i, peer := range p.others {
		wg.Go(func() {
			status, err := p.do(ctx, peer, http.MethodPost, dropPath, dropRequest{Run: run}, nil)
			if err == nil && status != http.StatusNoContent {
				err = fmt.Errorf("replica %s: answered %d", peer.Name, status)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// peersTLSConfig is the peers' listener's TLS configuration: the serving
// certificate, and a client certificate asked of every peer (peersOnly
// refuses a request without the right one, with 401).
func (d *Daemon) peersTLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: d.cert.getCertificate,
		ClientAuth:     tls.RequestClientCert,
		NextProtos:     []string{"http/1.1"},
	}
}

// ownCertificate reports whether the client certificate of r is the one
// this replica serves: the same public key.
func (d *Daemon) ownCertificate(r *http.Request) bool {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return false
	}
	c, _ := d.cert.getCertificate(nil)
	own := leafOf(c)
	return own != nil && own.Leaf != nil &&
		bytes.Equal(r.TLS.PeerCertificates[0].RawSubjectPublicKeyInfo, own.Leaf.RawSubjectPublicKeyInfo)
}

// authorized reports whether r carries the peers' token.
func (p *peers) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(p.token)) == 1
}

// lendRequest and its answers are the peers' API's wire types.
type lendRequest struct {
	Code string `json:"code"`
	// Loan is the borrower's name for the loan it asks for: when its
	// request fails, the answer may have been lost on its way after the
	// lender lent the config, and the borrower hands the loan back
	// under this name (a settle, unserved). Empty, or not a loanName:
	// the lender names the loan.
	Loan string `json:"loan,omitempty"`
}

// loanName reports whether s may name a loan: 1 to 64 letters and digits
// (rand.Text makes 26).
func loanName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

type lendAnswer struct {
	Loan       string `json:"loan,omitempty"`
	Config     []byte `json:"config,omitempty"`
	DeviceID   int64  `json:"device_id,omitempty"`
	DeviceName string `json:"device_name,omitempty"`
	Run        string `json:"run,omitempty"`
	// Remaining is how long the lender waits for the loan's settle, from
	// when it answered: a duration, not the lender's clock time, since the
	// replicas' clocks may differ.
	Remaining time.Duration `json:"remaining,omitempty"`
	// Error, on a refusal: not-held, spent (with the device and run),
	// busy, gate-down or not-planned.
	Error string `json:"error,omitempty"`
}

type settleRequest struct {
	Loan   string `json:"loan"`
	Served bool   `json:"served"`
	Peer   string `json:"peer,omitempty"`
}

// Refusals of a lend, as the wire names them.
var lendErrors = map[string]error{
	"not-held":    configserve.ErrNotHeld,
	"busy":        configserve.ErrBusy,
	"gate-down":   configserve.ErrGateDown,
	"not-planned": configserve.ErrNotPlanned,
}

// maxPeerBody bounds a peers' API request and answer body.
const maxPeerBody = 1 << 20

// handleLend lends a config this replica holds to the peer that asks.
func (d *Daemon) handleLend(w http.ResponseWriter, r *http.Request) {
	var req lendRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxPeerBody)).Decode(&req); err != nil || !configserve.ValidCode(req.Code) {
		http.Error(w, "a lend names an install code", http.StatusBadRequest)
		return
	}
	l, err := d.configs.Lend(r.Context(), req.Code)
	var ans lendAnswer
	status := http.StatusOK
	var spent *configserve.SpentError
	switch {
	case err == nil:
		id := req.Loan
		d.peers.mu.Lock()
		if !loanName(id) || d.peers.loans[id] != nil {
			id = rand.Text()
		}
		d.peers.loans[id] = l
		d.peers.mu.Unlock()
		time.AfterFunc(time.Until(l.Deadline)+time.Second, func() {
			d.peers.mu.Lock()
			delete(d.peers.loans, id)
			d.peers.mu.Unlock()
		})
		ans = lendAnswer{Loan: id, Config: l.Config, DeviceID: l.Device.ID, DeviceName: l.Device.Name, Run: l.Run, Remaining: time.Until(l.Deadline)}
	case errors.As(err, &spent):
		status, ans = http.StatusGone, lendAnswer{Error: "spent", DeviceID: spent.Device.ID, DeviceName: spent.Device.Name, Run: spent.Run}
	case errors.Is(err, configserve.ErrNotHeld):
		status, ans.Error = http.StatusNotFound, "not-held"
	case errors.Is(err, configserve.ErrBusy):
		status, ans.Error = http.StatusServiceUnavailable, "busy"
	case errors.Is(err, configserve.ErrGateDown):
		status, ans.Error = http.StatusServiceUnavailable, "gate-down"
	case errors.Is(err, configserve.ErrNotPlanned):
		status, ans.Error = http.StatusConflict, "not-planned"
	default:
		status, ans.Error = http.StatusServiceUnavailable, "closed"
	}
	if l != nil {
		// The loan is out only once the borrower's kernel holds the whole
		// answer; otherwise it is handed back at once (SendLoan).
		body, err := json.Marshal(ans)
		clear(ans.Config)
		if err == nil {
			w.Header().Set("Cache-Control", "no-store")
			err = d.configs.SendLoan(w, r, l, "application/json", body)
			clear(body)
		} else {
			l.Settle(false, "")
		}
		if err != nil {
			d.peers.mu.Lock()
			delete(d.peers.loans, ans.Loan)
			d.peers.mu.Unlock()
			d.log.Warn("fleetd: a lend answer did not reach its replica whole; the config waits again", "run", l.Run, "peer", r.RemoteAddr, "error", err.Error())
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(ans)
}

// handleSettle ends a loan this replica made.
func (d *Daemon) handleSettle(w http.ResponseWriter, r *http.Request) {
	var req settleRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxPeerBody)).Decode(&req); err != nil || req.Loan == "" {
		http.Error(w, "a settle names a loan", http.StatusBadRequest)
		return
	}
	d.peers.mu.Lock()
	l, ok := d.peers.loans[req.Loan]
	delete(d.peers.loans, req.Loan)
	d.peers.mu.Unlock()
	if !ok {
		http.Error(w, "no such loan", http.StatusNotFound)
		return
	}
	l.Settle(req.Served, req.Peer)
	w.WriteHeader(http.StatusNoContent)
}

// codeRequest and codeAnswer ask a replica for the install code of a run
// it started (provision.Provisioner.HeldCode).
type codeRequest struct {
	Run string `json:"run"`
}

type codeAnswer struct {
	Code string `json:"code"` // "": the replica is still starting the run
}

// handleCode answers the install code of a run this replica started, for
// the machine whose attestation reached another replica, or that the run
// is still starting here.
func (d *Daemon) handleCode(w http.ResponseWriter, r *http.Request) {
	var req codeRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxPeerBody)).Decode(&req); err != nil || req.Run == "" {
		http.Error(w, "a code request names a run", http.StatusBadRequest)
		return
	}
	code, ok := d.prov.HeldCode(req.Run)
	if !ok {
		http.Error(w, "no code held for the run", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(codeAnswer{Code: code})
}

// peerCode is provision.Config.PeerCode: the install code of run from the
// replica that started it, asking every other replica at once; "" and
// true when that replica is still starting the run.
func (d *Daemon) peerCode(ctx context.Context, run string) (string, bool) {
	type answer struct {
		code string
		held bool
	}
	answers := make(chan answer, len(d.peers.others))
	for _, peer := range d.peers.others {
		go func() {
			var ans codeAnswer
			status, err := d.peers.do(ctx, peer, http.MethodPost, codePath, codeRequest{Run: run}, &ans)
			if err != nil || status != http.StatusOK {
				answers <- answer{}
				return
			}
			answers <- answer{ans.Code, true}
		}()
	}
	starting := false
	for range d.peers.others {
		a := <-answers
		if a.code != "" {
			return a.code, true
		}
		starting = starting || a.held
	}
	return "", starting
}

// handlePeerClaims answers this replica's own waiting claims of a serial.
func (d *Daemon) handlePeerClaims(w http.ResponseWriter, r *http.Request) {
	claims := d.attest.Waiting(r.PathValue("serial"))
	answer := make([]attest.WaitingClaim, len(claims))
	for i, c := range claims {
		answer[i] = c.Wire()
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(answer)
}

// peersOnly guards the peers' API: the peers' token and the certificate
// this replica serves, both.
func (d *Daemon) peersOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, peersPath)
		if i := strings.IndexByte(path, '/'); i >= 0 {
			path = path[:i]
		}
		if d.peers == nil || !d.peers.authorized(r) || !d.ownCertificate(r) {
			d.metrics.peerRequests.WithLabelValues(path, "refused").Inc()
			d.log.Warn("fleetd: refused a peers' API request", "path", r.URL.Path, "peer", r.RemoteAddr,
				"token", d.peers != nil && d.peers.authorized(r), "certificate", d.ownCertificate(r))
			http.Error(w, "replicas only", http.StatusUnauthorized)
			return
		}
		d.metrics.peerRequests.WithLabelValues(path, "answered").Inc()
		h(w, r)
	}
}

// do sends one request of the peers' API to peer and decodes the answer
// into out (when not nil); it returns the answer's status.
func (p *peers) do(ctx context.Context, peer Peer, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, peer.URL+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rsp, err := p.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("replica %s: %w", peer.Name, err)
	}
	defer rsp.Body.Close()
	if out != nil && strings.HasPrefix(rsp.Header.Get("Content-Type"), "application/json") {
		if err := json.NewDecoder(io.LimitReader(rsp.Body, maxPeerBody)).Decode(out); err != nil {
			return rsp.StatusCode, fmt.Errorf("replica %s: %s: %w", peer.Name, rsp.Status, err)
		}
	}
	return rsp.StatusCode, nil
}

// borrow is configserve.Config.Borrow: it asks every other replica at
// once to lend the config of code, and returns the first loan, or the
// refusal of the replica that holds the config, or ErrNotHeld when every
// replica answered that it holds none, once the node's ask is journaled
// (recordMissing; when it cannot be, that error). A replica that did not
// answer makes it an error (the fetch gets 503 and tries again), since it
// may hold the config, and is asked to hand back, unserved, the loan its
// lost answer may have carried (handBack); a replica that hangs delays
// only fetches of codes no replica that answers holds.
func (d *Daemon) borrow(ctx context.Context, code string) (*configserve.Loan, error) {
	from := fetchFrom(ctx)
	if from.IsValid() && d.peers.nowhere.limited(from, time.Now()) {
		// This address's fetches found their codes held nowhere, again
		// and again: a flood of made-up codes costs the replicas nothing
		// but the tally of its asks.
		if err := d.recordMissing(ctx, from); err != nil {
			return nil, err
		}
		return nil, configserve.ErrNotHeld
	}
	type result struct {
		peer Peer
		ans  lendAnswer
		code int
		err  error
	}
	results := make(chan result, len(d.peers.others))
	for _, peer := range d.peers.others {
		go func() {
			r := result{peer: peer}
			lctx, cancel := context.WithTimeout(ctx, lendTimeout)
			defer cancel()
			name := rand.Text()
			r.code, r.err = d.peers.do(lctx, peer, http.MethodPost, lendPath, lendRequest{Code: code, Loan: name}, &r.ans)
			if r.err != nil {
				// The peer may have lent the config, and its answer been
				// lost on the way (a network cut, or this request's
				// deadline): it would hold the config lent, unread, until
				// the loan's deadline, and then drop it for good, and the
				// node would be told 404 for a config never served. The
				// fetch is told 503, so nothing is served from this
				// loan: it is handed back.
				go d.peers.handBack(peer, name)
			}
			results <- r
		}()
	}
	var unreachable []error
	for left := len(d.peers.others); left > 0; left-- {
		r := <-results
		var loan *configserve.Loan
		var err error
		switch ans := r.ans; {
		case r.err != nil:
			unreachable = append(unreachable, r.err)
			continue
		case r.code == http.StatusOK && ans.Loan != "":
			loan = d.peers.loan(r.peer, ans)
		case ans.Error == "spent":
			err = &configserve.SpentError{Device: configserve.Device{ID: ans.DeviceID, Name: ans.DeviceName}, Run: ans.Run}
		case ans.Error == "not-held":
			continue
		case lendErrors[ans.Error] != nil:
			err = lendErrors[ans.Error]
		default:
			unreachable = append(unreachable, fmt.Errorf("replica %s: answered %d %q", r.peer.Name, r.code, ans.Error))
			continue
		}
		// Only the holder answers more than not-held; should another
		// replica lend too, its loan is handed back unserved.
		if left > 1 {
			go func() {
				for range left - 1 {
					if late := <-results; late.err == nil && late.ans.Loan != "" {
						d.peers.loan(late.peer, late.ans).Settle(false, "")
					}
				}
			}()
		}
		return loan, err
	}
	if len(unreachable) > 0 {
		return nil, errors.Join(unreachable...)
	}
	if from.IsValid() {
		d.peers.nowhere.add(from, time.Now())
		// The node is told 404 next, and does not ask again: its ask is
		// journaled first, or it is told to try again (503).
		if err := d.recordMissing(ctx, from); err != nil {
			return nil, err
		}
	}
	return nil, configserve.ErrNotHeld
}

// loan makes the Loan of a peer's lend answer: its Settle tells the peer.
func (p *peers) loan(peer Peer, ans lendAnswer) *configserve.Loan {
	// The deadline by this replica's clock: the lender's is its own.
	deadline := time.Now().Add(ans.Remaining)
	return configserve.NewLoan(ans.Config, configserve.Device{ID: ans.DeviceID, Name: ans.DeviceName}, ans.Run, deadline,
		func(served bool, node string) {
			// The holder settles only with this answer; it drops a loan it
			// never hears of at its deadline. A settle the network does
			// not carry is tried again until then, in the background.
			req := settleRequest{Loan: ans.Loan, Served: served, Peer: node}
			if err := p.settle(peer, req, deadline); err != nil {
				p.log.Warn("fleetd: could not settle a borrowed config with its replica; trying again until the loan's deadline", "replica", peer.Name, "run", ans.Run, "error", err.Error())
				go p.settleUntil(peer, req, deadline, ans.Run)
			}
		})
}

// handBack settles, unserved, the loan that peer may have made under name
// for a lend request whose answer never arrived, trying until peer
// answers or no loan it made could still be out (loanLife).
func (p *peers) handBack(peer Peer, name string) {
	select {
	case p.handingBack <- struct{}{}:
		defer func() { <-p.handingBack }()
	default:
		p.log.Warn("fleetd: too many lend requests to hand back; a config lent on one may wait out its loan's deadline", "replica", peer.Name)
		return
	}
	p.settleUntil(peer, settleRequest{Loan: name}, time.Now().Add(p.loanLife), "")
}

// maxHandBacks bounds the hand-backs a replica has under way at once.
const maxHandBacks = 256

// Retries of a settle the network did not carry.
const (
	settleRetryFirst = 100 * time.Millisecond
	settleRetryMax   = 2 * time.Second
)

// settleUntil sends req to peer until peer answers it (a settled loan, or
// one it does not know: never made, settled, or lost), or until passes.
func (p *peers) settleUntil(peer Peer, req settleRequest, until time.Time, run string) {
	wait := settleRetryFirst
	for {
		err := p.settle(peer, req, until)
		if err == nil {
			return
		}
		if time.Until(until) <= wait {
			if run != "" {
				p.log.Warn("fleetd: gave up settling a borrowed config with its replica at the loan's deadline", "replica", peer.Name, "run", run, "error", err.Error())
			}
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, settleRetryMax)
	}
}

// settle sends req to peer once; an error means peer did not answer.
func (p *peers) settle(peer Peer, req settleRequest, until time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	_, err := p.do(ctx, peer, http.MethodPost, settlePath, req, nil)
	return err
}

// peerClaims gathers the waiting claims of serial that the other replicas
// hold, asking them at once, and the names of the replicas that did not
// answer.
func (d *Daemon) peerClaims(ctx context.Context, serial string) ([]attest.WaitingClaim, []string) {
	type result struct {
		peer   Peer
		claims []attest.WaitingClaim
		status int
		err    error
	}
	results := make([]result, len(d.peers.others))
	var wg sync.WaitGroup
	for i, peer := range d.peers.others {
		wg.Go(func() {
			r := &results[i]
			r.peer = peer
			r.status, r.err = d.peers.do(ctx, peer, http.MethodGet, claimsPeer+url.PathEscape(serial), nil, &r.claims)
		})
	}
	wg.Wait()
	var all []attest.WaitingClaim
	var missed []string
	for _, r := range results {
		if r.err != nil || r.status != http.StatusOK {
			d.log.Warn("fleet.approve", "serial", serial, "replica", r.peer.Name, "refused", "the replica did not answer", "status", r.status, "error", fmt.Sprint(r.err))
			missed = append(missed, r.peer.Name)
			continue
		}
		all = append(all, r.claims...)
	}
	return all, missed
}

// leafOf parses c's leaf when the tls package left it unparsed.
func leafOf(c *tls.Certificate) *tls.Certificate {
	if c == nil || c.Leaf != nil || len(c.Certificate) == 0 {
		return c
	}
	if leaf, err := x509.ParseCertificate(c.Certificate[0]); err == nil {
		cc := *c
		cc.Leaf = leaf
		return &cc
	}
	return c
}
