package daemon

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetkit/fleet/examples/templates"
	"github.com/fleetkit/fleet/internal/secretenv"
)

// Settings is fleetd's configuration, read from the environment. Each
// secret setting, NETBOX_TOKEN, FLEET_APPROVER_TOKEN and FLEET_SEALING_KEY,
// may come instead from the file its _FILE form names (package
// secretenv's rules).
type Settings struct {
	Listen        string // FLEET_LISTEN
	MetricsListen string // FLEET_METRICS_LISTEN
	TLSCert       string // FLEET_TLS_CERT
	TLSKey        string // FLEET_TLS_KEY
	PublicURL     string // FLEET_PUBLIC_URL

	// ReadTimeout bounds the time a client has to send a whole request,
	// headers and body (FLEET_READ_TIMEOUT); MaxConns the connections
	// served at once (FLEET_MAX_CONNECTIONS). Zero: the defaults.
	ReadTimeout time.Duration
	MaxConns    int
	// MaxAdmissions is how many attested machines are admitted at once
	// (FLEET_MAX_ADMISSIONS); more wait their turn. Zero: the default.
	MaxAdmissions int
	// ReadyWindow is how recently NetBox and Tinkerbell's API server must
	// have answered for /readyz to answer 200 (FLEET_READY_WINDOW; at
	// least 1s). Zero: 1m.
	ReadyWindow time.Duration

	ConfigTTL time.Duration // FLEET_CONFIG_TTL
	// ConfigWriteTimeout bounds one answer that carries a config, from its
	// first byte until the node's kernel acknowledged its last
	// (FLEET_CONFIG_WRITE_TIMEOUT; configserve.Config.WriteTimeout). Zero:
	// 30 s.
	ConfigWriteTimeout time.Duration
	// PollInterval is how often fleetd reads its runs' Workflows and the
	// devices that want an action (FLEET_POLL_INTERVAL;
	// provision.Config.Interval). Zero: 15 s.
	PollInterval time.Duration
	// RunTimeout is a run's global timeout while its Workflow reports none
	// (FLEET_RUN_TIMEOUT; provision.Config.GlobalTimeout). Zero: 2 h.
	RunTimeout time.Duration

	AutoProvision bool   // FLEET_AUTO_PROVISION
	ControlPlanes bool   // FLEET_CONTROL_PLANES
	SecretsBundle string // FLEET_SECRETS_BUNDLE

	NodesFile string // FLEET_NODES
	Topology  string // FLEET_TOPOLOGY

	NetBoxURL     string // NETBOX_URL
	NetBoxToken   string // NETBOX_TOKEN or NETBOX_TOKEN_FILE
	BindingAuthor string // FLEET_BINDING_AUTHOR
	NetBoxSwitch  string // NETBOX_SWITCH

	TinkerbellKubeconfig string // TINKERBELL_KUBECONFIG
	ClusterKubeconfig    string // CLUSTER_KUBECONFIG
	Namespace            string // TINKERBELL_NAMESPACE

	// Images are the images of the Templates' actions
	// (FLEET_IMAGE_WIPE_DISK, FLEET_IMAGE_INSTALL, FLEET_IMAGE_NEXT_BOOT,
	// FLEET_IMAGE_REBOOT). A zero field: the released image
	// (templates.DefaultImages).
	Images templates.Images
	// BMCSecret names the Secret in Namespace that holds the BMC's
	// username and password, which each Rufio Machine refers to
	// (FLEET_BMC_SECRET; provision.Config.BMCSecret). "": bmc-auth.
	BMCSecret string

	ApproverToken string // FLEET_APPROVER_TOKEN or FLEET_APPROVER_TOKEN_FILE
	ApproverCA    string // FLEET_APPROVER_CA

	// Replica names this replica among several (FLEET_REPLICA); "": fleetd
	// runs alone. Peers are every replica, this one included
	// (FLEET_PEERS), and SealingKey the 32-byte key they all seal
	// attestation sessions with (FLEET_SEALING_KEY or
	// FLEET_SEALING_KEY_FILE): both are required
	// with a Replica, and refused without one.
	Replica    string
	Peers      []Peer
	SealingKey []byte
	// PeersListen is the address of the peers' API (FLEET_PEERS_LISTEN,
	// default :8444), a replica's alone.
	PeersListen string
}

