package dockertest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/internal/deptest"
	"github.com/fleetkit/fleet/internal/dockertest"
	"github.com/fleetkit/fleet/internal/imagetest"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/testenv"
	"github.com/fleetkit/fleet/internal/tinktest"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Run(m)) }

// dockertest drives its programs as processes: it links no Tinkerbell
// package, no image builder, and none of fleet's packages.
func TestDeps(t *testing.T) {
	deptest.Check(t, "github.com/fleetkit/fleet/internal/dockertest", []string{
		"github.com/tinkerbell",
		"github.com/google/go-containerregistry",
		"github.com/fleetkit/fleet/internal/imagetest",
		"github.com/fleetkit/fleet/provision",
		"github.com/fleetkit/fleet/inventory",
		"github.com/fleetkit/fleet/attest",
		"github.com/fleetkit/fleet/disksafe",
	})
}

// The chain from Tinkerbell to a machine, with nothing of the machine's
// side played: a machine (its own network namespace, its own containerd
// and dockerd) runs Tinkerbell's agent with the docker runtime, which asks
// the real tink-server for its Workflows' actions, pulls their images,
// built by imagetest, from a registry on the test's loopback, runs them as
// containers on the machine's dockerd, and reports, so that
// tink-controller takes each Workflow to its end:
//
//   - good: an action writes a file into a volume the Template binds, and
//     an action runs the docker CLI of its image against the machine's
//     dockerd (its socket bound in, as fleet's Templates bind it) to pull
//     the stand-in installer image: SUCCESS.
//   - missing image: the registry lacks the action's image: FAILED, and
//     the agent's log says "error executing action" and "docker:", the
//     runbook's row for a tools image that could not be pulled.
//
// Fleet's own images run in this chain in TestIntegrationWholeMachine
// (examples/internal/wholemachine), which also holds the chain to a
// failing action: FAILED at it with Tinkerbell's message "action
// completed", its container's output, and the actions after it PENDING
// (its refused wipes).
//
// The Workflows run one after another on the one machine, each deleted
// once it ended: tink-server serves a worker nothing while one of its
// Workflows has ended and still exists.
func TestIntegrationAgentRunsAnAction(t *testing.T) {
	testenv.Short(t)
	testenv.Root(t, "network namespaces, dockerd")
	docker := testenv.Command(t, "docker", "docker.io")

	env := kubetest.Start(t)
	ns := env.Namespace(t)
	tb := tinktest.Start(t, env, ns, nil)
	dyn := kubetest.Dynamic(t, env.Config())

	reg := imagetest.StartRegistry(t)
	action := imagetest.Build(t, reg, "internal/dockertest/testaction", "fleettest/testaction", &imagetest.Config{Programs: []string{docker}})
	installer := imagetest.Installer(t, reg)
	missing := reg.Ref("fleet/missing", imagetest.DefaultTag)

	netns := fmt.Sprintf("dockertest-%d", os.Getpid())
	testenv.Netns(t, netns)
	d := dockertest.Start(t, &dockertest.Config{Netns: netns, Forward: []string{reg.Host(), tb.GRPC()}})

	const mac = "02:00:00:d0:c4:01"
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	kubetest.Create(ctx, t, dyn, kubetest.HardwareResource, ns, &tinkerbell.Hardware{
		ObjectMeta: metav1.ObjectMeta{Name: "machine-1"},
		Spec: tinkerbell.HardwareSpec{
			Interfaces: []tinkerbell.Interface{{DHCP: &tinkerbell.DHCP{MAC: mac, Hostname: "machine-1"}}},
		},
	})
	out := t.TempDir()
	top := t // the agent serves every subtest
	var agent *dockertest.Agent

	// run creates Template and Workflow name, of one task, whose volumes
	// and actions task gives, for the machine; starts the agent when none
	// runs yet, waits until the Workflow ends, logs where the time went,
	// deletes the Workflow, and returns it as it ended.
	run := func(t *testing.T, name, task string) tinkerbell.Workflow {
		t.Helper()
		data := "version: \"0.1\"\nname: " + name + "\nglobal_timeout: 600\ntasks:\n  - name: run\n    worker: \"{{.device_1}}\"\n" + task
		kubetest.Create(ctx, t, dyn, kubetest.TemplateResource, ns, &tinkerbell.Template{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       tinkerbell.TemplateSpec{Data: &data},
		})
		t0 := time.Now()
		kubetest.Create(ctx, t, dyn, kubetest.WorkflowResource, ns, &tinkerbell.Workflow{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: tinkerbell.WorkflowSpec{
				TemplateRef: name,
				HardwareRef: "machine-1",
				HardwareMap: map[string]string{"device_1": mac},
			},
		})
		t.Cleanup(func() { deleteWorkflow(t, dyn, ns, name) })
		var wf tinkerbell.Workflow
		if agent == nil {
			kubetest.WaitFor(ctx, t, dyn, kubetest.WorkflowResource, ns, name, &wf, func() bool { return wf.Status.State == tinkerbell.WorkflowStatePending })
			agent = d.StartAgent(top, mac, tb.GRPC())
			kubetest.WaitFor(ctx, t, dyn, kubetest.WorkflowResource, ns, name, &wf, func() bool {
				return len(wf.Status.Tasks) > 0 && wf.Status.Tasks[0].Actions[0].State != tinkerbell.WorkflowStatePending
			})
			t.Logf("the agent's first action began %v after it started", time.Since(agent.Started()).Round(time.Millisecond))
		}
		kubetest.WaitFor(ctx, t, dyn, kubetest.WorkflowResource, ns, name, &wf, func() bool {
			switch wf.Status.State {
			case tinkerbell.WorkflowStateSuccess, tinkerbell.WorkflowStateFailed, tinkerbell.WorkflowStateTimeout:
				return true
			}
			return false
		})
		var times []string
		for _, a := range wf.Status.Tasks[0].Actions {
			times = append(times, fmt.Sprintf("%s %s %s", a.Name, a.State, a.ExecutionDuration))
		}
		t.Logf("Workflow %s: %s %v after its create; actions: %s", name, wf.Status.State, time.Since(t0).Round(time.Millisecond), strings.Join(times, ", "))
		return wf
	}

	t.Run("good", func(t *testing.T) {
		wf := run(t, "good", fmt.Sprintf(`    volumes:
      - %s:/out
    actions:
      - name: write
        image: %s
        timeout: 120
        command: ["write", "/out/result"]
        environment:
          MESSAGE: written by the action
      - name: pull-installer
        image: %s
        timeout: 120
        command: ["run", "docker", "pull", %q]
        volumes:
          - %s:/var/run/docker.sock
`, out, action, action, installer, d.Socket()))
		if wf.Status.State != tinkerbell.WorkflowStateSuccess {
			t.Fatalf("Workflow good ended %s, want SUCCESS: %+v", wf.Status.State, wf.Status.Tasks)
		}
		if b, err := os.ReadFile(filepath.Join(out, "result")); err != nil || string(b) != "written by the action\n" {
			t.Errorf("the action's file holds %q (%v), want its MESSAGE", b, err)
		}
		if n := reg.Pulls("fleettest/testaction"); n < 1 {
			t.Errorf("the registry served %d pulls of the action's image, want at least 1", n)
		}
		if n := reg.Pulls(imagetest.InstallerRepo); n != 1 {
			t.Errorf("the registry served %d pulls of the installer image, want the action's 1", n)
		}
		if out, err := exec.Command(docker, "--host", "unix://"+d.Socket(), "image", "inspect", "--format", "{{.Config.Entrypoint}}", installer).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "[/bin/installer]" {
			t.Errorf("the machine's dockerd holds the installer image with entrypoint %q (%v), want [/bin/installer]", out, err)
		}
		acts := wf.Status.Tasks[0].Actions
		printed(t, d, agent, acts[0], `testaction: wrote "written by the action" to /out/result`)
		printed(t, d, agent, acts[1], "Status: Downloaded newer image for "+installer)
	})

	t.Run("missing image", func(t *testing.T) {
		before := reg.Pulls("fleet/missing")
		wf := run(t, "missing", fmt.Sprintf(`    actions:
      - name: missing
        image: %s
        timeout: 120
`, missing))
		if wf.Status.State != tinkerbell.WorkflowStateFailed || wf.Status.Tasks[0].Actions[0].Message != "action completed" {
			t.Fatalf("Workflow missing ended %s (%q), want FAILED with \"action completed\"", wf.Status.State, wf.Status.Tasks[0].Actions[0].Message)
		}
		if reg.Pulls("fleet/missing") == before {
			t.Error("the registry was not asked for the missing image")
		}
		var line string
		for l := range strings.Lines(agent.Output()) {
			if strings.Contains(l, `"msg":"error executing action"`) && strings.Contains(l, reg.Host()+"/fleet/missing") {
				line = l
			}
		}
		if !strings.Contains(line, "All attempts fail") || !strings.Contains(line, "#1: docker:") {
			t.Errorf("the agent's log says %q, want \"error executing action\" with \"All attempts fail: #1: docker:\"", line)
		}
	})
}

