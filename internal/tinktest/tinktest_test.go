package tinktest_test

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/deptest"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/testproc"
	"github.com/fleetkit/fleet/internal/tinktest"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/bmc"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }

// tinktest talks to Tinkerbell only through its process and Kubernetes
// objects: it links no Tinkerbell package, not even the API types, and
// none of fleet's packages.
func TestDeps(t *testing.T) {
	deptest.Check(t, "github.com/fleetkit/fleet/internal/tinktest", []string{
		"github.com/tinkerbell",
		"github.com/fleetkit/fleet/provision",
		"github.com/fleetkit/fleet/inventory",
		"github.com/fleetkit/fleet/attest",
	})
}

// templateData is a Template of one task with one action, for the worker
// the Workflow's hardwareMap names as device_1.
const templateData = `version: "0.1"
name: tinktest
global_timeout: 600
tasks:
  - name: run
    worker: "{{.device_1}}"
    actions:
      - name: hello
        image: 127.0.0.1:5000/tinktest/hello:v1
        timeout: 60
`

// Tinkerbell starts on the shared control plane, over the CRDs kubetest
// applied, with nothing but its grant; tink-controller takes a Workflow to
// PENDING, Rufio reports on a Machine, the grant refuses what tinkerbell
// does not need, and a second Start on the control plane is refused.
//
// An Agent then takes the Workflow through the real tink-server as
// Tinkerbell's agent does: GetAction hands it the action and sets
// currentState (its actionName before any report), RUNNING and then
// SUCCESS with "action completed" take the Workflow to POST, and
// tink-controller then to SUCCESS. The RUNNING report's zero times leave
// the action without an executionStart, as the real agent's do.
func TestIntegrationTinkerbellStarts(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	tb := tinktest.Start(t, env, ns, nil)
	if tb.Namespace() != ns {
		t.Errorf("Namespace() = %q, want %q", tb.Namespace(), ns)
	}
	if host, _, err := net.SplitHostPort(tb.GRPC()); err != nil || host != "127.0.0.1" {
		t.Errorf("GRPC() = %q (%v), want 127.0.0.1:<port>", tb.GRPC(), err)
	}
	if _, err := os.Stat(tb.Log()); err != nil {
		t.Errorf("Log(): %v", err)
	}
	dyn := kubetest.Dynamic(t, env.Config())

	t.Run("workflow", func(t *testing.T) {
		ctx := testenv.Context(t, 2*time.Minute)
		const mac = "02:00:00:00:00:01"
		kubetest.Create(ctx, t, dyn, kubetest.HardwareResource, ns, &tinkerbell.Hardware{
			ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
			Spec: tinkerbell.HardwareSpec{
				Interfaces: []tinkerbell.Interface{{DHCP: &tinkerbell.DHCP{MAC: mac, Hostname: "node-1"}}},
			},
		})
		kubetest.Create(ctx, t, dyn, kubetest.TemplateResource, ns, &tinkerbell.Template{
			ObjectMeta: metav1.ObjectMeta{Name: "tinktest"},
			Spec:       tinkerbell.TemplateSpec{Data: new(templateData)},
		})
		t0 := time.Now()
		kubetest.Create(ctx, t, dyn, kubetest.WorkflowResource, ns, &tinkerbell.Workflow{
			ObjectMeta: metav1.ObjectMeta{Name: "wf-1"},
			Spec: tinkerbell.WorkflowSpec{
				TemplateRef: "tinktest",
				HardwareRef: "node-1",
				HardwareMap: map[string]string{"device_1": mac},
			},
		})
		var wf tinkerbell.Workflow
		kubetest.WaitFor(ctx, t, dyn, kubetest.WorkflowResource, ns, "wf-1", &wf, func() bool {
			return wf.Status.State == tinkerbell.WorkflowStatePending
		})
		t.Logf("Workflow PENDING %v after its create", time.Since(t0).Round(time.Millisecond))
		if wf.Status.AgentID != mac {
			t.Errorf("status.agentID = %q, want the worker %q", wf.Status.AgentID, mac)
		}
		if len(wf.Status.Tasks) != 1 || len(wf.Status.Tasks[0].Actions) != 1 || wf.Status.Tasks[0].Actions[0].Name != "hello" {
			t.Fatalf("status.tasks = %+v, want one task with the action hello", wf.Status.Tasks)
		}

		agent := tb.Agent()
		a, err := agent.GetAction(ctx, mac)
		if err != nil {
			t.Fatal(err)
		}
		want := wf.Status.Tasks[0].Actions[0]
		if a.WorkflowID != ns+"/wf-1" || a.AgentID != mac || a.Name != "hello" || a.ActionID != want.ID || a.ActionID == "" ||
			a.TaskID != wf.Status.Tasks[0].ID || a.Image != "127.0.0.1:5000/tinktest/hello:v1" || a.Timeout != 60 {
			t.Fatalf("GetAction = %+v; the Workflow's action is %+v", a, want)
		}
		kubetest.WaitFor(ctx, t, dyn, kubetest.WorkflowResource, ns, "wf-1", &wf, func() bool {
			cs := wf.Status.CurrentState
			return cs != nil && cs.ActionName == "hello" && cs.State == tinkerbell.WorkflowStatePending
		})
		if wf.Status.State != tinkerbell.WorkflowStatePending {
			t.Errorf("state %s once the action was fetched, want PENDING", wf.Status.State)
		}

		if err := agent.Report(ctx, a, "RUNNING", "running action", time.Time{}, time.Time{}, ""); err != nil {
			t.Fatal(err)
		}
		kubetest.WaitFor(ctx, t, dyn, kubetest.WorkflowResource, ns, "wf-1", &wf, func() bool { return wf.Status.State == tinkerbell.WorkflowStateRunning })
		if act := wf.Status.Tasks[0].Actions[0]; act.State != tinkerbell.WorkflowStateRunning || act.ExecutionStart != nil || act.Message != "running action" {
			t.Errorf("action after RUNNING: %+v", act)
		}

		start := time.Now().UTC()
		stop := start.Add(1500 * time.Millisecond)
		if err := agent.Report(ctx, a, "SUCCESS", "action completed", start, stop, "1s500ms"); err != nil {
			t.Fatal(err)
		}
		kubetest.WaitFor(ctx, t, dyn, kubetest.WorkflowResource, ns, "wf-1", &wf, func() bool { return wf.Status.State == tinkerbell.WorkflowStateSuccess })
		act := wf.Status.Tasks[0].Actions[0]
		if act.State != tinkerbell.WorkflowStateSuccess || act.Message != "action completed" || act.ExecutionDuration != "1s500ms" ||
			act.ExecutionStart == nil || !act.ExecutionStart.Time.Equal(start.Truncate(time.Second)) {
			t.Errorf("action after SUCCESS: %+v", act)
		}

		if err := agent.Report(ctx, a, "BOGUS", "", time.Time{}, time.Time{}, ""); err == nil || !strings.Contains(err.Error(), "unknown state") {
			t.Errorf("report of state BOGUS: %v", err)
		}
	})

	t.Run("rufio", func(t *testing.T) {
		ctx := testenv.Context(t, time.Minute)
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "bmc-1", Namespace: ns},
			Data:       map[string][]byte{"username": []byte("admin"), "password": []byte("secret")},
		}
		if _, err := env.Admin().CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A BMC where nothing listens: each of Rufio's providers dials its
		// own port of 127.0.0.1 (443, 16992; the Machine's port for
		// ipmitool, when installed) and is refused at once.
		closed, err := testproc.FreePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		kubetest.Create(ctx, t, dyn, kubetest.MachineResource, ns, &bmc.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: "bmc-1"},
			Spec: bmc.MachineSpec{Connection: bmc.Connection{
				Host:          "127.0.0.1",
				Port:          closed[0],
				AuthSecretRef: corev1.SecretReference{Name: "bmc-1", Namespace: ns},
				InsecureTLS:   true,
			}},
		})
		var m bmc.Machine
		kubetest.WaitFor(ctx, t, dyn, kubetest.MachineResource, ns, "bmc-1", &m, func() bool {
			return len(m.Status.Conditions) > 0
		})
		t.Logf("Machine status written %v after its create: %+v", time.Since(t0).Round(time.Millisecond), m.Status)
		c := m.Status.Conditions[0]
		if c.Type != bmc.Contactable || c.Status != bmc.ConditionFalse || c.Message == "" {
			t.Errorf("conditions = %+v, want Contactable False with the connection's error", m.Status.Conditions)
		}
		if m.Status.Power != bmc.Unknown {
			t.Errorf("powerState = %q, want %q", m.Status.Power, bmc.Unknown)
		}
	})

	t.Run("least privilege", func(t *testing.T) {
		ctx := testenv.Context(t, time.Minute)
		cfg := env.ConfigFor(env.ServiceAccountToken(t, ns, tinktest.ServiceAccount))
		cs := kubetest.Clientset(t, cfg)
		sa := kubetest.Dynamic(t, cfg)
		// What it is granted works, so the refusals below are RBAC's.
		if _, err := sa.Resource(kubetest.WorkflowResource).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("list Workflows as %s: %v", tinktest.ServiceAccount, err)
		}
		if _, err := sa.Resource(kubetest.CRDResource).Get(ctx, "workflows.tinkerbell.org", metav1.GetOptions{}); err != nil {
			t.Fatalf("get its CRD as %s: %v", tinktest.ServiceAccount, err)
		}
		other := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "widgets.example.org"},
			"spec": map[string]any{
				"group": "example.org", "scope": "Namespaced",
				"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget"},
				"versions": []any{map[string]any{
					"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object"}},
				}},
			},
		}}
		for _, c := range []struct {
			what string
			do   func() error
		}{
			{"delete its namespace", func() error { return cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) }},
			{"create a Secret", func() error {
				_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
				return err
			}},
			{"list Pods", func() error { _, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err }},
			{"list CRDs", func() error { _, err := sa.Resource(kubetest.CRDResource).List(ctx, metav1.ListOptions{}); return err }},
			{"create another CRD", func() error {
				_, err := sa.Resource(kubetest.CRDResource).Create(ctx, other, metav1.CreateOptions{})
				return err
			}},
			{"apply another CRD", func() error {
				_, err := sa.Resource(kubetest.CRDResource).Apply(ctx, "widgets.example.org", other, metav1.ApplyOptions{FieldManager: "tinktest"})
				return err
			}},
			{"delete its CRD", func() error {
				return sa.Resource(kubetest.CRDResource).Delete(ctx, "workflows.tinkerbell.org", metav1.DeleteOptions{})
			}},
			{"bind itself to cluster-admin", func() error {
				_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, clusterAdmin(ns), metav1.CreateOptions{})
				return err
			}},
		} {
			if err := c.do(); !apierrors.IsForbidden(err) {
				t.Errorf("%s as %s: %v, want Forbidden", c.what, tinktest.ServiceAccount, err)
			}
		}
	})

	// Start refuses a second Tinkerbell on a control plane where one runs.
	t.Run("one per control plane", func(t *testing.T) {
		ft := &fatalRecorder{TB: t}
		func() {
			defer func() { _ = recover() }()
			tinktest.Start(ft, env, env.Namespace(t), nil)
		}()
		if !ft.fatal {
			t.Fatal("a second Start on the same control plane did not fail")
		}
	})
}

// fatalRecorder records a Fatalf instead of ending the test, and unwinds
// with a panic as Fatalf's Goexit would.
type fatalRecorder struct {
	testing.TB
	fatal bool
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.fatal = true
	f.Logf("(expected) "+format, args...)
	panic("fatal")
}
