package daemon

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fleetkit/fleet/internal/buildinfo"
)

// metrics are what fleetd exports for Prometheus; the alert rules in
// alerts/fleet.rules.yaml fire from them.
type metrics struct {
	reg *prometheus.Registry

	verdicts     *prometheus.CounterVec // by verdict
	admissions   *prometheus.CounterVec // by outcome
	configEvents *prometheus.CounterVec // by event
	// The last time a node asked for a config fleetd does not hold, or
	// asked again for one it served (FleetInstallConfigMissing,
	// FleetInstallConfigRefetched), and booted HookOS after its run
	// succeeded (FleetNodeBootedHookOSAfterInstall), by node.
	missing      *prometheus.GaugeVec
	refetched    *prometheus.GaugeVec
	bootedHookOS *prometheus.GaugeVec
	journalLost  prometheus.Counter
	// Asks for a config fleetd does not hold from addresses NetBox names
	// no device at, and from addresses fleetd did not track (askers).
	unknownAsks   prometheus.Counter
	untrackedAsks prometheus.Counter
	statusLost    prometheus.Counter     // device statuses NetBox does not hold
	leader        prometheus.Gauge       // 1 while this replica runs the provision loop
	peerRequests  *prometheus.CounterVec // the peers' API requests this replica answered, by path
}

// newMetrics registers fleetd's metrics. certExpiry returns the NotAfter of
// the serving certificate (zero before one is loaded); waiting the number
// of configs waiting to be fetched.
func newMetrics(certExpiry func() time.Time, waiting func() int) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_attest_verdicts_total",
			Help: "Attestation verdicts, by verdict.",
		}, []string{"verdict"}),
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_admissions_total",
			Help: "Admission decisions for attested machines, by outcome (provision, retire, no provision, refused, error, abandoned: the machine left while its admission waited its turn).",
		}, []string{"outcome"}),
		configEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_install_config_events_total",
			Help: "Events of the Talos config service, by event (served, not-acknowledged, refetched, missing, expired, lost).",
		}, []string{"event"}),
		missing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_install_config_missing_last_timestamp_seconds",
			Help: "When a node last asked for its Talos config while fleetd held none for it, by node: the device NetBox names at the asking address (asks from other addresses count in fleet_install_config_unknown_asks_total).",
		}, []string{"node"}),
		refetched: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_install_config_refetched_last_timestamp_seconds",
			Help: "When a node last asked again for the Talos config fleetd served it, by node.",
		}, []string{"node"}),
		bootedHookOS: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_node_booted_hookos_after_install_timestamp_seconds",
			Help: "When a node booted HookOS and attested after its Workflow succeeded (once per run), by node.",
		}, []string{"node"}),
		journalLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleet_journal_lines_lost_total",
			Help: "NetBox journal lines fleetd could not write.",
		}),
	}
	m.reg.MustRegister(m.verdicts, m.admissions, m.configEvents, m.missing, m.refetched, m.bootedHookOS, m.journalLost,
		certExpiryCollector{notAfter: certExpiry},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fleet_install_configs_waiting",
			Help: "Rendered Talos configs waiting in memory to be fetched.",
		}, func() float64 { return float64(waiting()) }),
		buildInfoGauge(buildinfo.Read()),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.unknownAsks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fleet_install_config_unknown_asks_total",
		Help: "Asks for a Talos config fleetd does not hold, from addresses NetBox names no device at.",
	})
	m.untrackedAsks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fleet_install_config_untracked_asks_total",
		Help: fmt.Sprintf("Asks for a Talos config fleetd does not hold that fleetd neither looked up nor journaled: they came from an address not known as a device's while fleetd tracked %d such addresses, as many as it tracks at once.", AskPeers),
	})
	m.statusLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fleet_device_status_writes_lost_total",
		Help: "Device statuses fleetd did not get NetBox to take: NetBox refused them, or fleetd shut down first. Each is logged with its device.",
	})
	m.leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fleet_provision_leader",
		Help: "1 while this replica holds the Lease fleet-provision and runs the provision loop; 0 otherwise (a fleetd that runs alone runs its loop without a Lease).",
	})
	m.peerRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_peer_requests_total",
		Help: "Requests of the peers' API this replica answered, by path (lend, settle, claims, code, drop) and result (answered, refused: without the replicas' certificate and token).",
	}, []string{"path", "result"})
	m.reg.MustRegister(m.unknownAsks, m.untrackedAsks, m.statusLost, m.leader, m.peerRequests)
	return m
}

// certExpiryCollector exports fleetd_tls_certificate_expiry_timestamp_seconds:
// the NotAfter of the certificate fleetd serves, and no sample while it
// holds none. EnrollmentNameNotServed fires on "<= time()": a zero would
// fire it for a certificate that has not loaded yet, and fleetd serves no
// HTTPS without one (up and absent() cover that).
type certExpiryCollector struct{ notAfter func() time.Time }

var certExpiryDesc = prometheus.NewDesc("fleetd_tls_certificate_expiry_timestamp_seconds",
	"NotAfter of the certificate fleetd serves HTTPS with (EnrollmentNameNotServed fires when it lapses); no sample before one is loaded.", nil, nil)

func (c certExpiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- certExpiryDesc }

func (c certExpiryCollector) Collect(ch chan<- prometheus.Metric) {
	if t := c.notAfter(); !t.IsZero() {
		ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, float64(t.Unix()))
	}
}

func stamp(g *prometheus.GaugeVec, node string, t time.Time) {
	g.WithLabelValues(node).Set(float64(t.Unix()))
}
