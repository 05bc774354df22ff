package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/inventory/netboxtest"
)

func TestRenderClassInputsGolden(t *testing.T) {
	srv, nb := appliedNetBox(t)
	// cp-01 runs; cp-02 and cp-03 are declared and wait to be provisioned.
	must(t, nb.SetStatus(t.Context(), device(t, nb, "MS01-2407-0001").ID, inventory.StatusActive))

	srv.ResetRequests()
	stdout := runQuiet(t, 0, "render-class-inputs", "-nodes", "../testdata/nodes.yaml", "-san", "api.folly.example", "-san", "10.40.0.10")
	golden(t, "testdata/class-inputs.golden", stdout)
	wroteNothing(t, srv, "render-class-inputs")
	// Every control plane's address is a SAN of the API server, the
	// workers' are not.
	_, apiServer, _ := strings.Cut(stdout, "apiServer:")
	for _, addr := range []string{"10.40.0.10", "10.40.0.11", "10.40.0.12", "api.folly.example"} {
		if !strings.Contains(apiServer, `- "`+addr+`"`) {
			t.Errorf("the API server's SANs lack %s:\n%s", addr, stdout)
		}
	}
	if strings.Contains(stdout, "10.40.0.2") || strings.Contains(stdout, "10.40.0.31") {
		t.Errorf("a worker's address is a SAN:\n%s", stdout)
	}
}

func TestRenderClassInputsRefuses(t *testing.T) {
	// A nodes file that names no control plane class: NetBox's devices of
	// class controlplane are not control planes to it.
	nodes := changedNodes(t, "    type: controlplane\n", "    type: worker\n")

	for _, c := range []struct {
		cliCase
		applied bool // NetBox holds the example nodes file
	}{
		{cliCase: cliCase{name: "an empty NetBox", code: 1, stderr: "no control plane in NetBox holds an address: apply the nodes file's control planes first"}},
		{cliCase: cliCase{name: "no control plane class", args: []string{"-nodes", nodes}, code: 1,
			stderr: "no control plane in NetBox holds an address"}, applied: true},
		{cliCase: cliCase{name: "a SAN that is no name", args: []string{"-san", "api.folly.example/6443"}, code: 2,
			stderr: `SAN "api.folly.example/6443" is neither an IP address nor a DNS name`}, applied: true},
		{cliCase: cliCase{name: "a broken nodes file", args: []string{"-nodes", "testdata/broken-nodes.yaml"}, code: 1,
			stderr: "testdata/broken-nodes.yaml: 17 problems; nothing was rendered"}},
		{cliCase: cliCase{name: "no nodes file", args: []string{"-nodes", filepath.Join(t.TempDir(), "missing.yaml")}, code: 2, stderr: "missing.yaml"}},
		{cliCase: cliCase{name: "a refused token", env: map[string]string{"NETBOX_TOKEN": "nope"}, code: 2, stderr: "netbox refused the token"}},
		{cliCase: cliCase{name: "no NetBox named", env: map[string]string{"NETBOX_TOKEN": ""}, code: 2, stderr: "set NETBOX_URL"}},
		{cliCase: cliCase{name: "an argument", args: []string{"cp-04"}, code: 2, stderr: "usage: fleetctl render-class-inputs"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var srv *netboxtest.Server
			if c.applied {
				srv, _ = appliedNetBox(t)
			} else {
				srv = netBox(t)
			}
			srv.ResetRequests()
			c.args = append([]string{"render-class-inputs", "-nodes", "../testdata/nodes.yaml"}, c.args...)
			c.run(t)
			if strings.Contains(c.name, "nodes file") && srv.RequestCount() > 0 {
				t.Errorf("a nodes file that does not load reached NetBox: %d requests", srv.RequestCount())
			}
		})
	}
}
