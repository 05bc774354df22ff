package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/bmc"
	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/fleetkit/fleet/inventory"
)

// rpcBMC is the BMC of one or more machines, served as the consumer of
// bmclib's RPC provider (a Machine's providerOptions.rpc.consumerURL, one
// path per machine): it keeps each machine's power state and boot device,
// as a BMC does, and records what Rufio asked of it. A machine it refuses
// answers every power change with an error, as a BMC whose machine does
// not power on.
type rpcBMC struct {
	srv *httptest.Server

	mu      sync.Mutex
	power   map[string]string   // by machine: "on" or "off"
	calls   map[string][]string // by machine: "setPowerState off", "setBootDevice pxe efi", ...
	refuses map[string]string   // by machine: the error it answers a power change
	on      chan string         // a machine powered on
}

func newRPCBMC(t *testing.T) *rpcBMC {
	b := &rpcBMC{power: map[string]string{}, calls: map[string][]string{}, refuses: map[string]string{}, on: make(chan string, 16)}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

// url is the consumer URL of machine name.
func (b *rpcBMC) url(name string) string { return b.srv.URL + "/" + name }

func (b *rpcBMC) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     int64  `json:"id"`
		Host   string `json:"host"`
		Method string `json:"method"`
		Params struct {
			State   string `json:"state"`
			Device  string `json:"device"`
			EFIBoot bool   `json:"efiBoot"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	params := req.Params
	name := strings.TrimPrefix(r.URL.Path, "/")
	rsp := map[string]any{"id": req.ID, "host": req.Host}
	b.mu.Lock()
	if b.power[name] == "" {
		b.power[name] = "on"
	}
	switch req.Method {
	case "ping":
		rsp["result"] = "pong"
	case "getPowerState":
		rsp["result"] = b.power[name]
	case "setPowerState":
		b.calls[name] = append(b.calls[name], "setPowerState "+params.State)
		if msg := b.refuses[name]; msg != "" {
			rsp["error"] = map[string]any{"code": 500, "message": msg}
			break
		}
		b.power[name] = params.State
		if params.State == "on" {
			b.on <- name
		}
		rsp["result"] = "ok"
	case "setBootDevice":
		call := "setBootDevice " + params.Device
		if params.EFIBoot {
			call += " efi"
		}
		b.calls[name] = append(b.calls[name], call)
		rsp["result"] = "ok"
	default:
		rsp["error"] = map[string]any{"code": 400, "message": "unknown method " + req.Method}
	}
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rsp)
}

func (b *rpcBMC) callsOf(name string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls[name]...)
}

// The runbook's control plane on the real tink-controller and Rufio
// (Tinkerbell v0.25.0), the machine's BMC served through bmclib's RPC
// provider: an admitted control plane waits in HookOS; desired_action=
// provision starts the run; Rufio power-cycles the machine (off, a
// one-time PXE boot in EFI mode, on), so that its next attestation
// receives the install code. And "the Workflow's Rufio job fails to power
// the machine": a BMC that refuses gets the runbook's line, with the
// BMC's own words (Rufio writes them on the Job's failed Task) and the
// address to set.
func TestIntegrationRufioPowerCycles(t *testing.T) {
	bmcs := newRPCBMC(t)
	const refusal = "node-02's power supply does not answer"
	bmcs.refuses["node-02"] = refusal

	cp := attested(worker(1, "cp-01"))
	cp.Class = ClassControlPlane
	refusing := attested(worker(2, "node-02"))
	// A run whose Rufio Job failed is started again 5 s after it started
	// (PowerRetry; 30 minutes by default), should Rufio fail cp-01's.
	rt := newRealTink(t, 1800, func(_ *Cluster, c *Config) { c.PowerRetry = 5 * time.Second }, cp, refusing)
	h, ns, ctx := rt.harness, rt.ns, rt.ctx

	// The machines' BMCs answer over RPC: the Machines say so, and the
	// runs keep what they say but the host.
	for _, d := range []inventory.Device{cp, refusing} {
		h.create(MachineResource, bmc.GroupVersion.WithKind("Machine"), &bmc.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: ns},
			Spec: bmc.MachineSpec{Connection: bmc.Connection{
				Host:            d.Address.Addr().String(),
				ProviderOptions: &bmc.ProviderOptions{RPC: &bmc.RPCOptions{ConsumerURL: bmcs.url(d.Name)}},
			}},
		}, nil)
	}

	// An admitted control plane waits in HookOS after attestation.
	d, err := h.p.Admit(ctx, claimOf(cp))
	if err != nil || d.Outcome != NoProvision || d.Reason != "a control plane waits for desired_action=provision" {
		t.Fatalf("Admit(cp-01) = %+v, %v; want it to wait for desired_action", d, err)
	}
	for _, id := range []int64{1, 2} {
		h.nb.set(id, func(d *inventory.Device) { d.DesiredAction = inventory.DesiredActionProvision })
	}
	pass := h.reconcile()
	slices.Sort(pass.Started)
	if len(pass.Started) != 2 || !strings.HasPrefix(pass.Started[0], "provision-cp-01-") || !strings.HasPrefix(pass.Started[1], "provision-node-02-") {
		t.Fatalf("pass = %+v, want both runs started", pass)
	}
	cpRun := pass.Started[0]

	// Rufio power-cycles cp-01 into a PXE boot in EFI mode, and the
	// machine, booted into HookOS, attests and gets the run's code.
	// Meanwhile the loop passes, as fleetd's does. Rufio v0.25.0's Job
	// controller, its cache behind its own create of a Task, can create
	// the Task again and fail the Job ("... already exists"), before or
	// after the power on (seen on a loaded machine); cp-01's BMC never
	// refuses, so a failed Job of cp-01 is Rufio's own. fleet journals a
	// failed Job and sets desired_action to provision again, and a pass
	// after PowerRetry starts a new run, whose Job powers the machine on.
	t0 := time.Now()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	restarts := 0
	passes := func() {
		if !jobFailed(ctx, h.tinkAPI, ns, "netboot-"+cpRun) {
			return
		}
		for _, r := range h.reconcile().Started {
			if !strings.HasPrefix(r, "provision-cp-01-") {
				continue
			}
			restarts++
			t.Logf("run %s started after Rufio failed %s's Job: %s", r, cpRun, rufioState(h.tinkAPI, ns))
			if restarts > 4 {
				t.Fatalf("cp-01's run started a sixth time; Rufio's objects: %s", rufioState(h.tinkAPI, ns))
			}
			cpRun = r
		}
	}
	for pending := false; !pending; {
		for on := false; !on; {
			select {
			case name := <-bmcs.on:
				if name != "cp-01" {
					t.Fatalf("%s powered on; only cp-01's BMC powers a machine", name)
				}
				on = true
			case <-tick.C:
				passes()
			case <-ctx.Done():
				t.Fatalf("Rufio never powered cp-01 on; its BMC was asked %q; %s", bmcs.callsOf("cp-01"), rufioState(h.tinkAPI, ns))
			}
		}
		t.Logf("Rufio powered cp-01 on %v after its first run started (%d runs after it)", time.Since(t0).Round(time.Millisecond), restarts)
		// Rufio may run a task again (its status written late): the
		// machine was powered off, set to boot PXE in EFI mode, and
		// powered on last.
		calls := bmcs.callsOf("cp-01")
		if n := len(calls); n < 3 || calls[0] != "setPowerState off" || !slices.Equal(calls[n-2:], []string{"setBootDevice pxe efi", "setPowerState on"}) {
			t.Errorf("cp-01's BMC was asked %q, want the power off, a PXE boot in EFI mode, then the power on", calls)
		}
		// The machine boots HookOS and attests again: it receives the
		// run's code.
		d, err = h.p.Admit(ctx, claimOf(cp))
		if err != nil || d.Outcome != Provision || d.Run != cpRun || d.Code == "" {
			t.Fatalf("Admit(cp-01) after the power cycle = %+v, %v; want run %s with its code", d, err, cpRun)
		}
		// Its Workflow is PENDING once Rufio's Job completed.
		for run := cpRun; !pending && run == cpRun; {
			var wf tinkerbell.Workflow
			h.get(WorkflowResource, cpRun, &wf)
			pending = wf.Status.State == tinkerbell.WorkflowStatePending
			if pending {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("Workflow %s: state %q, conditions %+v; want PENDING once Rufio's job completed", cpRun, wf.Status.State, wf.Status.Conditions)
			case <-tick.C:
				passes() // a new run: its power on, its code, its PENDING
			case <-time.After(200 * time.Millisecond):
			}
		}
	}

	// node-02's BMC refuses: the loop journals the runbook's line, of any
	// of node-02's runs. Each line sets desired_action to provision again,
	// so a pass after PowerRetry starts another run, which its BMC refuses
	// in turn; on a loaded machine a pass can start the next run before
	// the line of the last one is read.
	var lineRun string
	line := rt.untilJournal(2, func(l string) bool {
		lineRun, _, _ = strings.Cut(strings.TrimPrefix(l, "the Rufio job netboot-"), " ")
		return strings.HasPrefix(lineRun, "provision-node-02-") &&
			strings.HasPrefix(l, fmt.Sprintf("the Rufio job netboot-%s of Workflow %s failed to power the machine: ", lineRun, lineRun))
	})
	t.Logf("node-02, %v after its run started: %s", time.Since(t0).Round(time.Millisecond), line)
	if !strings.Contains(line, "message: "+refusal+" ") || strings.ContainsAny(line, "\n\t") ||
		!strings.HasSuffix(line, "; set AMT's address to 10.0.0.22, or power the machine on by hand") {
		t.Errorf("node-02's line %q: want the BMC's words %q and the address to set", line, refusal)
	}
	// The line set desired_action to provision again: it says so still,
	// unless the last pass started node-02's next run from it.
	if got := h.nb.dev(2); got.DesiredAction != inventory.DesiredActionProvision && got.LastRun == lineRun {
		t.Errorf("node-02's desired_action = %q after the line of its last run %s, want provision again", got.DesiredAction, lineRun)
	}
}

// jobFailed reports whether Rufio's Job name in ns has failed.
func jobFailed(ctx context.Context, api dynamic.Interface, ns, name string) bool {
	u, err := api.Resource(JobResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	var job bmc.Job
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &job) == nil && job.HasCondition(bmc.JobFailed, bmc.ConditionTrue)
}

// rufioState says what Rufio's Jobs and Tasks of ns hold, each with its
// status: whether a Job that did not power a machine failed on its own.
func rufioState(api dynamic.Interface, ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	b.WriteString("Rufio's objects:")
	for _, res := range []string{"jobs", "tasks"} {
		list, err := api.Resource(bmc.GroupVersion.WithResource(res)).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, " %s: %v;", res, err)
			continue
		}
		for _, u := range list.Items {
			status, _ := json.Marshal(u.Object["status"])
			fmt.Fprintf(&b, " %s %s %s;", u.GetKind(), u.GetName(), status)
		}
	}
	return b.String()
}