// Defaults of the settings that bound what a client may hold.
const (
	defaultReadTimeout = 10 * time.Second
	defaultMaxConns    = 4096
	// defaultMaxAdmissions: an admission makes about ten NetBox and
	// Kubernetes requests, most of its time spent waiting on them.
	defaultMaxAdmissions = 16
)

// envHelp documents every setting; -help prints it.
const envHelp = `Environment:
  FLEET_LISTEN            HTTPS address of the attestation, config and approver APIs (default :8443)
  FLEET_METRICS_LISTEN    HTTP address of /metrics, /healthz and /readyz (default :9464; "off" disables)
  FLEET_READY_WINDOW      /readyz answers 200 only while NetBox and Tinkerbell's API server each answered
                          within it, and the serving certificate is loaded and valid (default 1m; at least
                          1s); otherwise 503, one line per cause. fleetd asks each one that has been
                          quiet for a quarter of it (NetBox's /api/status/, the API server's /readyz).
                          /healthz (liveness) answers 200 while fleetd serves, whatever they do
  FLEET_TLS_CERT          PEM certificate chain of the HTTPS listener (required; reread when it changes)
  FLEET_TLS_KEY           PEM private key of FLEET_TLS_CERT (required)
  FLEET_PUBLIC_URL        https URL nodes reach fleetd at, e.g. https://fleetd.example:8443 (required);
                          the Talos config URL is FLEET_PUBLIC_URL/config/<install code>
  FLEET_READ_TIMEOUT      how long a client has to send a whole request, its headers and its body,
                          on either listener (default 10s); a slower one is cut off
  FLEET_MAX_CONNECTIONS   HTTPS connections served at once (default 4096); more wait to be accepted
  FLEET_MAX_ADMISSIONS    attested machines admitted at once (default 16); more wait their turn, first
                          come, first served, and a machine that gives up meanwhile leaves the queue
  FLEET_CONFIG_TTL        how long a rendered config waits to be fetched (default 1h); a node's
                          bootstrap token expires FLEET_CONFIG_TTL + 4h after its render
  FLEET_CONFIG_WRITE_TIMEOUT
                          how long the answer that carries a config may take, from its first byte
                          until the node acknowledged its last (default 30s); a slower one is cut
                          off, and the config stays for the node's next fetch
  FLEET_POLL_INTERVAL     how often fleetd reads its runs' Workflows and the devices whose
                          desired_action is set (default 15s)
  FLEET_RUN_TIMEOUT       a run's global timeout while its Workflow reports none (default 2h): a
                          Workflow that never reported its first action within it is deleted
  FLEET_AUTO_PROVISION    true (default): a planned worker provisions at its first attestation;
                          false: every run waits for desired_action=provision (control planes
                          always wait for it)
  FLEET_CONTROL_PLANES    true: control planes may be provisioned (homelab.fleetd.controlPlanes);
                          false (default): a control plane is refused before anything is wiped
  FLEET_SECRETS_BUNDLE    the cluster's Talos secrets bundle, secrets.yaml (required; control planes
                          need its CA keys)
  FLEET_NODES             the nodes file, for its classes (required)
  FLEET_TOPOLOGY          the cluster topology (default: cluster-topology.json beside FLEET_NODES,
                          or in ../config/)
  NETBOX_URL              NetBox's URL, e.g. https://capsule.example (required)
  NETBOX_TOKEN            NetBox API token (required)
  FLEET_BINDING_AUTHOR    bindingAuthor: the NetBox user whose writes of approved_ek_* authorise a
                          binding (unset: every binding attests as ek-binding-unauthored)
  NETBOX_SWITCH           the switch device the node ports belong to ("" accepts any)
  TINKERBELL_KUBECONFIG   kubeconfig of the cluster with Tinkerbell and Rufio (unset: in-cluster)
  CLUSTER_KUBECONFIG      kubeconfig of the cluster nodes join, for bootstrap tokens (unset: in-cluster)
  TINKERBELL_NAMESPACE    namespace of Workflows, Hardware and Rufio objects (default tinkerbell)
  FLEET_BMC_SECRET        the Secret in TINKERBELL_NAMESPACE with the BMCs' credentials, its keys
                          username and password, that each node's Rufio Machine names (default bmc-auth)
  FLEET_IMAGE_WIPE_DISK   the image of the Templates' wipe-disk action
                          (default ` + "ghcr.io/fleetkit/fleet/wipe-disk:" + templates.Release + `)
  FLEET_IMAGE_INSTALL     the image of the install action (default ` + "ghcr.io/fleetkit/fleet/install:" + templates.Release + `)
  FLEET_IMAGE_NEXT_BOOT   the image of the next-boot action (default ` + "ghcr.io/fleetkit/fleet/next-boot:" + templates.Release + `)
  FLEET_IMAGE_REBOOT      the image of the reboot action, Tinkerbell's waitdaemon or one that works as
                          it does (default ghcr.io/jacobweinstock/waitdaemon:0.2.0); at start, fleetd
                          creates the Templates fleet-provision and fleet-retire with these images, and
                          updates one whose actions name others
  FLEET_APPROVER_TOKEN    bearer token of approvers for GET /v1/claims/<serial>
  FLEET_APPROVER_CA       PEM CA whose client certificates are approvers
                          (with neither set, the waiting-claims API answers nobody)
  FLEET_REPLICA           this replica's name (the pod's), when fleetd runs as several replicas behind
                          one address; unset: one fleetd. With it, the provision loop runs on the
                          replica holding the Lease fleet-provision, spent attestation sessions are
                          Leases, and a config is fetched through any replica from the one that holds it
  FLEET_PEERS             every replica as NAME=URL, comma-separated, this one included, e.g.
                          fleetd-0=https://fleetd-0.fleetd-peers:8444,fleetd-1=https://...: the URL of
                          each replica's peers' API (required with FLEET_REPLICA)
  FLEET_PEERS_LISTEN      HTTPS address of the peers' API, which replicas alone reach, over mutual TLS
                          with the certificate they share (default :8444; with FLEET_REPLICA only):
                          keep it out of the Service machines reach
  FLEET_SEALING_KEY       64 hex characters (32 bytes) every replica seals attestation sessions with
                          (required with FLEET_REPLICA, refused without it: one fleetd keeps its
                          spent sessions in memory and seals with a random key of its own)

Secrets from files: NETBOX_TOKEN, FLEET_APPROVER_TOKEN and FLEET_SEALING_KEY may each be given
instead as NAME_FILE, the path of a file that holds the value (surrounding white space, such as
a final newline, is dropped), so that the secret stays out of the environment:
  NETBOX_TOKEN_FILE, FLEET_APPROVER_TOKEN_FILE, FLEET_SEALING_KEY_FILE
Setting both NAME and NAME_FILE is refused. A relative path is resolved against
$CREDENTIALS_DIRECTORY when it is set, as systemd's LoadCredential= sets it
(NETBOX_TOKEN_FILE=netbox-token names the credential netbox-token); otherwise against the
working directory. The file must be a regular file that neither its group nor others may
read or write (mode 0600 or 0400, as systemd's credentials are); fleetd refuses any other,
naming the file and its mode.
`

