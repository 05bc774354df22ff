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

// A new run of a machine deletes its earlier runs whose end is journaled,
// so that tink-server, which takes the first Workflow it finds for the
// machine's MAC and serves nothing from one that ended, serves the new
// run. A run that ended and is not journaled yet stays until the next pass
// has journaled it, and that pass deletes it.
func TestSupersededRunsDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, _ := fakes.startWorker(t, nil)
		h.setStatus(run1, succeeded)
		h.reconcile() // journals run1's end

		// desired_action=provision, and the machine attests: run2.
		run2 := h.rerun(run1).Run
		if got := h.runNames(); !slices.Equal(got, []string{run2}) {
			t.Fatalf("Workflows %v once %s started, want only it: %s ended and is journaled", got, run2, run1)
		}

		// run2 ends; before the loop journals it, run3 starts.
		h.setStatus(run2, succeeded)
		run3 := h.rerun(run2).Run
		if got := h.runNames(); !slices.Equal(got, []string{run2, run3}) {
			t.Fatalf("Workflows %v, want %s kept until its end is journaled, and %s", got, run2, run3)
		}
		pass := h.reconcile()
		if !slices.Equal(pass.Ended, []string{run2}) {
			t.Errorf("pass ended %v, want %s", pass.Ended, run2)
		}
		if got := h.runNames(); !slices.Equal(got, []string{run3}) {
			t.Errorf("Workflows %v after the pass, want only %s", got, run3)
		}
		lines := h.nb.lines()
		if !slices.ContainsFunc(lines, func(l journalLine) bool { return l.Text == "Workflow "+run2+" ended SUCCESS" }) {
			t.Errorf("no end line of %s: %+v", run2, lines)
		}
	})
}
