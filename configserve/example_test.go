package configserve_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/fleetkit/fleet/configserve"
)

// netboxGate stands in for fleetd's NetBox client: it answers whether a
// device's status is planned.
type netboxGate map[int64]string

func (g netboxGate) Planned(_ context.Context, d configserve.Device) (bool, error) {
	return g[d.ID] == "planned", nil
}

func Example() {
	events := make(chan configserve.Event, 8)
	srv, err := configserve.New(netboxGate{17: "planned"}, &configserve.Config{
		TTL:      30 * time.Minute, // FLEET_CONFIG_TTL
		Name:     "fleetd",         // the runbook's lines name fleetd
		GateName: "NetBox",
		Events:   func(ev configserve.Event) { events <- ev },
	})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	// fleetd's HTTPS server: the Server at PathPrefix, set up by
	// ConfigureServer (connections recorded, HTTP/1.1 only).
	mux := http.NewServeMux()
	mux.Handle(configserve.PathPrefix, srv)
	ts := httptest.NewUnstartedServer(mux)
	if err := srv.ConfigureServer(ts.Config); err != nil {
		panic(err)
	}
	ts.StartTLS()
	defer ts.Close()

	// After the render: a fresh code, and the config under it. The node
	// boots with talos.config=https://<fleetd>/config/<code>.
	code := configserve.NewCode()
	node := configserve.Device{ID: 17, Name: "node-01"}
	if err := srv.Put(code, []byte("version: v1alpha1\n"), node, "provision-node-01-1767225600"); err != nil {
		panic(err)
	}

	fetch := func() {
		resp, err := ts.Client().Get(ts.URL + configserve.PathPrefix + code)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %q\n", resp.StatusCode, body)
		ev := <-events
		fmt.Printf("%s: %s (%s)\n", ev.Kind, ev.Text, ev.Device)
	}
	fetch()
	fetch() // the code is spent
	// Output:
	// 200 "version: v1alpha1\n"
	// served: fleetd served the config of provision-node-01-1767225600 (node-01 (17))
	// 410 "this install code was served; a code serves once\n"
	// refetched: the node asked again for the Talos config fleetd served it (node-01 (17))
}

func ExampleNewCode() {
	code := configserve.NewCode()
	fmt.Println(len(code), configserve.ValidCode(code))
	fmt.Println("talos.config=https://fleetd.example" + configserve.PathPrefix + "<code>")
	// Output:
	// 43 true
	// talos.config=https://fleetd.example/config/<code>
}
