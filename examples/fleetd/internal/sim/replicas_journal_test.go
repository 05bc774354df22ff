package sim

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/configserve"
)

// A replica writes a run's journal lines before a replica killed right
// after it answered could lose them. The started line is written before
// the install code is answered: when the machine holds its code, NetBox
// holds the line. The served line is written as soon as the node
// acknowledged the config, not after the journal queue's linger (200 ms),
// in which a killed replica would lose it while the node boots with its
// config: it is in NetBox well within the linger of the fetch's end.
func TestReplicaJournalsRunLines(t *testing.T) {
	r := newReplicaSet(t, testNode{name: "w-01", class: "worker", approve: true})
	m := r.machines["w-01"]
	lb := r.balancer(nodeAddr(0))
	res, err := attest.Run(r.ctx, r.url+"/attest", m.tpm, m.claim(), &attest.ClientConfig{HTTPClient: lb, Console: &strings.Builder{}})
	if err != nil || res.InstallCode == "" {
		t.Fatalf("w-01: %+v, %v", res, err)
	}
	if len(r.journalWith("w-01", "info: started Workflow provision-w-01-")) == 0 {
		t.Errorf("when w-01 held its install code, its journal held no started line: %q", r.journalOf("w-01"))
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
	served := func() (bool, error) {
		return len(r.journalWith("w-01", "success: fleetd served the config of provision-w-01-")) > 0, nil
	}
	if err := eventually(r.ctx, 150*time.Millisecond, served); err != nil {
		t.Errorf("150 ms after w-01's config was fetched, its journal held no served line: %q", r.journalOf("w-01"))
	}
}
