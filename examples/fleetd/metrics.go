package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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
			Help: "Admission decisions for attested machines, by outcome (provision, retire, no provision, refused, error).",
		}, []string{"outcome"}),
		configEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleet_install_config_events_total",
			Help: "Events of the Talos config service, by event (served, not-acknowledged, refetched, missing, expired).",
		}, []string{"event"}),
		missing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleet_install_config_missing_last_timestamp_seconds",
			Help: "When a node last asked for its Talos config while fleetd held none for it, by node (its name, or its address when NetBox names none).",
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
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fleetd_tls_certificate_expiry_timestamp_seconds",
			Help: "NotAfter of the certificate fleetd serves HTTPS with (EnrollmentNameNotServed fires when it lapses).",
		}, func() float64 {
			if t := certExpiry(); !t.IsZero() {
				return float64(t.Unix())
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fleet_install_configs_waiting",
			Help: "Rendered Talos configs waiting in memory to be fetched.",
		}, func() float64 { return float64(waiting()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func stamp(g *prometheus.GaugeVec, node string, t time.Time) {
	g.WithLabelValues(node).Set(float64(t.Unix()))
}
