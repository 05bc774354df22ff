// Command fleetd is the server side of the runbook "Provision a node": it
// admits machines that prove their TPM's EKs, provisions them with
// Tinkerbell and Talos, and serves each node its config once.
//
//	fleetd            serve, with settings from the environment
//	fleetd -demo      run the whole runbook in process on embedded defaults
//	fleetd -help      list the settings
//
// One HTTPS listener (FLEET_LISTEN) serves:
//
//	POST /attest/claim, /attest/proof   the attestation protocol (package attest)
//	GET  /config/<install code>         the Talos config, once (package configserve)
//	GET  /v1/claims/<serial>            every waiting claim (one per TPM), to approvers only
//
// and a plain HTTP listener (FLEET_METRICS_LISTEN) serves /metrics for
// Prometheus and /healthz. The alert rules in alerts/fleet.rules.yaml fire
// from the metrics.
//
// fleetd writes the runbook's audit lines (attest.verdict, attest.install,
// fleet.render) as JSON on standard error, journals every event on the
// device in NetBox, and runs provision's loop, which picks up the runs in
// flight from the cluster after a restart. SIGINT or SIGTERM shuts it down
// gracefully; configs waiting to be fetched are dropped, by design: they
// hold secrets.
//
// NetBox is written in the background (inventory.JournalQueue), so that
// no fetch or attestation waits for it: a device's status (active once its
// node has its config) in a lane of its own, which holds the latest status wanted per device and
// which no journal line can fill; journal lines in a queue that, when
// full, drops them (counted in fleet_journal_lines_lost_total, and
// logged). Asks for a config fleetd does not hold, which anyone can send,
// are looked up and journaled at most once a minute per address, on the
// device NetBox names at the address, in a line that counts them; asks
// from other addresses are only counted, and never make a metric series
// of their own.
//
// Exit codes: 0 after a clean shutdown (and a demo whose every machine
// ended as expected), 1 on a failure, 2 on bad settings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetkit/fleet/inventory"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleetd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	demo := fs.Bool("demo", false, "run the runbook end to end in process, on embedded defaults, and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: fleetd [-demo]\n\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\n%s", envHelp)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	if *demo {
		return runDemo(ctx, stdout, stderr)
	}
	s, err := readSettings(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "fleetd: %v\n(fleetd -help lists the settings)\n", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	p, err := partsFrom(s, log)
	if err != nil {
		fmt.Fprintf(stderr, "fleetd: %v\n", err)
		return 1
	}
	d, err := newDaemon(s, p)
	if err != nil {
		fmt.Fprintf(stderr, "fleetd: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "fleetd: %v\n", err)
		return 1
	}
	var mln net.Listener
	if s.MetricsListen != "off" {
		if mln, err = net.Listen("tcp", s.MetricsListen); err != nil {
			ln.Close()
			fmt.Fprintf(stderr, "fleetd: %v\n", err)
			return 1
		}
	}
	log.Info("fleetd: serving", "https", ln.Addr().String(), "metrics", s.MetricsListen, "public_url", s.PublicURL)
	if err := d.serve(ctx, ln, mln); err != nil {
		fmt.Fprintf(stderr, "fleetd: %v\n", err)
		return 1
	}
	return 0
}

// partsFrom makes fleetd's parts from its settings: the NetBox client, the
// Kubernetes clients, the nodes file, the secrets bundle and the
// certificate.
func partsFrom(s settings, log *slog.Logger) (parts, error) {
	p := parts{Logger: log}
	topo := s.Topology
	if topo == "" {
		dir := filepath.Dir(s.NodesFile)
		topo = filepath.Join(dir, "cluster-topology.json")
		if _, err := os.Stat(topo); err != nil {
			topo = filepath.Join(dir, "..", "config", "cluster-topology.json")
		}
	}
	inv, err := inventory.Load(s.NodesFile, topo)
	if err != nil {
		return p, err
	}
	p.Inventory = inv
	if p.Bundle, err = secrets.LoadBundle(s.SecretsBundle); err != nil {
		return p, fmt.Errorf("FLEET_SECRETS_BUNDLE: %w", err)
	}
	p.NetBox, err = inventory.NewNetBox(s.NetBoxURL, s.NetBoxToken, &inventory.NetBoxConfig{
		BindingAuthor: s.BindingAuthor,
		Switch:        s.NetBoxSwitch,
		Logger:        log,
	})
	if err != nil {
		return p, err
	}
	tinkCfg, err := kubeconfig(s.TinkerbellKubeconfig)
	if err != nil {
		return p, fmt.Errorf("TINKERBELL_KUBECONFIG: %w", err)
	}
	if p.Tink, err = dynamic.NewForConfig(tinkCfg); err != nil {
		return p, err
	}
	clusterCfg, err := kubeconfig(s.ClusterKubeconfig)
	if err != nil {
		return p, fmt.Errorf("CLUSTER_KUBECONFIG: %w", err)
	}
	if p.Kube, err = kubernetes.NewForConfig(clusterCfg); err != nil {
		return p, err
	}
	p.Cert, err = newCertReloader(s.TLSCert, s.TLSKey, log.Warn)
	return p, err
}

// Client-side rate limits of fleetd's Kubernetes clients. client-go's
// defaults (5 requests per second, bursts of 10) would hold a boot storm
// to under one machine per second: each admission makes about 8 requests
// (Hardware and bmc Machine, read and created; the bootstrap token's
// Secret; the Workflow, and lists of the device's Workflows; the Template
// is created once and shared). These limits leave the pace to
// the kube-apiserver, whose API Priority and Fairness answers 429 with
// Retry-After when it is saturated, which client-go honours.
const (
	kubeQPS   = 3000
	kubeBurst = 6000
)

// kubeconfig loads a kubeconfig file, or the in-cluster configuration when
// path is "", with fleetd's client-side rate limits (kubeQPS, kubeBurst).
func kubeconfig(path string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = kubeQPS, kubeBurst
	return cfg, nil
}
