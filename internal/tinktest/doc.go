// Package tinktest runs the real Tinkerbell (tink-server, tink-controller
// and Rufio, v0.25.0) for a test, beside the kube-apiserver and etcd of
// internal/kubetest, so that fleet's Workflows, Hardware and Rufio objects
// are acted on by Tinkerbell's own controllers instead of a simulation.
//
// # What runs
//
// Start runs the tinkerbell binary of the tools/tinkerbell module with smee,
// tootles, secondstar and the UI off, on free ports of 127.0.0.1: tink-server
// (plain gRPC, GRPC) and the HTTP server of its health and metrics. Its
// Kubernetes backend is the given namespace; tink-controller and Rufio watch
// every namespace, as they do in a cluster. Start returns once /readyz
// answers and tink-server accepts connections, which tinkerbell does only
// after its CRD migration; tink-controller and Rufio have then started, and
// their caches sync within about 2 s, acting on objects created meanwhile.
//
// With its CRD migrations on (Tinkerbell's default), tinkerbell applies its
// seven v1alpha1 CRDs itself before it serves. On a control plane of
// kubetest they exist already, created from fleet's generated ones
// (examples/deploy/crds): tinkerbell's server-side apply conflicts on the
// controller-gen version annotation, and it falls back to an update that
// replaces each with its own. TestIntegrationCRDsEqualTinkerbells proves
// the two equal but for that annotation.
//
// # An agent of the test's
//
// Agent (Tinkerbell.Agent) makes the two calls of Tinkerbell's
// agent to tink-server, GetAction and ReportActionStatus, so that a test
// can take a worker's Workflow through the real tink-server and
// tink-controller without a container engine, reporting what a machine's
// agent would: RUNNING with "running action" and no times, then the end
// with "action completed" and the action's times. Both calls retry in
// tink-server for up to a minute while they fail (a Workflow that cannot
// serve the worker, an action the Workflow lacks): bound them with a
// context.
//
// # Privileges
//
// tinkerbell authenticates as the ServiceAccount ServiceAccount of the
// namespace (a TokenRequest token, an hour long), never as kubetest's admin.
// Start binds it to a ClusterRole of its own holding what Tinkerbell's Helm
// chart grants tink-server, tink-controller and Rufio
// (helm/tinkerbell/templates/role.yaml, a ClusterRole by default, and
// role-secrets.yaml), narrowed where tinkerbell needs less:
//
//   - CRDs: get, patch and update of its seven CRDs by name. create only
//     when one of them is missing from the control plane (a test deleted
//     it), and then of any CRD: RBAC cannot limit it by name, since an
//     apply that creates a missing CRD is authorized as a create without
//     one. The chart's list and delete of CRDs are left out: nothing in
//     tinkerbell uses them.
//   - Hardware, Templates, Workflows, WorkflowRuleSets and Rufio's Jobs,
//     Tasks and Machines, with their status and finalizers: as the chart.
//   - Secrets: get, list and watch in every namespace, as the chart: Rufio
//     reads a Machine's credentials through a cache of all Secrets.
//
// No leader election runs, so none of the chart's leader-election Role
// (ConfigMaps, Leases, Events) is granted; Rufio's events (events.k8s.io,
// which the chart does not grant either) are refused and logged.
//
// # Lifetime
//
// Start stops tinkerbell when the test ends (SIGTERM; SIGKILL, and an error,
// after 10 s) and then deletes the ClusterRole and its binding. On Linux
// tinkerbell also gets SIGTERM should the test binary die without stopping
// it. Only one Tinkerbell may run on a control plane at a time, since its
// controllers act on every namespace: Start fails a test that asks for a
// second while the first runs. Tests that each start one must not run in
// parallel, or must each use a control plane of their own
// (kubetest.StartOwn).
//
// # When it cannot run
//
// When the go command or the tools module is missing, the binary does not
// build, or tinkerbell exits or stands still unready for a minute, Start ends the
// test through internal/testenv: a skip with the reason by hand, a failure
// with FLEET_REQUIRE_INTEGRATION=1. The reason ends with the tail of
// tinkerbell's log. Start also ends tests run with -short.
//
// # Cost
//
// A cold build of tinkerbell takes 5 to 10 minutes on two cores
// (scripts/test builds it, and the agent, before go test runs); warm,
// finding it takes about 2 s. tinkerbell is ready 0.4 to 0.9 s after it
// starts over existing CRDs, about 2.5 s when it creates them (it polls
// for Established every 2 s), and stops in about 1 s. tink-controller
// takes a Workflow to PENDING 0.2 to 0.5 s after its create (1.5 s has been
// seen on a just-started control plane).
//
// # Use
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }
//
//	func TestSomething(t *testing.T) {
//		env := kubetest.Start(t)
//		ns := env.Namespace(t)
//		tb := tinktest.Start(t, env, ns, nil)
//		// ... create Hardware, a Template and a Workflow in ns; an agent
//		// dials tb.GRPC() ...
//	}
package tinktest