// readSettings reads fleetd's settings; every problem is reported at once.
func readSettings(getenv func(string) string) (Settings, error) {
	r := &settingsReader{getenv: getenv}
	netBoxToken, _, ok := r.secret("NETBOX_TOKEN")
	if ok && netBoxToken == "" {
		r.fail(errors.New("NETBOX_TOKEN is required (or NETBOX_TOKEN_FILE, a file that holds it)"))
	}
	approverToken, approverFrom, _ := r.secret("FLEET_APPROVER_TOKEN")
	key, keyFrom, keyOK := r.secret("FLEET_SEALING_KEY")
	s := Settings{
		Listen:               r.str("FLEET_LISTEN", ":8443"),
		MetricsListen:        r.str("FLEET_METRICS_LISTEN", ":9464"),
		TLSCert:              r.required("FLEET_TLS_CERT"),
		TLSKey:               r.required("FLEET_TLS_KEY"),
		PublicURL:            r.required("FLEET_PUBLIC_URL"),
		AutoProvision:        r.boolean("FLEET_AUTO_PROVISION", true),
		ControlPlanes:        r.boolean("FLEET_CONTROL_PLANES", false),
		SecretsBundle:        r.required("FLEET_SECRETS_BUNDLE"),
		NodesFile:            r.required("FLEET_NODES"),
		Topology:             r.str("FLEET_TOPOLOGY", ""),
		NetBoxURL:            r.required("NETBOX_URL"),
		NetBoxToken:          netBoxToken,
		BindingAuthor:        r.str("FLEET_BINDING_AUTHOR", ""),
		NetBoxSwitch:         r.str("NETBOX_SWITCH", ""),
		TinkerbellKubeconfig: r.str("TINKERBELL_KUBECONFIG", ""),
		ClusterKubeconfig:    r.str("CLUSTER_KUBECONFIG", ""),
		Namespace:            r.str("TINKERBELL_NAMESPACE", "tinkerbell"),
		ApproverToken:        approverToken,
		ApproverCA:           r.str("FLEET_APPROVER_CA", ""),
	}
	s.Images = templates.Images{
		WipeDisk: r.image("FLEET_IMAGE_WIPE_DISK"),
		Install:  r.image("FLEET_IMAGE_INSTALL"),
		NextBoot: r.image("FLEET_IMAGE_NEXT_BOOT"),
		Reboot:   r.image("FLEET_IMAGE_REBOOT"),
	}
	s.BMCSecret = r.str("FLEET_BMC_SECRET", "bmc-auth")
	if msgs := validation.IsDNS1123Subdomain(s.BMCSecret); len(msgs) > 0 {
		r.fail(fmt.Errorf("FLEET_BMC_SECRET=%q is not the name of a Secret: %s", s.BMCSecret, strings.Join(msgs, "; ")))
	}
	r.limits(&s)
	if s.PublicURL != "" {
		if u, err := url.Parse(s.PublicURL); err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			r.fail(fmt.Errorf("FLEET_PUBLIC_URL=%q is not an https URL without a path, such as https://fleetd.example:8443", s.PublicURL))
		}
		s.PublicURL = strings.TrimSuffix(s.PublicURL, "/")
	}
	r.replicas(&s, key, keyFrom, keyOK)
	if len(s.ApproverToken) > 0 && len(s.ApproverToken) < 16 {
		r.fail(fmt.Errorf("%s is shorter than 16 characters", approverFrom))
	}
	return s, errors.Join(r.errs...)
}

