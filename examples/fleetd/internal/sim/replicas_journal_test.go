package sim

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/configserve"
)

// A replica writes a started run's journal line before it answers the
// install code: when the machine holds its code, NetBox holds the line,
// so a replica killed right after it answered loses no run's line.
func TestReplicaJournalsStartBeforeAnswer(t *testing.T) {
	r := newReplicaSet(t, testNode{name: "w-01", class: "worker", approve: true})
	m := r.machines["w-01"]
	res, err := attest.Run(r.ctx, r.url+"/attest", m.tpm, m.claim(),
		&attest.ClientConfig{HTTPClient: r.balancer(nodeAddr(0)), Console: &strings.Builder{}})
	if err != nil || res.InstallCode == "" {
		t.Fatalf("w-01: %+v, %v", res, err)
	}
	lines := r.journalOf("w-01")
	for _, l := range lines {
		if strings.HasPrefix(l, "info: started Workflow provision-w-01-") {
			return
		}
	}
	t.Errorf("when w-01 held its install code, its journal held no started line: %q", lines)
}

// A replica writes a served config's journal line as soon as the node
// acknowledged the config, not after the journal queue's linger (200 ms):
// a replica killed in that time would lose it while the node boots with
// its config. The line is in NetBox well within the linger of the fetch's
// end.
func TestReplicaJournalsServedAtOnce(t *testing.T) {
	r := newReplicaSet(t, testNode{name: "w-01", class: "worker", approve: true})
	m := r.machines["w-01"]
	lb := r.balancer(nodeAddr(0))
	res, err := attest.Run(r.ctx, r.url+"/attest", m.tpm, m.claim(), &attest.ClientConfig{HTTPClient: lb, Console: &strings.Builder{}})
	if err != nil || res.InstallCode == "" {
		t.Fatalf("w-01: %+v, %v", res, err)
	}
	for try := 0; ; try++ {
		status, n, err := fetch(r.ctx, lb, r.url+configserve.PathPrefix+res.InstallCode)
		if err != nil {
			t.Fatal(err)
		}
		if status == http.StatusOK && n > 0 {
			break
		}
		if try == 5 {
			t.Fatalf("w-01's config fetch: %d", status)
		}
	}
	served := func() bool {
		for _, l := range r.journalOf("w-01") {
			if strings.HasPrefix(l, "success: fleetd served the config of provision-w-01-") {
				return true
			}
		}
		return false
	}
	if err := eventually(r.ctx, 150*time.Millisecond, func() (bool, error) { return served(), nil }); err != nil {
		t.Errorf("150 ms after w-01's config was fetched, its journal held no served line: %q", r.journalOf("w-01"))
	}
}
