package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fleetkit/fleet/internal/buildinfo"
)

// fleet_build_info is 1, labelled with the build's version, revision and
// Go release, and nothing else; fleetd's /metrics carries the running
// build's.
func TestBuildInfoGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfoGauge(buildinfo.Info{Version: "v1.2.0+dirty", Revision: "3c16fca", Modified: "true", GoVersion: "go1.26.8"}))
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	const want = `# HELP fleet_build_info 1, labelled with the version, the VCS revision and the Go release fleetd was built from (fleetd -version).
# TYPE fleet_build_info gauge
fleet_build_info{goversion="go1.26.8",revision="3c16fca",version="v1.2.0+dirty"} 1
`
	if got := rec.Body.String(); got != want {
		t.Errorf("the registry of fleet_build_info alone exports\n%s\nwant\n%s", got, want)
	}
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