// A settingsReader reads settings with getenv and keeps every problem it
// finds in errs.
type settingsReader struct {
	getenv func(string) string
	errs   []error
}

// fail keeps err.
func (r *settingsReader) fail(err error) { r.errs = append(r.errs, err) }

// str returns the setting name, trimmed, or def when it is empty.
func (r *settingsReader) str(name, def string) string {
	if v := strings.TrimSpace(r.getenv(name)); v != "" {
		return v
	}
	return def
}

// required returns the setting name, which must not be empty.
func (r *settingsReader) required(name string) string {
	v := r.str(name, "")
	if v == "" {
		r.fail(fmt.Errorf("%s is required", name))
	}
	return v
}

// boolean returns the setting name as true or false, def when it is empty.
func (r *settingsReader) boolean(name string, def bool) bool {
	v := r.str(name, strconv.FormatBool(def))
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(fmt.Errorf("%s=%q is not true or false", name, v))
	}
	return b
}

// secret reads a secret setting from its variable or its _FILE form,
// and returns the variable it came from, to name in messages; ok is
// false when that failed (the error is kept).
func (r *settingsReader) secret(name string) (v, from string, ok bool) {
	v, from, err := secretenv.Lookup(r.getenv, name)
	if err != nil {
		r.fail(err)
		return "", name, false
	}
	return v, cmp.Or(from, name), true
}

// image returns the image the setting name gives, checked, or "".
func (r *settingsReader) image(name string) string {
	v := r.str(name, "")
	if v != "" {
		if err := templates.CheckImage(v); err != nil {
			r.fail(fmt.Errorf("%s=%w", name, err))
		}
	}
	return v
}

// positive returns the setting name as a positive duration, def when it
// is empty.
func (r *settingsReader) positive(name, def string) time.Duration {
	v := r.str(name, def)
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.fail(fmt.Errorf("%s=%q is not a positive duration such as %s", name, v, def))
	}
	return d
}

// positiveInt returns the setting name as a positive number, def when it
// is empty.
func (r *settingsReader) positiveInt(name string, def int) int {
	v := r.str(name, strconv.Itoa(def))
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		r.fail(fmt.Errorf("%s=%q is not a positive number", name, v))
	}
	return n
}

