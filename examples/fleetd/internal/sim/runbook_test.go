package sim

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
	"github.com/fleetkit/fleet/inventory"
	"github.com/fleetkit/fleet/provision"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// attestation waits until the machine's n'th attestation (from 1, one a
// boot) has ended, and returns its result and the console lines of every
// boot so far. The machine boots again only when the test power-cycles it
// (or Rufio does), so the result is the n'th one's.
func (f *testFleet) attestation(name string, n int) (attest.Result, []string) {
	f.t.Helper()
	m := f.machines[name]
	var res attest.Result
	var console []string
	f.wait(fmt.Sprintf("attestation %d of %s", n, name), func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		res, console = m.result, slices.Clone(m.console)
		return m.attests >= n
	})
	return res, console
}

// loopPasses waits until fleetd's provision loop has run n whole passes
// after the call. A pass begins by listing fleet's devices (by role), one
// pass after another, so the (n+1)th listing after the call begins only
// once n passes ended.
func (f *testFleet) loopPasses(n int) {
	f.t.Helper()
	lists := func() int {
		c := 0
		for _, r := range f.nbsrv.Requests() {
			if r.User == userFleetd && r.Method == http.MethodGet && strings.HasPrefix(r.URI, "/api/dcim/devices/?") && strings.Contains(r.URI, "role=") {
				c++
			}
		}
		return c
	}
	start := lists()
	f.wait(fmt.Sprintf("%d passes of the provision loop", n), func() bool { return lists() > start+n })
}

// wantConsole fails t when the console lines, less those of tries that
// failed ("attest: try N failed: ...": a loaded machine may time a try
// out, and the client tries again), are not want.
func wantConsole(t *testing.T, console, want []string) {
	t.Helper()
	got := slices.DeleteFunc(slices.Clone(console), func(l string) bool { return strings.HasPrefix(l, "attest: try ") })
	if !slices.Equal(got, want) {
		t.Errorf("console:\n%s\nwant:\n%s", strings.Join(console, "\n"), strings.Join(want, "\n"))
	}
}

