package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fleetkit/fleet/configserve"
)

// A peerCut stands between one replica and another's peers' API, as the
// network between them: up, it forwards each connection both ways; with
// takeAnswer set, it forwards the next request to the lender, reads the
// whole answer (so the lender's kernel sees every byte acknowledged),
// and resets the borrower's connection instead of passing the answer on,
// then stays down; down, it resets every connection it takes, as a
// network cut does to the borrower's retries.
type peerCut struct {
	ln net.Listener

	mu         sync.Mutex
	to         string // the lender's peers' API
	takeAnswer bool
	down       bool
	taken      int // answers read and not passed on
}

func newPeerCut(t *testing.T) *peerCut {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &peerCut{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go c.serve()
	return c
}

func (c *peerCut) set(f func(c *peerCut)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}

func (c *peerCut) serve() {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		go c.carry(conn.(*net.TCPConn))
	}
}

func (c *peerCut) carry(conn *net.TCPConn) {
	c.mu.Lock()
	down, take, to := c.down, c.takeAnswer, c.to
	c.takeAnswer = false
	c.mu.Unlock()
	if down {
		conn.SetLinger(0)
		conn.Close()
		return
	}
	up, err := net.Dial("tcp", to)
	if err != nil {
		conn.Close()
		return
	}
	defer up.Close()
	go func() {
		io.Copy(up, conn)
		up.(*net.TCPConn).CloseWrite()
	}()
	if !take {
		io.Copy(conn, up)
		conn.Close()
		return
	}
	// The lender answers and closes (a lend answer is the connection's
	// last); every byte of it was read here, and none reaches the
	// borrower, whose connection the cut resets.
	io.Copy(io.Discard, up)
	c.set(func(c *peerCut) { c.taken++; c.down = true })
	conn.SetLinger(0)
	conn.Close()
}

// peersAsReplica serves h as a replica's peers' API is served, over
// plain HTTP here: each request carries, as its client certificate, the
// certificate the replica serves (the replicas share it), which a
// peers' listener would have checked in the TLS handshake.
func peersAsReplica(d *Daemon, h http.Handler) http.Handler {
	c, _ := d.cert.getCertificate(nil)
	leaf := leafOf(c).Leaf
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}
		h.ServeHTTP(w, r)
	})
}

// fetchStatus GETs a config URL with c as a node does, reading the whole
// answer.
func fetchStatus(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	rsp, err := c.Get(url)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	defer rsp.Body.Close()
	if _, err := io.Copy(io.Discard, rsp.Body); err != nil {
		t.Fatalf("fetch: reading the answer: %v", err)
	}
	return rsp.StatusCode
}

// The partition fault's 404, in process. Replica fleetd-0 holds w-01's
// config; the node's fetch reaches fleetd-1, which asks fleetd-0 to lend
// it. fleetd-0 lends it, and its answer is acknowledged (by the link
// that carries it), but the cut takes it: fleetd-1 sees its request fail
// and tells the node 503, and the link stays down for a while. fleetd-0
// holds the config lent, to a borrower that never got it. Before the
// fix, fleetd-0 waited out the loan's deadline and then dropped the
// config (Lost): the node's next fetch, at any replica, was told 404,
// which it takes as final, for a config that was never served. The
// borrower whose lend request failed now hands back whatever it may have
// been lent, trying until the lender hears it: once the link is back,
// the config waits again, and the node's next fetch gets it.
func TestLendAnswerTakenByCutHandedBack(t *testing.T) {
	r := newCutReplicas(t)
	lender, cut, url := r.lender, r.cut, r.url

	// The cut takes the lend answer.
	cut.set(func(c *peerCut) { c.takeAnswer = true })
	if got := fetchStatus(t, http.DefaultClient, url); got != http.StatusServiceUnavailable {
		t.Fatalf("the fetch whose lend answer the cut took: %d, want 503", got)
	}
	cut.mu.Lock()
	taken := cut.taken
	cut.mu.Unlock()
	lender.peers.mu.Lock()
	out := len(lender.peers.loans)
	lender.peers.mu.Unlock()
	if taken != 1 || out != 1 {
		t.Fatalf("answers taken by the cut: %d, loans out at the lender: %d; want 1 and 1", taken, out)
	}

	// While the link is down, the node's next fetch is told 503 too.
	if got := fetchStatus(t, http.DefaultClient, url); got != http.StatusServiceUnavailable {
		t.Fatalf("a fetch while the link is down: %d, want 503", got)
	}

	// The link comes back. The node asks again until it is answered
	// otherwise than 503, for as long as the lender could hold the loan
	// and a little more: it must get its config, never 404.
	cut.set(func(c *peerCut) { c.down = false })
	statuses := fetchPast503(t, url, time.Now().Add(cutWriteTimeout+configserve.DefaultLoanGrace+10*time.Second))
	if got := statuses[len(statuses)-1]; got != http.StatusOK {
		t.Errorf("the node's fetches after the cut were answered %v; want 503s, then its config (200)", statuses)
	}
	// Asked again, the lender (once the borrower's settle reached it)
	// says the code was served.
	if got := fetchStatus(t, http.DefaultClient, url); got != http.StatusGone {
		t.Errorf("a fetch after the config was served: %d, want 410", got)
	}
	if n := lender.configs.Waiting(); n != 0 {
		t.Errorf("the lender still holds %d configs after the node got its own", n)
	}
}

