package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetkit/fleet/internal/buildinfo"
)

// buildInfoGauge is fleet_build_info: 1, labelled with the build's
// version, revision and Go release, as fleetd -version prints them, so a
// query can tell which commit each replica runs.
func buildInfoGauge(i buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "fleet_build_info",
		Help:        "1, labelled with the version, the VCS revision and the Go release fleetd was built from (fleetd -version).",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}
