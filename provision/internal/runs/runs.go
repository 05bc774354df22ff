// Package runs reads fleet's runs, the Tinkerbell Workflows provision
// creates, as the cluster holds them. It is provision's, kept apart so that
// what reads untrusted cluster objects can be fuzzed without building
// Talos and client-go.
package runs

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tinkerbell/tinkerbell/api/v1alpha1/tinkerbell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Labels and annotations fleet puts on its Workflows.
const (
	LabelDeviceID = "fleet.fleetkit.dev/device-id"
	LabelRunKind  = "fleet.fleetkit.dev/run"
	AnnNode       = "fleet.fleetkit.dev/node"
	AnnHookOS     = "fleet.fleetkit.dev/hookos-address"
	AnnReported   = "fleet.fleetkit.dev/reported"
	AnnCreated    = "fleet.fleetkit.dev/created"
)

// ValueInstallCodeSHA256 is the template value that holds the SHA-256 of a
// run's install code, as 64 lowercase hex characters. A Workflow never
// carries the code itself.
const ValueInstallCodeSHA256 = "install_code_sha256"

// Run is one fleet Workflow as read from the cluster.
type Run struct {
	WF       tinkerbell.Workflow
	DeviceID int64  // the NetBox device the run is for (LabelDeviceID)
	Kind     string // "provision" or "retire" (LabelRunKind)
	Node     string // the node's name (AnnNode)
}

// Name is the Workflow's name.
func (r *Run) Name() string { return r.WF.Name }

// HookOS is the address the run's machine attested from in HookOS.
func (r *Run) HookOS() string {
	if a := r.WF.Annotations[AnnHookOS]; a != "" {
		return a
	}
	return "unknown"
}

// Reported is the mark fleet left when it journaled the run's end; "" before.
func (r *Run) Reported() string { return r.WF.Annotations[AnnReported] }

// Terminal reports whether the run ended, or its end is journaled.
func (r *Run) Terminal() bool {
	switch r.WF.Status.State {
	case tinkerbell.WorkflowStateSuccess, tinkerbell.WorkflowStateFailed, tinkerbell.WorkflowStateTimeout:
		return true
	}
	return r.Reported() != ""
}

// Started reports whether an action of the run reported its end. Until
// then Tinkerbell sets the run no deadline: tink-controller sets
// globalExecutionStop only once the first action reported its end (the
// agent reports RUNNING without a start time, and its end with one), so a
// run whose machine or agent died before, while its first action was
// fetched or RUNNING, stays PENDING or RUNNING for good.
func (r *Run) Started() bool {
	if r.WF.Status.GlobalExecutionStop != nil {
		return true
	}
	for _, t := range r.WF.Status.Tasks {
		for _, a := range t.Actions {
			switch a.State {
			case tinkerbell.WorkflowStateSuccess, tinkerbell.WorkflowStateFailed, tinkerbell.WorkflowStateTimeout:
				return true
			}
		}
	}
	return false
}

// CurrentAction is the action that holds the run: the one that failed or
// timed out, else the current one.
func (r *Run) CurrentAction() string {
	for _, t := range r.WF.Status.Tasks {
		for _, a := range t.Actions {
			if a.State == tinkerbell.WorkflowStateFailed || a.State == tinkerbell.WorkflowStateTimeout {
				return a.Name
			}
		}
	}
	if cs := r.WF.Status.CurrentState; cs != nil && cs.ActionName != "" {
		return cs.ActionName
	}
	return ""
}

// GlobalTimeout is the run's global timeout: Tinkerbell's figure once it
// rendered the template, else def.
func (r *Run) GlobalTimeout(def time.Duration) time.Duration {
	// Past a century the figure is nonsense (and would overflow).
	if s := r.WF.Status.GlobalTimeout; s > 0 && s < 100*365*24*3600 {
		return time.Duration(s) * time.Second
	}
	return def
}

// Stop is when the run's global timeout ends: Tinkerbell's
// globalExecutionStop (set true); else, once the first action reported its
// end (with its start), that start plus the global timeout (def when
// Tinkerbell reports none), the stop tink-controller would have set (set
// false); else the zero time. tink-controller sets the stop only while the
// first action is current: when the agent fetched the next action before
// the controller saw the first one's end, the run has none.
func (r *Run) Stop(def time.Duration) (stop time.Time, set bool) {
	if s := r.WF.Status.GlobalExecutionStop; s != nil {
		return s.Time, true
	}
	if t := r.WF.Status.Tasks; len(t) > 0 && len(t[0].Actions) > 0 && t[0].Actions[0].ExecutionStart != nil {
		return t[0].Actions[0].ExecutionStart.Add(r.GlobalTimeout(def)), false
	}
	return time.Time{}, false
}

// Created is when fleet created the run (by fleet's clock), else the
// Workflow's creation timestamp.
func (r *Run) Created() time.Time {
	if t, err := time.Parse(time.RFC3339, r.WF.Annotations[AnnCreated]); err == nil {
		return t
	}
	return r.WF.CreationTimestamp.Time
}

// CodeSHA256 is the SHA-256 of the run's install code as its Workflow
// carries it (ValueInstallCodeSHA256); "" when it carries none.
func (r *Run) CodeSHA256() string { return r.WF.Spec.HardwareMap[ValueInstallCodeSHA256] }

// BootJobFailure returns the message of a failed boot (Rufio) job.
func (r *Run) BootJobFailure() (string, bool) {
	for _, c := range r.WF.Status.Conditions {
		if (c.Type == tinkerbell.BootJobFailed || c.Type == tinkerbell.BootJobSetupFailed) && c.Status == metav1.ConditionTrue {
			return c.Message, true
		}
	}
	return "", false
}

// From reads a run. With full false, a run whose end is journaled is
// read from its metadata alone: the loop needs no more of it, and 1,000
// such runs cost a pass half its time otherwise.
func From(u *unstructured.Unstructured, full bool) (*Run, error) {
	r := &Run{}
	if !full && u.GetAnnotations()[AnnReported] != "" {
		r.WF.Name, r.WF.Namespace = u.GetName(), u.GetNamespace()
		r.WF.Labels, r.WF.Annotations = u.GetLabels(), u.GetAnnotations()
		r.WF.CreationTimestamp = u.GetCreationTimestamp()
	} else if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r.WF); err != nil {
		return nil, fmt.Errorf("workflow %s: %w", u.GetName(), err)
	}
	id, err := strconv.ParseInt(r.WF.Labels[LabelDeviceID], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: label %s: %w", u.GetName(), LabelDeviceID, err)
	}
	r.DeviceID = id
	r.Kind = r.WF.Labels[LabelRunKind]
	r.Node = r.WF.Annotations[AnnNode]
	return r, nil
}
