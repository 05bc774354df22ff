package daemon

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"golang.org/x/sync/semaphore"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/spentlease"
	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/lldpwait"
	"github.com/fleetkit/fleet/provision"
)

// Parts are what fleetd composes: made from the settings by Main, or in
// process by package sim, for the demo and the tests. Every part but Logger
// is required.
type Parts struct {
	NetBox    *inventory.NetBox
	Kube      kubernetes.Interface // the cluster nodes join: bootstrap tokens
	Tink      dynamic.Interface    // Tinkerbell's and Rufio's objects
	Inventory *inventory.Inventory // the nodes file: classes, topology
	Bundle    *secrets.Bundle
	Cert      *CertReloader
	Logger    *slog.Logger // audit lines, as JSON; nil: none
	// Leases reaches Leases in Tinkerbell's cluster: the leader's Lease
	// and the spent attestation sessions of replicas. Required with
	// Settings.Replica, unused without it.
	Leases coordinationclient.LeasesGetter
	// Answers records when NetBox and Tinkerbell's API server last
	// answered, for /readyz: NetBox's and Tink's transports wrapped with
	// it, and its asks set (Main's are). nil: nothing is recorded, and
	// /readyz says neither answered.
	Answers *Answers
}

// A Daemon is one fleetd: the attestation server, the config service, the
// provisioner and the approver API over one HTTPS listener, metrics over
// another.
type Daemon struct {
	s        Settings
	log      *slog.Logger
	nb       *inventory.NetBox
	tink     dynamic.Interface
	inv      *inventory.Inventory
	attest   *attest.Server
	configs  *configserve.Server
	prov     *provision.Provisioner
	metrics  *metrics
	cert     *CertReloader
	ready    *readiness
	ports    *lldpwait.PortConfig
	journal  *inventory.JournalQueue
	devices  *inventory.AddressBook
	refusals *inventory.RefusalJournal
	asks     *askers // asks for configs fleetd does not hold, by address
	// missingNow bounds the missing lines a replica writes at once, in the
	// fetch that was told 404 (missing).
	missingNow chan struct{}
	bound      boundDevices
	// admitting lets Settings.MaxAdmissions admissions run at once, the
	// others waiting first come, first served.
	admitting *semaphore.Weighted

	approverCAs *x509.CertPool

	// Replicas (Settings.Replica): the other replicas, the Leases, and
	// the spent sessions the leader collects.
	peers  *peers
	leases coordinationclient.LeasesGetter
	spent  *spentlease.Store
}

