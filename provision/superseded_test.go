package provision

import (
	"slices"
	"testing"
	"testing/synctest"
)

// runNames returns the names of the Workflows in the harness's namespace.
func (h *harness) runNames() []string {
	var names []string
	for _, wf := range h.workflows() {
		names = append(names, wf.Name)
	}
	slices.Sort(names)
	return names
}

// A new run of a machine deletes its earlier runs whose end is journaled
// (on the real Tinkerbell: TestIntegrationTinkerbellEndedRunDeleted), so
// that tink-server, which takes the first Workflow it finds for the
// machine's MAC and serves nothing from one that ended, serves the new
// run. A run that ended and is not journaled yet stays until the next pass
// has journaled it, and that pass deletes it.
func TestSupersededRunsDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, _ := fakes.startWorker(t, nil)
		// run1 ends; before the loop journals it, desired_action=provision,
		// and the machine attests: run2.
		h.setStatus(run1, succeeded)
		run2 := h.rerun(run1).Run
		if got := h.runNames(); !slices.Equal(got, []string{run1, run2}) {
			t.Fatalf("Workflows %v, want %s kept until its end is journaled, and %s", got, run1, run2)
		}
		pass := h.reconcile()
		if !slices.Equal(pass.Ended, []string{run1}) {
			t.Errorf("pass ended %v, want %s", pass.Ended, run1)
		}
		if got := h.runNames(); !slices.Equal(got, []string{run2}) {
			t.Errorf("Workflows %v after the pass, want only %s", got, run2)
		}
		lines := h.nb.lines()
		if !slices.ContainsFunc(lines, func(l journalLine) bool { return l.Text == "Workflow "+run1+" ended SUCCESS" }) {
			t.Errorf("no end line of %s: %+v", run1, lines)
		}
	})
}
