package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/syncbuf"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/inventory"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }

// setWorkflow creates the Workflow name in ns, or finds it, and sets its
// status: state and the current action, as tink-controller does.
func setWorkflow(t *testing.T, client dynamic.Interface, ns, name, state, action string) {
	t.Helper()
	res := client.Resource(workflowResource).Namespace(ns)
	ctx := t.Context()
	wf, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		wf = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "tinkerbell.org/v1alpha1", "kind": "Workflow",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"templateRef": "fleet-provision", "hardwareRef": name},
		}}
		if wf, err = res.Create(ctx, wf, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	must(t, unstructured.SetNestedField(wf.Object, state, "status", "state"))
	must(t, unstructured.SetNestedField(wf.Object, action, "status", "currentState", "actionName"))
	must(t, unstructured.SetNestedField(wf.Object, state, "status", "currentState", "state"))
	if _, err := res.UpdateStatus(ctx, wf, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// status -kubeconfig reads each device's Workflow: the state and current
// action of w-01's finished run and w-02's running one, in the namespace
// -namespace names; a kubeconfig that is not there is one short line.
// With -w it watches: each change of a row prints the row again.
func TestStatusWorkflows(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	client, err := dynamic.NewForConfig(env.Config())
	must(t, err)
	kubeconfig := env.Kubeconfig()
	_, nb := appliedNetBox(t)
	at := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	w1, w2 := device(t, nb, "7090-CN0F4K2"), device(t, nb, "7090-CN0F4K3")
	attested(t, nb, w1, "58:47:ca:70:00:21", at)
	must(t, nb.SetLastRun(t.Context(), w1.ID, "provision-w-01-1764684000"))
	must(t, nb.SetStatus(t.Context(), w1.ID, inventory.StatusActive))
	attested(t, nb, w2, "58:47:ca:70:00:22", at.Add(5*time.Minute))
	must(t, nb.SetLastRun(t.Context(), w2.ID, "provision-w-02-1764684300"))
	setWorkflow(t, client, ns, "provision-w-01-1764684000", "SUCCESS", "reboot")
	setWorkflow(t, client, ns, "provision-w-02-1764684300", "RUNNING", "wipe-disk")

	golden(t, "testdata/status-workflows.golden", runQuiet(t, 0, "status", "-kubeconfig", kubeconfig, "-namespace", ns))
	golden(t, "testdata/status-workflows.json.golden", runJSON(t, 0, "status", "-o", "json", "-kubeconfig", kubeconfig, "-namespace", ns))
	if code, _, errOut := fleetctl("status", "-kubeconfig", "/nonexistent/kubeconfig"); code != 2 ||
		!strings.HasPrefix(errOut, "fleetctl status: kubeconfig /nonexistent/kubeconfig: ") {
		t.Errorf("a missing kubeconfig: exit %d, stderr %q", code, errOut)
	}

	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	done := make(chan int)
	go func() {
		done <- runContext(ctx, []string{"status", "-w", "-interval", "50ms", "-kubeconfig", kubeconfig, "-namespace", ns}, &stdout, &stderr)
	}()
	waitFor := func(what string) {
		t.Helper()
		if err := testenv.Until(t.Context(), 20*time.Second, func() bool { return strings.Contains(stdout.String(), what) }); err != nil {
			t.Fatalf("the watch never printed %q (%v):\n%s%s", what, err, stdout.String(), stderr.String())
		}
	}
	waitFor("w-06 ")
	// The run moves on: each change is one row more.
	setWorkflow(t, client, ns, "provision-w-02-1764684300", "RUNNING", "install")
	waitFor("RUNNING         install")
	setWorkflow(t, client, ns, "provision-w-02-1764684300", "SUCCESS", "reboot")
	must(t, nb.SetStatus(t.Context(), device(t, nb, "7090-CN0F4K3").ID, inventory.StatusActive))
	waitFor("active   10.40.0.22  58:47:ca:70:00:22  attested        provision-w-02-1764684300  SUCCESS")
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("watch: exit %d\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) < 12 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("watch printed:\n%s", stdout.String())
	}
	// After the table, only rows of w-02, each different from the last.
	for i, l := range lines[11:] {
		if !strings.HasPrefix(l, "w-02 ") {
			t.Errorf("watch line %d is not w-02's: %q", 12+i, l)
		}
		if l == lines[10+i] {
			t.Errorf("watch printed an unchanged row again: %q", l)
		}
	}
	if stderr.String() != "" {
		t.Errorf("stderr: %s", stderr.String())
	}
}