// limits reads the settings that bound time and load into s.
func (r *settingsReader) limits(s *Settings) {
	s.ReadTimeout = r.positive("FLEET_READ_TIMEOUT", defaultReadTimeout.String())
	if s.ReadyWindow = r.positive("FLEET_READY_WINDOW", defaultReadyWindow.String()); s.ReadyWindow > 0 && s.ReadyWindow < minReadyWindow {
		r.fail(fmt.Errorf("FLEET_READY_WINDOW=%q is shorter than %s", r.str("FLEET_READY_WINDOW", ""), minReadyWindow))
	}
	// The defaults are configserve's and provision's own.
	s.ConfigWriteTimeout = r.positive("FLEET_CONFIG_WRITE_TIMEOUT", "30s")
	s.PollInterval = r.positive("FLEET_POLL_INTERVAL", "15s")
	s.RunTimeout = r.positive("FLEET_RUN_TIMEOUT", "2h")
	s.MaxConns = r.positiveInt("FLEET_MAX_CONNECTIONS", defaultMaxConns)
	s.MaxAdmissions = r.positiveInt("FLEET_MAX_ADMISSIONS", defaultMaxAdmissions)
	s.ConfigTTL = r.positive("FLEET_CONFIG_TTL", "1h")
}

// replicas reads the replica settings into s: FLEET_REPLICA, FLEET_PEERS,
// FLEET_PEERS_LISTEN, and the sealing key, read from keyFrom (keyOK
// false: its read failed).
func (r *settingsReader) replicas(s *Settings, key, keyFrom string, keyOK bool) {
	s.Replica = r.str("FLEET_REPLICA", "")
	peers, peersListen := r.str("FLEET_PEERS", ""), r.str("FLEET_PEERS_LISTEN", "")
	if s.Replica == "" {
		if key != "" {
			// attest.ErrSealingKeyWithoutSpent: a shared key needs a shared
			// record of spent sessions, which one fleetd keeps in memory.
			r.fail(fmt.Errorf("%s is refused without FLEET_REPLICA: one fleetd records spent attestation sessions in its own memory, so another fleetd holding the key (a replica, or this one after a restart) would accept a proof again and answer its install code; unset it, or run replicas (FLEET_REPLICA, FLEET_PEERS)", keyFrom))
		}
		if peers != "" {
			r.fail(errors.New("FLEET_PEERS is refused without FLEET_REPLICA, which names this replica among them"))
		}
		if peersListen != "" {
			r.fail(errors.New("FLEET_PEERS_LISTEN is refused without FLEET_REPLICA: one fleetd has no peers"))
		}
		return
	}
	s.PeersListen = cmp.Or(peersListen, ":8444")
	var err error
	if s.Peers, err = parsePeers(peers, s.Replica); err != nil {
		r.fail(err)
	}
	if s.SealingKey, err = hex.DecodeString(key); keyOK && (err != nil || len(s.SealingKey) != 32) {
		r.fail(fmt.Errorf("%s must be 64 hex characters (32 bytes), the same in every replica", keyFrom))
	}
}

// parsePeers reads FLEET_PEERS: NAME=URL pairs, comma-separated, that
// name self.
func parsePeers(v, self string) ([]Peer, error) {
	if v == "" {
		return nil, errors.New("FLEET_PEERS is required with FLEET_REPLICA: every replica as NAME=URL, comma-separated")
	}
	var peers []Peer
	seen := map[string]bool{}
	for _, item := range strings.Split(v, ",") {
		name, raw, ok := strings.Cut(strings.TrimSpace(item), "=")
		u, err := url.Parse(raw)
		if !ok || name == "" || err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("FLEET_PEERS: %q is not NAME=URL with an https URL without a path, such as fleetd-0=https://fleetd-0.fleetd-peers:8444", item)
		}
		if seen[name] {
			return nil, fmt.Errorf("FLEET_PEERS names replica %s twice", name)
		}
		seen[name] = true
		peers = append(peers, Peer{Name: name, URL: strings.TrimSuffix(raw, "/")})
	}
	if !seen[self] {
		return nil, fmt.Errorf("FLEET_PEERS does not name this replica, %s (FLEET_REPLICA)", self)
	}
	return peers, nil
}
