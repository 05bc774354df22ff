// Package kubetest runs a real kube-apiserver and etcd on 127.0.0.1 for
// tests, with Tinkerbell's CRDs applied, so that fleet's Kubernetes calls
// meet real schema validation, RBAC, conflicts and authentication instead of
// client-go's fakes.
//
// # The control plane
//
// One control plane serves a whole test binary: the first call of Start
// builds (or finds in Go's build cache) the kube-apiserver and etcd binaries
// of the tools/kube module, starts etcd (--unsafe-no-fsync, a temporary data
// directory) and kube-apiserver on free ports of 127.0.0.1, waits for
// /readyz, applies the CRDs of examples/deploy/crds and waits until each is
// Established, and then for the 2 s during which kube-apiserver delays the
// first create of a just-established custom resource. Later calls return the
// same Env at once.
//
// kube-apiserver runs with RBAC authorization, a static admin token
// (system:masters), service-account keys made for the run (so TokenRequest
// works) and --enable-bootstrap-token-auth (so the bootstrap token Secrets
// of kube-system authenticate as system:bootstrap:<id>). No controller
// manager runs: no controller acts on what tests create, namespaces are
// never emptied once deleted, and service-account tokens come only from
// TokenRequest.
//
// Tests see each other's objects only if they share a namespace: each test
// takes its own from Env.Namespace. Cluster-scoped objects and kube-system
// (where bootstrap token Secrets live) are shared; name them uniquely.
//
// # Lifetime
//
// The package's TestMain must run the tests through Run, which stops
// kube-apiserver and then etcd (SIGTERM, then waits; SIGKILL after 10 s)
// and removes the data directory when the tests end; Start fails a test of a
// package whose TestMain does not. Only the processes Start started are
// signalled. On Linux they also get SIGTERM should the test binary die
// without stopping them (a panic, -timeout, SIGKILL); their directory,
// $TMPDIR/kubetest-*, then stays behind.
//
// # When it cannot run
//
// When the go command, the tools module or the binaries are missing, or a
// process does not start, Start ends the test through internal/testenv: a
// skip with the reason by hand, a failure with FLEET_REQUIRE_INTEGRATION=1.
// Start also ends tests run with -short.
//
// # Cost
//
// A cold build of the binaries takes 5 to 9 minutes and 2.8 GB on two
// cores (scripts/test builds them before go test runs); warm, finding them
// takes about 2 s. Starting takes 6 to 9 s in all, about 3 s of it
// kube-apiserver becoming ready and 1 to 2 s the CRD delay; stopping about
// 1 to 2 s. Start logs where its time went.
//
// # Use
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }
//
//	func TestSomething(t *testing.T) {
//		env := kubetest.Start(t)
//		ns := env.Namespace(t)
//		dyn := dynamic.NewForConfigOrDie(env.Config())
//		// ... create objects in ns ...
//	}
//
// # CRDs
//
// examples/deploy/crds holds the CRDs controller-gen (tools/crd) generates
// from github.com/tinkerbell/tinkerbell/api's v1alpha1 types: go generate
// ./internal/kubetest rewrites them, and TestCRDsAreCurrent fails when they
// differ from what it generates.
package kubetest
