package daemon

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fleetkit/fleet/examples/fleetd/internal/alerttest"
)

// alertRules are fleetd's alert rules, from this package's directory.
const alertRules = "../../alerts/fleet.rules.yaml"

// Before fleetd holds a certificate it exports no expiry, so
// EnrollmentNameNotServed does not fire on a zero; once it holds one, the
// alert fires only when that certificate lapses.
func TestAlertCertificateExpiry(t *testing.T) {
	now := time.Now()
	for name, tc := range map[string]struct {
		notAfter time.Time
		want     []alerttest.Firing
	}{
		"none loaded": {},
		"valid":       {notAfter: now.Add(90 * 24 * time.Hour)},
		"lapsed":      {notAfter: now.Add(-time.Hour), want: []alerttest.Firing{{Alert: "EnrollmentNameNotServed"}}},
	} {
		t.Run(name, func(t *testing.T) {
			m := newMetrics(func() time.Time { return tc.notAfter }, func() int { return 0 })
			d := &Daemon{metrics: m}
			rec := httptest.NewRecorder()
			d.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			alerttest.Want(t, alertRules, rec.Body.String(), now, tc.want...)
		})
	}
}