// New makes a fleetd from its settings and parts; Serve runs it.
func New(s Settings, p Parts) (_ *Daemon, err error) {
	if p.NetBox == nil || p.Kube == nil || p.Tink == nil || p.Inventory == nil || p.Bundle == nil || p.Cert == nil {
		return nil, errors.New("fleetd: a part is missing")
	}
	if s.Replica != "" && p.Leases == nil {
		return nil, errors.New("fleetd: a replica needs a Leases client")
	}
	log := p.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{
		s: s, log: log, nb: p.NetBox, tink: p.Tink, inv: p.Inventory, cert: p.Cert,
		ports:      &lldpwait.PortConfig{Rules: lldpwait.DefaultRules()},
		devices:    inventory.NewAddressBook(p.NetBox, nil),
		asks:       newAskers(askEvery, AskPeers),
		missingNow: make(chan struct{}, missingNowMax),

		admitting: semaphore.NewWeighted(int64(orDefault(s.MaxAdmissions, defaultMaxAdmissions))),
		ready:     &readiness{answers: cmp.Or(p.Answers, &Answers{}), cert: p.Cert, window: orDefault(s.ReadyWindow, defaultReadyWindow), now: time.Now},
	}
	var borrow func(context.Context, string) (*configserve.Loan, error)
	var peerCode func(context.Context, string) (string, bool)
	attestCfg := &attest.Config{Admit: d.admit, Judged: d.judged, Logger: log}
	if s.Replica != "" {
		d.leases = p.Leases
		d.peers = newPeers(s.Replica, s.Peers, s.SealingKey, log, func() *tls.Certificate {
			c, _ := p.Cert.getCertificate(nil)
			return leafOf(c)
		})
		d.peers.loanLife = cmp.Or(s.ConfigWriteTimeout, configserve.DefaultWriteTimeout) + configserve.DefaultLoanGrace
		borrow, peerCode = d.borrow, d.peerCode
		if d.spent, err = spentlease.New(p.Leases, cmp.Or(s.Namespace, "tinkerbell"), s.Replica); err != nil {
			return nil, err
		}
		attestCfg.SealingKey, attestCfg.Spent = s.SealingKey, d.spent
	}
	if s.ApproverCA != "" {
		pool, err := loadCAs(s.ApproverCA)
		if err != nil {
			return nil, err
		}
		d.approverCAs = pool
	}

	configs, err := configserve.New(gate{p.NetBox}, &configserve.Config{
		TTL:          s.ConfigTTL,
		WriteTimeout: s.ConfigWriteTimeout,
		Name:         "fleetd", // the runbook's lines
		GateName:     "NetBox",
		Logger:       log,
		Events:       d.configEvent,
		Borrow:       borrow,
	})
	if err != nil {
		return nil, err
	}
	d.configs = configs
	d.metrics = newMetrics(p.Cert.expiry, configs.Waiting)
	d.journal = inventory.NewJournalQueue(p.NetBox, &inventory.JournalQueueConfig{
		Logger:           log,
		Lost:             d.metrics.journalLost.Inc,
		StatusLost:       d.metrics.statusLost.Inc,
		StatusLostAction: statusLostAction,
	})
	d.refusals = inventory.NewRefusalJournal(p.NetBox, d.journal, &inventory.RefusalJournalConfig{Name: "fleetd"})
	// A daemon that cannot be built stops what it started.
	defer func() {
		if err != nil {
			d.release(context.Background())
		}
	}()

	topo := p.Inventory.Topology
	// One fleetd queues a started run's journal line, to write it with
	// others in one request. A replica writes it before the install code
	// is answered: a replica killed with the line still queued would lose
	// it, while the run it names goes on under another replica's loop. A
	// line NetBox does not take then goes to the queue (unwritten).
	var journalLater, journalUnwritten func(int64, inventory.JournalKind, string)
	if s.Replica == "" {
		journalLater = d.journal.Line
	} else {
		journalUnwritten = d.unwritten
	}
	d.prov, err = provision.New(provision.Deps{NetBox: p.NetBox, Kube: p.Kube, Tink: p.Tink, Configs: configsOf{srv: configs, peers: d.peers}}, provision.Cluster{
		Name:              clusterName(p.Inventory),
		Endpoint:          "https://" + net.JoinHostPort(topo.APIServerIP.String(), "6443"),
		FirstControlPlane: topo.APIServerIP,
		Bundle:            p.Bundle,
		ControlPlanes:     s.ControlPlanes,
		Classes:           p.Inventory.Classes,
	}, &provision.Config{
		Namespace:     s.Namespace,
		BMCSecret:     s.BMCSecret,
		AutoProvision: s.AutoProvision,
		ConfigTTL:     s.ConfigTTL,
		Interval:      s.PollInterval,
		GlobalTimeout: s.RunTimeout,
		PortCheck: func(declared, recorded int) error {
			return lldpwait.CheckRecorded(recorded, declared)
		},
		BootedHookOSAfterInstall: func(node string) { stamp(d.metrics.bootedHookOS, node, time.Now()) },
		RunStarted:               d.metrics.runStarted,
		RunEnded:                 d.metrics.runEnded,
		JournalLater:             journalLater,
		JournalUnwritten:         journalUnwritten,
		PeerCode:                 peerCode,
		Shared:                   s.Replica != "",
		Logger:                   log,
	})
	if err != nil {
		return nil, err
	}
	d.attest, err = attest.NewServer(bindings{d}, attestCfg)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// orDefault is v, or def when v is zero.
func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// clusterName is the topology's CLUSTER_NAME, or "cluster".
func clusterName(inv *inventory.Inventory) string {
	if inv.Topology.Name != "" {
		return inv.Topology.Name
	}
	return "cluster"
}

// Paths of the HTTPS listener.
const (
	attestPath = "/attest/"
	ClaimsPath = "/v1/claims/" // the approver API: GET ClaimsPath+serial
)

// handler is the HTTPS listener's handler: what machines and approvers
// reach. The peers' API is not on it (peersHandler).
func (d *Daemon) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(attestPath, d.attest)
	mux.Handle(configserve.PathPrefix, withFetchFrom(d.configs))
	mux.HandleFunc("GET "+ClaimsPath+"{serial}", d.claim)
	return mux
}