// printed fails t unless the container of action a printed a line holding
// text, as the machine's dockerd recorded it (Docker.Printed). It logs
// whether the agent's own log holds the text too: the agent may lose the
// end of a container's output.
func printed(t *testing.T, d *dockertest.Docker, agent *dockertest.Agent, a tinkerbell.Action, text string) {
	t.Helper()
	lines, ok := d.Printed("tinkerbell_"+a.Name+"_"+a.ID, 30*time.Second, func(l string) bool { return strings.Contains(l, text) })
	if !ok {
		t.Errorf("action %s printed no %q; it printed:\n%s", a.Name, text, strings.Join(lines, "\n"))
	} else if !strings.Contains(agent.Output(), strings.ReplaceAll(text, `"`, `\"`)) {
		t.Logf("the agent's log lacks the container's output %q", text)
	}
}

// deleteWorkflow deletes Workflow name and waits until it is gone, so
// that tink-server serves the worker's next one.
func deleteWorkflow(t *testing.T, dyn dynamic.Interface, ns, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := dyn.Resource(kubetest.WorkflowResource).Namespace(ns)
	if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete Workflow %s: %v", name, err)
		return
	}
	if err := kubetest.WaitGone(ctx, client, name); err != nil {
		t.Errorf("Workflow %s not deleted: %v", name, err)
	}
}