// A control plane that never runs, whatever the operator asks: with
// desired_action unset and then set, its attestations get no code, and no
// run starts.
//
// support-off: the runbook's "Make sure that nix/hosts/spore.nix sets
// homelab.fleetd.controlPlanes = true ... Otherwise the run wipes the disk
// and installs nothing": fleet is safer, and starts no run at all. A
// control plane that attests while fleetd runs without control-plane
// support is told why it waits, naming homelab.fleetd.controlPlanes, even
// before desired_action is set; once it is, the loop journals the refusal,
// once, and keeps desired_action; the machine's next boot is refused with
// the same line.
//
// first-control-plane: the runbook's "The cluster's first control plane,
// at API_SERVER_IP, never installs this way": a control plane at
// API_SERVER_IP that attests from HookOS, desired_action=provision or not,
// is refused; the refusal is the machine's console line, the device's
// journal line, once, and the attest.install audit line.
//
// No Workflow, Rufio job or install code ever exists, the machine runs no
// action, and the device stays planned.
func TestControlPlaneNeverRuns(t *testing.T) {
	const (
		waits = "a control plane waits, and fleetd runs without control-plane support (homelab.fleetd.controlPlanes): no run starts, nothing is wiped, even with desired_action=provision"
		off   = "cp-02 is a control plane, and fleetd runs without control-plane support (homelab.fleetd.controlPlanes): no run starts, nothing is wiped, and desired_action stays provision"
		first = "refused a run before rendering anything: cp-01 is at API_SERVER_IP 127.0.0.10: the cluster's first control plane, which the Talos root bootstraps, never installs this way; no run starts, nothing is wiped"
	)
	for _, tc := range []struct {
		name string
		edit func(*daemon.Settings)
		node testNode
		// before is the first attestation's reason, without
		// desired_action; line the refusal's journal line, which the
		// second attestation's reason names.
		before, line string
		keeps        bool // desired_action stays provision
	}{
		{"support-off", func(s *daemon.Settings) { s.ControlPlanes = false }, testNode{name: "cp-02", class: "controlplane", approve: true},
			waits, off, true},
		{"first-control-plane", nil, testNode{name: "cp-01", class: "controlplane", approve: true, addr: "127.0.0.10"},
			"a control plane waits for desired_action=provision", first, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.node.name
			f := newTestFleet(t, tc.edit, tc.node)
			f.startTinkerbell()
			f.powerOn(name)
			res, console := f.attestation(name, 1)
			if res.Verdict != attest.Attested || res.InstallCode != "" || res.Reason != "no provision: "+tc.before {
				t.Fatalf("first attestation = %+v, want attested, no code, reason %q", res, "no provision: "+tc.before)
			}
			wantConsole(t, console, []string{"attest: PASSED", "attest: no provision: " + tc.before})

			f.setDesiredAction(name)
			f.waitJournal(name, "warning: "+tc.line)

			// The machine boots HookOS again: its attestation is refused
			// with the journal's line.
			f.machines[name].powerCycle()
			res, console = f.attestation(name, 2)
			if res.Verdict != attest.Attested || res.InstallCode != "" || res.Reason != "no provision: refused: "+tc.line {
				t.Fatalf("second attestation = %+v, want attested, no code, reason %q", res, "no provision: refused: "+tc.line)
			}
			wantConsole(t, console, []string{"attest: PASSED", "attest: no provision: " + tc.before, "attest: PASSED", "attest: no provision: refused: " + tc.line})
			var reasons []string
			for _, r := range f.auditLines("attest.install") {
				if r["node"] == name {
					reasons = append(reasons, fmt.Sprint(r["outcome"], ": ", r["reason"]))
				}
			}
			if want := []string{"no provision: " + tc.before, "refused: " + tc.line}; !slices.Equal(reasons, want) {
				t.Errorf("attest.install lines of %s:\n%s\nwant:\n%s", name, strings.Join(reasons, "\n"), strings.Join(want, "\n"))
			}

			// Passes of the loop after both refusals start nothing and
			// write the line no second time.
			f.loopPasses(3)
			if wfs := f.list(provision.WorkflowResource); len(wfs) != 0 {
				t.Errorf("%d Workflows, want none", len(wfs))
			}
			if jobs := f.list(provision.JobResource); len(jobs) != 0 {
				t.Errorf("%d Rufio jobs, want none", len(jobs))
			}
			if n := len(f.journalWith(name, "warning: "+tc.line)); n != 1 {
				t.Errorf("the refusal journaled %d times, want once:\n%s", n, strings.Join(f.journalOf(name), "\n"))
			}
			d := f.readDevice(name)
			if d.Status != inventory.StatusPlanned || tc.keeps && d.DesiredAction != inventory.DesiredActionProvision || d.LastRun != "" || d.AttestVerdict != "attested" {
				t.Errorf("%s: status %s, desired_action %q, last_run %q, attest_verdict %q; want planned, no run, attested (and provision kept: %v)",
					name, d.Status, d.DesiredAction, d.LastRun, d.AttestVerdict, tc.keeps)
			}
			m := f.machines[name]
			m.mu.Lock()
			boots, codes, installed := m.boots, len(m.codes), m.installed
			m.mu.Unlock()
			if boots != 2 || codes != 0 || installed {
				t.Errorf("%s booted %d times, received %d codes, installed %v; want 2 boots (by hand), no code, nothing installed", name, boots, codes, installed)
			}
		})
	}
}