// MetricsHandler serves /metrics, /healthz (liveness: the process serves)
// and /readyz (readiness, ready.go).
func (d *Daemon) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", d.readyz)
	return mux
}

// tlsConfig is the HTTPS listener's TLS configuration: HTTP/1.1 only (the
// config service counts a config served only when the node's kernel
// acknowledged every byte of its own connection), and approvers' client
// certificates verified when one is presented.
func (d *Daemon) tlsConfig() *tls.Config {
	c := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: d.cert.getCertificate,
		NextProtos:     []string{"http/1.1"},
	}
	if d.approverCAs != nil {
		c.ClientAuth = tls.VerifyClientCertIfGiven
		c.ClientCAs = d.approverCAs
	}
	return c
}

// Listeners are what a Daemon serves on.
type Listeners struct {
	// HTTPS serves machines and approvers: the attestation protocol, the
	// config service and the approver API (FLEET_LISTEN). Required.
	HTTPS net.Listener
	// Metrics serves /metrics, /healthz and /readyz
	// (FLEET_METRICS_LISTEN); nil: none.
	Metrics net.Listener
	// Peers serves the peers' API, over mutual TLS, to the other replicas
	// alone (FLEET_PEERS_LISTEN). Required for a replica, unused without
	// one.
	Peers net.Listener
}

func (l Listeners) close() {
	for _, ln := range []net.Listener{l.HTTPS, l.Metrics, l.Peers} {
		if ln != nil {
			ln.Close()
		}
	}
}