// A borrower whose settle the cut takes tries it again until the loan's
// deadline. fleetd-1 borrows w-01's config from fleetd-0, and its node
// does not take it (it left): fleetd-1 settles the loan unserved while
// the link is down. Before the fix the settle was tried once, fleetd-0
// dropped the config at the loan's deadline, and the node was told 404;
// now the settle reaches fleetd-0 once the link is back, the config
// waits again, and the node's next fetch gets it.
func TestSettleTakenByCutTriedAgain(t *testing.T) {
	r := newCutReplicas(t)
	borrower, cut := r.borrower, r.cut

	// The borrow, as a fetch at fleetd-1 makes it.
	l, err := borrower.borrow(context.Background(), r.code)
	if err != nil || l.Run != cutRun {
		t.Fatalf("borrow = %+v, %v; want the loan of %s", l, err, cutRun)
	}
	// The node left; the link is down as the loan is settled unserved.
	cut.set(func(c *peerCut) { c.down = true })
	l.Settle(false, "")
	cut.set(func(c *peerCut) { c.down = false })

	statuses := fetchPast503(t, r.url, l.Deadline.Add(10*time.Second))
	if got := statuses[len(statuses)-1]; got != http.StatusOK {
		t.Errorf("the node's fetches after its loan was settled across the cut were answered %v; want its config (200)", statuses)
	}
}

// fetchPast503 fetches url as a node does while it is told 503 (try
// again), every 200 ms, and returns every answer, the last one other than
// 503; still 503 past deadline fails t.
func fetchPast503(t *testing.T, url string, deadline time.Time) []int {
	t.Helper()
	var statuses []int
	for {
		got := fetchStatus(t, http.DefaultClient, url)
		statuses = append(statuses, got)
		if got != http.StatusServiceUnavailable {
			return statuses
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node was told 503 until past the loan's deadline: %v", statuses)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cutReplicas are two replicas in process: fleetd-0 (the lender) holds
// w-01's config under code, and fleetd-1 (the borrower) reaches
// fleetd-0's peers' API through cut; url is the config's URL at
// fleetd-1, where the node's fetches go.
type cutReplicas struct {
	lender, borrower *Daemon
	cut              *peerCut
	code, url        string
}

// cutWriteTimeout is the replicas' config write timeout: a loan lives
// for it and configserve.DefaultLoanGrace.
const cutWriteTimeout = 2 * time.Second

// cutRun is the run whose config the lender holds.
const cutRun = "provision-w-01-1767225600"

func newCutReplicas(t *testing.T) cutReplicas {
	t.Helper()
	w := newMemWorld(t, "w-01")
	cut := newPeerCut(t)
	writeTimeout := func(s *Settings) { s.ConfigWriteTimeout = cutWriteTimeout }
	lender, _ := w.fleetd(t, writeTimeout, replica("fleetd-0", Peer{Name: "fleetd-0", URL: "http://127.0.0.1:1"}, Peer{Name: "fleetd-1", URL: "http://127.0.0.1:2"}))
	borrower, _ := w.fleetd(t, writeTimeout, replica("fleetd-1", Peer{Name: "fleetd-0", URL: "http://" + cut.ln.Addr().String()}, Peer{Name: "fleetd-1", URL: "http://127.0.0.1:2"}))
	// serve serves h as d's config server is served, until t ends.
	serve := func(d *Daemon, h http.Handler) *httptest.Server {
		srv := httptest.NewUnstartedServer(h)
		if err := d.configs.ConfigureServer(srv.Config); err != nil {
			t.Fatal(err)
		}
		srv.Start()
		t.Cleanup(srv.Close)
		return srv
	}
	peersSrv := serve(lender, peersAsReplica(lender, lender.peersHandler()))
	cut.set(func(c *peerCut) { c.to = peersSrv.Listener.Addr().String() })
	nodeSrv := serve(borrower, withFetchFrom(borrower.configs))

	dev := w.devices["w-01"]
	code := configserve.NewCode()
	if err := lender.configs.Put(code, []byte("machine: {}\n"), configserve.Device{ID: dev.ID, Name: dev.Name}, cutRun); err != nil {
		t.Fatal(err)
	}
	url := nodeSrv.URL + configserve.PathPrefix + code
	return cutReplicas{lender: lender, borrower: borrower, cut: cut, code: code, url: url}
}
