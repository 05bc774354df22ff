// Package sim is a whole fleet in one process, for fleetd's demo and
// end-to-end tests: an in-process NetBox (netboxtest) holding the nodes
// file, Tinkerbell's and the nodes' clusters (client-go's fakes, or a real
// kube-apiserver), a simulated Tinkerbell (tink-controller, tink-server,
// Rufio and each machine's agent, writing what Tinkerbell v0.25.0 writes;
// TestIntegrationTinkerbellParity compares the two on one case), and
// machines with software TPMs that boot HookOS, attest and fetch their
// configs from a real fleetd (package daemon). RunDemo runs the runbook on
// it.
package sim
