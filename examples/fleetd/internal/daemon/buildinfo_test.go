package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetkit/fleet/internal/buildinfo"
)

func TestBuildInfoGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfoGauge(buildinfo.Info{Version: "v1.2.0+dirty", Revision: "3c16fca", Modified: "true", GoVersion: "go1.26.8"}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "fleet_build_info" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, want fleet_build_info alone", mfs)
	}
	m := mfs[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	want := map[string]string{"version": "v1.2.0+dirty", "revision": "3c16fca", "goversion": "go1.26.8"}
	if !maps.Equal(labels, want) || m.GetGauge().GetValue() != 1 {
		t.Errorf("fleet_build_info %v = %v, want %v = 1", labels, m.GetGauge().GetValue(), want)
	}
}

// fleetd's /metrics carries the running build's fleet_build_info.
func TestMetricsBuildInfo(t *testing.T) {
	metrics := scrape(&Daemon{metrics: newMetrics(func() time.Time { return time.Time{} }, func() int { return 0 })})
	if want := `fleet_build_info{goversion="` + runtime.Version() + `",revision="unknown",version=`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s...:\n%s", want, metrics)
	}
}

// -version prints the build's line and reads no setting; with settings,
// the first log line names the build, even when fleetd then fails.
func TestMainVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"-version"}, env(nil), &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("-version: exit %d, stderr %q", code, errb.String())
	}
	if want := "fleetd " + buildinfo.Read().String() + "\n"; out.String() != want {
		t.Errorf("-version printed %q, want %q", out.String(), want)
	}

	out.Reset()
	settings := baseSettings()
	settings["FLEET_NODES"] = t.TempDir() + "/no-nodes.yaml"
	code := Main(context.Background(), nil, env(settings), &out, &errb)
	if code != 1 {
		t.Fatalf("a missing nodes file: exit %d, want 1; stderr:\n%s", code, errb.String())
	}
	first, _, _ := strings.Cut(errb.String(), "\n")
	var line map[string]any
	if err := json.Unmarshal([]byte(first), &line); err != nil {
		t.Fatalf("the first log line is not JSON: %q", first)
	}
	b := buildinfo.Read()
	if line["msg"] != "fleetd: starting" || line["version"] != b.Version || line["revision"] != b.Revision ||
		line["modified"] != b.Modified || line["goversion"] != b.GoVersion {
		t.Errorf("the first log line is %s, want fleetd: starting with %s", first, b)
	}
}