// Serve runs fleetd on the listeners until ctx ends, then shuts down
// gracefully: no new requests, those in flight finish (up to 30 s), the
// provisioner's loop stops, waiting configs are dropped, and queued journal
// lines are written.
func (d *Daemon) Serve(ctx context.Context, lns Listeners) error {
	if d.peers != nil && lns.Peers == nil {
		lns.close()
		d.release(context.WithoutCancel(ctx))
		return errors.New("fleetd: a replica needs a listener for the peers' API")
	}
	err := ensureTemplates(ctx, d.tink, d.s.Namespace, d.s.Images, d.log)
	if err != nil {
		lns.close()
		d.release(context.WithoutCancel(ctx))
		if ctx.Err() != nil {
			return nil // stopped while starting: a clean stop
		}
		return err
	}
	// A client has readTimeout for its TLS handshake, and readTimeout for
	// each request, headers and body: one that trickles bytes is cut off.
	// At most maxConns connections are served; more wait in the kernel's
	// accept queue, so a flood of idle connections holds a slot for at most
	// readTimeout each.
	readTimeout, maxConns := orDefault(d.s.ReadTimeout, defaultReadTimeout), orDefault(d.s.MaxConns, defaultMaxConns)
	hs := &http.Server{
		Handler:           d.handler(),
		TLSConfig:         d.tlsConfig(),
		ReadHeaderTimeout: readTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
	}
	// HTTP/1.1 only, each connection recorded for the config service.
	if err := d.configs.ConfigureServer(hs); err != nil {
		lns.close()
		d.release(context.WithoutCancel(ctx))
		return err
	}
	var ms, ps *http.Server
	errc := make(chan error, 3)
	go func() { errc <- hs.Serve(tls.NewListener(newCapListener(lns.HTTPS, maxConns), hs.TLSConfig)) }()
	if d.peers != nil {
		ps = &http.Server{
			Handler:           d.peersHandler(),
			TLSConfig:         d.peersTLSConfig(),
			ReadHeaderTimeout: readTimeout,
			ReadTimeout:       readTimeout,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
		}
		// A lend answer counts as sent once the borrower's kernel holds
		// it whole (configserve's SendLoan): connections are recorded.
		if err := d.configs.ConfigureServer(ps); err != nil {
			hs.Close()
			lns.close()
			d.release(context.WithoutCancel(ctx))
			return err
		}
		go func() { errc <- ps.Serve(tls.NewListener(lns.Peers, ps.TLSConfig)) }()
	}
	if metricsLn := lns.Metrics; metricsLn != nil {
		ms = &http.Server{
			Handler:           d.MetricsHandler(),
			ReadHeaderTimeout: readTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
		}
		go func() { errc <- ms.Serve(metricsLn) }()
	}
	askCtx, stopAsking := context.WithCancel(ctx)
	var asking sync.WaitGroup
	asking.Go(func() { d.ready.ask(askCtx) })
	loopCtx, stopLoop := context.WithCancel(context.WithoutCancel(ctx))
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		if err := d.runLoop(loopCtx); err != nil && !errors.Is(err, context.Canceled) {
			d.log.Error("fleetd: the provision loop stopped", "error", err.Error())
		}
	}()

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	d.log.Info("fleetd: shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if e := hs.Shutdown(shutCtx); e != nil && err == nil {
		err = e
	}
	if ms != nil {
		ms.Shutdown(shutCtx)
	}
	if ps != nil {
		ps.Shutdown(shutCtx)
	}
	stopLoop()
	stopAsking()
	asking.Wait()
	<-loopDone
	d.release(shutCtx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// runLoop runs the provision loop: alone, or, for a replica, while it
// holds the Lease, collecting spent sessions meanwhile.
func (d *Daemon) runLoop(ctx context.Context) error {
	if d.peers == nil {
		d.metrics.leader.Set(1)
		defer d.metrics.leader.Set(0)
		return d.prov.Run(ctx)
	}
	var stopCollect context.CancelFunc
	var collecting sync.WaitGroup
	defer collecting.Wait()
	return d.prov.RunLeader(ctx, provision.Leader{
		Leases:   d.leases,
		Identity: d.s.Replica,
		Elected: func(leading bool) {
			if leading {
				d.metrics.leader.Set(1)
				var cctx context.Context
				cctx, stopCollect = context.WithCancel(ctx)
				collecting.Go(func() { d.collectSpent(cctx) })
				return
			}
			d.metrics.leader.Set(0)
			if stopCollect != nil {
				stopCollect()
				collecting.Wait()
			}
		},
	})
}

// collectEvery is how often the leader deletes the Leases of expired
// attestation sessions.
const collectEvery = time.Minute

// collectSpent deletes expired spent sessions every collectEvery until ctx
// ends.
func (d *Daemon) collectSpent(ctx context.Context) {
	t := time.NewTicker(collectEvery)
	defer t.Stop()
	for {
		if n, err := d.spent.Collect(ctx, time.Now()); err != nil && ctx.Err() == nil {
			d.log.Warn("fleetd: collecting spent attestation sessions", "error", err.Error())
		} else if n > 0 {
			d.log.Debug("fleetd: collected spent attestation sessions", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// release stops what New started: it drops the waiting configs, and
// writes the queued journal lines until ctx ends.
func (d *Daemon) release(ctx context.Context) {
	d.configs.Close()
	d.journal.Close(ctx)
}

// Handler is the HTTPS listener's handler: the attestation protocol, the
// config service and the approver API.
func (d *Daemon) Handler() http.Handler { return d.handler() }

// Attest is fleetd's attestation server.
func (d *Daemon) Attest() *attest.Server { return d.attest }

// Journal is the queue of fleetd's writes to NetBox.
func (d *Daemon) Journal() *inventory.JournalQueue { return d.journal }

// TrackedAsks is the number of addresses tracked for asks of configs fleetd
// does not hold, and of those, the number not known as a device's.
func (d *Daemon) TrackedAsks() (all, others int) { return d.asks.tracked() }