// The runbook's "Approve a machine's EKs", whole: a machine whose entry
// approves no EK is told pending-approval, and its claim waits; the
// operator prints the claim's lines as fleetctl approve does, compares
// each hash with the evidence (the TPM's own EKs, as a receiving scan
// reads them), adds the lines to the node's entry and applies the nodes
// file as Terraform's user; the device then holds the hashes. Power-cycled,
// the machine attests again: attest: PASSED, with an install code, and the
// run starts and ends with the node active.
func TestApproveThenPowerCycle(t *testing.T) {
	f := newTestFleet(t, nil, testNode{name: "w-04", class: "worker"})
	f.startTinkerbell()
	m := f.machines["w-04"]
	f.powerOn("w-04")

	res, console := f.attestation("w-04", 1)
	if res.Verdict != attest.PendingApproval || res.InstallCode != "" {
		t.Fatalf("first attestation = %+v, want pending-approval without a code", res)
	}
	pending := []string{"attest: FAILED pending-approval", "attest: the entry approves no EK"}
	wantConsole(t, console, pending)
	if d := f.readDevice("w-04"); len(d.MAC) != 0 || d.AttestVerdict != "" || d.LastRun != "" {
		t.Errorf("pending-approval wrote to the device: %+v", d)
	}

	// mise run attest:approve SN-w-04
	claims, err := approveClaims(f.ctx, f.world, "SN-w-04")
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 {
		t.Fatalf("%d claims wait for SN-w-04, want 1: %+v", len(claims), claims)
	}
	evidence, err := attesttest.Approve(m.tpm)
	if err != nil {
		t.Fatal(err)
	}
	if claims[0].RSA2048 != evidence.RSA2048 || claims[0].ECCP256 != evidence.ECCP256 {
		t.Fatalf("the claim's hashes %s %s differ from the evidence %s %s", claims[0].RSA2048, claims[0].ECCP256, evidence.RSA2048, evidence.ECCP256)
	}
	lines := inventory.ApprovalLines(claims[0].RSA2048, claims[0].ECCP256)
	if want := "approved_ek_rsa2048: " + evidence.RSA2048 + "\napproved_ek_eccp256: " + evidence.ECCP256 + "\n"; lines != want {
		t.Fatalf("approval lines %q, want %q", lines, want)
	}

	// Add the lines to the node's entry, then atlantis plan and apply.
	nodes, err := os.ReadFile(f.nodes)
	if err != nil {
		t.Fatal(err)
	}
	entryEnd := "    disk_serial: DS-w-04\n"
	if !strings.Contains(string(nodes), entryEnd) {
		t.Fatalf("the nodes file has no entry ending %q:\n%s", entryEnd, nodes)
	}
	var indented strings.Builder
	for l := range strings.Lines(lines) {
		indented.WriteString("    " + l)
	}
	nodes = []byte(strings.Replace(string(nodes), entryEnd, entryEnd+indented.String(), 1))
	if err := os.WriteFile(f.nodes, nodes, 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Load(f.nodes, filepath.Join(filepath.Dir(f.nodes), "cluster-topology.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.apply(f.ctx, inv); err != nil {
		t.Fatal(err)
	}
	d := f.readDevice("w-04")
	if d.ApprovedEKHash != evidence.RSA2048 || d.ApprovedEKHashECC != evidence.ECCP256 {
		t.Fatalf("after the apply the device holds approved_ek_hash %q, approved_ek_hash_ecc %q; want the evidence's", d.ApprovedEKHash, d.ApprovedEKHashECC)
	}

	// Power-cycle the machine, so that HookOS attests again.
	m.powerCycle()
	res, console = f.attestation("w-04", 2)
	if res.Verdict != attest.Attested || res.InstallCode == "" {
		t.Fatalf("attestation after the approval = %+v, want attested with a code", res)
	}
	wantConsole(t, console, append(pending, "attest: PASSED", "install code written"))
	d = f.provisioned("w-04", "127.0.0.21")
	if d.AttestVerdict != "attested" || d.MAC.String() != m.mac.String() || d.AttestedEKHash != evidence.RSA2048 || d.AttestedEKHashECC != evidence.ECCP256 {
		t.Errorf("NetBox holds %+v", d)
	}
	var verdicts []string
	for _, r := range f.auditLines("attest.verdict") {
		verdicts = append(verdicts, fmt.Sprint(r["verdict"]))
	}
	if want := []string{"pending-approval", "attested"}; !slices.Equal(verdicts, want) {
		t.Errorf("attest.verdict lines %v, want %v", verdicts, want)
	}
	f.wantNoSecrets()
}
