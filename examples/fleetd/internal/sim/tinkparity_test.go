package sim

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
	"github.com/fleetkit/fleet/internal/kubetest"
	"github.com/fleetkit/fleet/internal/tinktest"
	"github.com/fleetkit/fleet/provision"
)

// realTinkServer hands the simulated machines' agents the real
// tink-server, through tinktest's client of its two calls.
type realTinkServer struct{ agent *tinktest.Agent }

func (r realTinkServer) GetAction(ctx context.Context, agentID string) (agentAction, error) {
	a, err := r.agent.GetAction(ctx, agentID)
	if err != nil {
		return agentAction{}, err
	}
	return agentAction{WorkflowID: a.WorkflowID, TaskID: a.TaskID, AgentID: a.AgentID, ActionID: a.ActionID, Name: a.Name, Environment: a.Environment}, nil
}

func (r realTinkServer) Report(ctx context.Context, a agentAction, state, message string, start, stop time.Time, duration string) error {
	act := &tinktest.Action{WorkflowID: a.WorkflowID, TaskID: a.TaskID, AgentID: a.AgentID, ActionID: a.ActionID, Name: a.Name}
	return r.agent.Report(ctx, act, state, message, start, stop, duration)
}

// paritySeen is what fleet saw of one case: each node's Workflow status
// changes (statusView, each once in a row), its journal with run names
// and durations made alike, and its device in NetBox.
type paritySeen struct {
	statuses map[string][]string
	journal  map[string][]string
	devices  map[string]string
}

// TestIntegrationTinkerbellParity runs one case on the real Tinkerbell
// (tink-controller and tink-server v0.25.0, the machines' agents its
// clients over gRPC) and on the simulation that the fleetd end-to-end
// tests and storms use, each on a control plane of its own, and compares
// what fleet saw: w-01 is provisioned; w-02's install fails. Both must
// show the same Workflow states in the same order (PENDING with the
// Template's tasks and global timeout, each action fetched, RUNNING, its
// end, POST, SUCCESS or FAILED), the same conditions, the same journal
// lines and the same devices. The simulation's agents are the same code
// in both halves; only Tinkerbell differs.
func TestIntegrationTinkerbellParity(t *testing.T) {
	seen := map[string]paritySeen{}
	for _, mode := range []string{"tinkerbell", "simulation"} {
		t.Run(mode, func(t *testing.T) { seen[mode] = parityCase(t, mode == "tinkerbell") })
	}
	real, sim := seen["tinkerbell"], seen["simulation"]
	if real.statuses == nil || sim.statuses == nil {
		t.Fatal("a half did not finish")
	}
	if diff := gocmp.Diff(real, sim, gocmp.AllowUnexported(paritySeen{})); diff != "" {
		t.Errorf("what fleet saw differs (-Tinkerbell +simulation):\n%s", diff)
	}
}

// parityCase runs the case on a control plane of its own, with the real
// Tinkerbell (real) or the simulated one.
func parityCase(t *testing.T, real bool) paritySeen {
	env := kubetest.StartOwn(t)
	ns := env.Namespace(t)
	kube, tink := kubetest.Clientset(t, env.Config()), kubetest.Dynamic(t, env.Config())
	f := newFleet(t, worldConfig{Validate: t, Edit: func(s *daemon.Settings) { s.Namespace = ns }, Kube: kube, Tink: tink},
		testNode{name: "w-01", class: "worker", approve: true}, testNode{name: "w-02", class: "worker", approve: true})
	f.sim.failAt = map[string]string{"w-02": "install"}
	if real {
		f.sim.server = realTinkServer{tinktest.Start(t, env, ns, nil).Agent()}
	}
	rec := recordStatuses(f.ctx, t, tink, ns)
	f.startTinkerbell()
	f.waitTemplates()
	f.powerOn("w-01", "w-02")
	f.provisioned("w-01", nodeAddr(0))
	f.waitJournal("w-02", "Workflow provision-w-02-")
	f.wait("w-02's failed run journaled", func() bool {
		return slices.ContainsFunc(f.journalOf("w-02"), func(l string) bool { return strings.Contains(l, " ended FAILED ") })
	})
	seen := paritySeen{statuses: rec.stop(), journal: map[string][]string{}, devices: map[string]string{}}
	for _, node := range []string{"w-01", "w-02"} {
		seen.journal[node] = alike(f.journalOf(node))
		d := f.readDevice(node)
		seen.devices[node] = fmt.Sprintf("status %s, verdict %s, desired_action %q, last run %s", d.Status, d.AttestVerdict, d.DesiredAction, alikeRun.ReplaceAllString(d.LastRun, "$1-<run>"))
		t.Logf("%s: %s", node, strings.Join(seen.statuses[node], " -> "))
	}
	return seen
}

var (
	alikeRun      = regexp.MustCompile(`(provision-w-\d+)-[0-9a-z]+`)
	alikeDuration = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`)
)

// alike is journal lines with run names and durations replaced, sorted:
// the two halves' lines differ in those alone, and fleet's lines of one
// device come from more than one goroutine.
func alike(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, alikeDuration.ReplaceAllString(alikeRun.ReplaceAllString(l, "$1-<run>"), "<d>"))
	}
	slices.Sort(out)
	return out
}

// statusRecorder records each Workflow status change of a namespace
// through a watch, by node.
type statusRecorder struct {
	mu   sync.Mutex
	by   map[string][]string
	done chan struct{}
	wt   watch.Interface
}

func recordStatuses(ctx context.Context, t *testing.T, tink dynamic.Interface, ns string) *statusRecorder {
	wt, err := tink.Resource(provision.WorkflowResource).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := &statusRecorder{by: map[string][]string{}, done: make(chan struct{}), wt: wt}
	go func() {
		defer close(r.done)
		for ev := range wt.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			var wf tinkerbell.Workflow
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &wf) != nil {
				continue
			}
			v := statusView(&wf)
			r.mu.Lock()
			if s := r.by[wf.Spec.HardwareRef]; len(s) == 0 || s[len(s)-1] != v {
				r.by[wf.Spec.HardwareRef] = append(s, v)
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *statusRecorder) stop() map[string][]string {
	r.wt.Stop()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.by
}

// statusView is what fleet reads of a Workflow's status: its state, the
// current action and its state, each action's state and message, whether
// the first action carries its start, the global timeout, and the
// conditions. globalExecutionStop is left out: tink-controller sets it
// only when it sees the first action's end before the agent fetches the
// next, a race either way.
func statusView(wf *tinkerbell.Workflow) string {
	st := wf.Status
	var b strings.Builder
	b.WriteString(cmp.Or(string(st.State), "-"))
	if cs := st.CurrentState; cs != nil {
		fmt.Fprintf(&b, " current %s %s", cs.ActionName, cs.State)
	}
	for _, task := range st.Tasks {
		fmt.Fprintf(&b, " [%s agent=%t:", task.Name, task.AgentID == st.AgentID && task.AgentID != "")
		for _, a := range task.Actions {
			fmt.Fprintf(&b, " %s=%s", a.Name, a.State)
			if a.Message != "" {
				fmt.Fprintf(&b, "(%s)", a.Message)
			}
			if a.ExecutionStart != nil {
				b.WriteString("+start")
			}
		}
		b.WriteString("]")
	}
	if st.GlobalTimeout != 0 {
		fmt.Fprintf(&b, " timeout %d", st.GlobalTimeout)
	}
	var conds []string
	for _, c := range st.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	slices.Sort(conds)
	if len(conds) > 0 {
		fmt.Fprintf(&b, " {%s}", strings.Join(conds, " "))
	}
	return b.String()
}
