package daemon

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/internal/buildinfo"
	"github.com/fleetkit/fleet/provision"
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
	// Runs this fleetd started, by kind, and whose end it journaled, by
	// kind and outcome, with their durations.
	runsStarted *prometheus.CounterVec
	runsEnded   *prometheus.CounterVec
	runDuration *prometheus.HistogramVec
}

// The label values fleetd's counters are exported with from the start, at
// zero, so that the first event after a start shows as an increase (a
// series born at 1 has none) and the dashboard's panels have series
// before anything happens.
var (
	admissionOutcomes = []string{provision.Provision.String(), provision.Retire.String(),
		provision.NoProvision.String(), provision.Refused.String(), "error", "later", "abandoned"}
	runKinds    = []provision.RunKind{provision.RunProvision, provision.RunRetire}
	runOutcomes = []string{"success", "failed", "timeout", "passed-global-timeout", "boot-job-failed", "rufio-job-failed", "never-reported"}
)

// runDurationBuckets are the bounds of fleet_workflow_duration_seconds:
// from a minute to past the 2 h global timeout.
var runDurationBuckets = []float64{60, 120, 300, 600, 900, 1200, 1800, 2700, 3600, 5400, 7200, 10800}

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
			Help: "Admission decisions for attested machines, by outcome (provision, retire, no provision, refused, error, later: another replica was starting the machine's run and the machine tries again, abandoned: the machine left while its admission waited its turn).",
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
		Help: "1 while this fleetd runs the provision loop (a replica while it holds the Lease fleet-provision; a fleetd that runs alone, without a Lease, from its start); 0 otherwise. FleetNoProvisionLeader fires when no replica reports 1.",
	})
	m.peerRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_peer_requests_total",
		Help: "Requests of the peers' API this replica answered, by path (lend, settle, claims, code, drop) and result (answered, refused: without the replicas' certificate and token).",
	}, []string{"path", "result"})
	m.runsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_workflows_started_total",
		Help: "Runs (Workflows) this fleetd started, by kind (provision, retire).",
	}, []string{"kind"})
	m.runsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_workflows_ended_total",
		Help: "Runs whose end this fleetd journaled, by kind and outcome (success, failed, timeout, passed-global-timeout: the node was active, boot-job-failed: Rufio did not power the machine, rufio-job-failed: Rufio failed its job on its own side, never-reported: deleted without a first action), each once.",
	}, []string{"kind", "outcome"})
	m.runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fleet_workflow_duration_seconds",
		Help:    "From a run's start (its Workflow's creation) to the pass that journaled its end, by kind and outcome; the poll interval (FLEET_POLL_INTERVAL) bounds the precision.",
		Buckets: runDurationBuckets,
	}, []string{"kind", "outcome"})
	m.reg.MustRegister(m.unknownAsks, m.untrackedAsks, m.statusLost, m.leader, m.peerRequests,
		m.runsStarted, m.runsEnded, m.runDuration)

	for v := attest.Attested; v <= attest.EKBindingUnauthored; v++ {
		m.verdicts.WithLabelValues(v.String())
	}
	for _, o := range admissionOutcomes {
		m.admissions.WithLabelValues(o)
	}
	for k := configserve.Served; k <= configserve.Lost; k++ {
		m.configEvents.WithLabelValues(k.String())
	}
	for _, k := range runKinds {
		m.runsStarted.WithLabelValues(string(k))
		for _, o := range runOutcomes {
			m.runsEnded.WithLabelValues(string(k), o)
		}
	}
	return m
}

// runStarted is provision's RunStarted.
func (m *metrics) runStarted(kind provision.RunKind) {
	m.runsStarted.WithLabelValues(string(kind)).Inc()
}

// runEnded is provision's RunEnded.
func (m *metrics) runEnded(kind provision.RunKind, outcome string, took time.Duration) {
	m.runsEnded.WithLabelValues(string(kind), outcome).Inc()
	m.runDuration.WithLabelValues(string(kind), outcome).Observe(took.Seconds())
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
