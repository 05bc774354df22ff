package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/siderolabs/talos/pkg/machinery/config/generate/secrets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetkit/fleet/internal/buildinfo"
	"github.com/fleetkit/fleet/inventory"
)

// Main runs fleetd with the command-line arguments args (without the
// program's name) and the settings getenv reads, until ctx is done, and
// returns its exit code: 0 after a clean shutdown, 1 on a failure, 2 on bad
// settings. With -version it prints the build's version line
// (buildinfo.Info) on stdout and returns 0 without reading a setting.
// fleetd's first log line, "fleetd: starting", carries the same fields.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleetd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: fleetd [-version]\n\n  -version                print the version, the commit and the Go release, and exit\n\n%s", envHelp)
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
	build := buildinfo.Read()
	if *version {
		fmt.Fprintf(stdout, "fleetd %s\n", build)
		return 0
	}
	s, err := readSettings(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "fleetd: %v\n(fleetd -help lists the settings)\n", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	log.LogAttrs(ctx, slog.LevelInfo, "fleetd: starting", build.Attrs()...)
	p, err := partsFrom(s, log)
	if err != nil {
		fmt.Fprintf(stderr, "fleetd: %v\n", err)
		return 1
	}
	d, err := New(s, p)
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
	lns := Listeners{HTTPS: ln, Metrics: mln}
	if s.Replica != "" {
		if lns.Peers, err = net.Listen("tcp", s.PeersListen); err != nil {
			lns.close()
			fmt.Fprintf(stderr, "fleetd: %v\n", err)
			return 1
		}
	}
	log.Info("fleetd: serving", "https", ln.Addr().String(), "metrics", s.MetricsListen, "peers", s.PeersListen, "public_url", s.PublicURL)
	if err := d.Serve(ctx, lns); err != nil {
		fmt.Fprintf(stderr, "fleetd: %v\n", err)
		return 1
	}
	return 0
}

// partsFrom makes fleetd's parts from its settings: the NetBox client, the
// Kubernetes clients, the nodes file, the secrets bundle and the
// certificate; and the record of NetBox's and Tinkerbell's API server's
// answers, which their clients' transports feed.
func partsFrom(s Settings, log *slog.Logger) (Parts, error) {
	p := Parts{Logger: log, Answers: &Answers{}}
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
	netboxHTTP := &http.Client{Transport: p.Answers.NetBoxTransport(http.DefaultTransport)}
	p.NetBox, err = inventory.NewNetBox(s.NetBoxURL, s.NetBoxToken, &inventory.NetBoxConfig{
		BindingAuthor: s.BindingAuthor,
		Switch:        s.NetBoxSwitch,
		Logger:        log,
		HTTPClient:    netboxHTTP,
	})
	if err != nil {
		return p, err
	}
	p.Answers.AskNetBox = AskNetBox(netboxHTTP, s.NetBoxURL, s.NetBoxToken)
	tinkCfg, err := Kubeconfig(s.TinkerbellKubeconfig)
	if err != nil {
		return p, fmt.Errorf("TINKERBELL_KUBECONFIG: %w", err)
	}
	tinkCfg.Wrap(p.Answers.APIServerTransport)
	if p.Tink, err = dynamic.NewForConfig(tinkCfg); err != nil {
		return p, err
	}
	tinkTyped, err := kubernetes.NewForConfig(tinkCfg)
	if err != nil {
		return p, err
	}
	p.Leases = tinkTyped.CoordinationV1()
	p.Answers.AskAPIServer = func(ctx context.Context) {
		tinkTyped.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx)
	}
	clusterCfg, err := Kubeconfig(s.ClusterKubeconfig)
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
// to under one machine per second: each admission of a new machine makes 5
// requests (Hardware and bmc Machine created, the bootstrap token's
// Secret, a list of the device's Workflows, the Workflow; the Template is
// created once and shared), and a replica's attestation one more (its
// spent session's Lease). These limits leave the pace to
// the kube-apiserver, whose API Priority and Fairness answers 429 with
// Retry-After when it is saturated, which client-go honours.
const (
	kubeQPS   = 3000
	kubeBurst = 6000
)

// Kubeconfig loads a kubeconfig file, or the in-cluster configuration when
// path is "", with fleetd's client-side rate limits (kubeQPS, kubeBurst).
func Kubeconfig(path string) (*rest.Config, error) {
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
