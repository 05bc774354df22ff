package sim

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/inventory"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// The demo's files, relative to the module's root: the example inventory,
// whose approved EK hashes are those of the demo's TPMs.
const (
	demoNodes    = "examples/testdata/nodes.yaml"
	demoTopology = "examples/testdata/cluster-topology.json"
	demoTPMs     = "examples/testdata/demo-tpms.pem"
)

// A demoCase is one machine of the demo and what it should end as.
type demoCase struct {
	node    string
	port    int  // the switch port it is plugged into
	swapped bool // a TPM the entry does not approve
	expect  string
	check   func(ctx context.Context, w *world, m *simMachine) (bool, string, error)
}

// RunDemo runs the runbook end to end in process: "Declare the node"
// applies examples/testdata/nodes.yaml to an in-process NetBox, then
// simulated machines boot HookOS and attest over HTTPS to a real fleetd,
// whose Workflows a simulated Tinkerbell runs. It prints a timeline
// and a final table, and exits 0 when every machine ended as expected.
func RunDemo(ctx context.Context, stdout, stderr io.Writer) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	ok, err := demo(ctx, root, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

// moduleRoot finds the directory holding the demo's files: the working
// directory or one above it.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, demoNodes)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s here or above: run the demo from the fleet repository", demoNodes)
		}
		dir = parent
	}
}

// timeline prints what happens, as it happens, one line each.
type timeline struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

func (t *timeline) say(who, source, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.out, "%6.2fs  %-8s %-9s %s\n", time.Since(t.start).Seconds(), who, source, text)
}

func demo(ctx context.Context, root string, out io.Writer) (bool, error) {
	start := time.Now()
	tl := &timeline{out: out, start: start}
	fmt.Fprintf(out, "fleet demo: the runbook \"Provision a node\" in one process\n\n")
	keys, err := demoKeys(filepath.Join(root, demoTPMs))
	if err != nil {
		return false, err
	}
	w, err := newWorld(ctx, worldConfig{Nodes: filepath.Join(root, demoNodes), Topology: filepath.Join(root, demoTopology)})
	if err != nil {
		return false, err
	}
	defer w.close()
	tl.say("netbox", "apply", fmt.Sprintf("%s applied: %d planned devices with their addresses and cables, and no MAC", demoNodes, len(w.devices)))

	// The cluster's first control plane is the Talos root's, never fleetd's.
	if err := w.admin.SetStatus(ctx, w.devices["cp-01"].ID, inventory.StatusActive); err != nil {
		return false, err
	}
	tl.say("cp-01", "netbox", "active: the first control plane, at API_SERVER_IP, bootstrapped by the Talos root")

	cases := demoCases()
	sim := &tinkSim{w: w, ns: w.settings.Namespace, machines: map[string]*simMachine{}, say: tl.say}
	machines := map[string]*simMachine{}
	for _, c := range cases {
		n, _ := w.inv.Node(c.node)
		k := keys[n.Serial]
		if c.swapped {
			k = [2]crypto.Signer{}
		}
		tpm, err := softTPM(k)
		if err != nil {
			return false, err
		}
		m := newSimMachine(w, c.node, n.Serial, tpm, c.port, tl.say)
		machines[c.node] = m
		sim.machines[m.mac.String()] = m
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { sim.run(runCtx) })
	wg.Go(func() { followJournal(runCtx, w, tl) })
	for _, c := range cases {
		tl.say(c.node, "power", fmt.Sprintf("on, plugged into port %d", c.port))
		wg.Go(func() { machines[c.node].run(runCtx) })
	}

	// The operator's part: approve nothing for w-04, but read its claim;
	// set desired_action on the control plane cp-03.
	err = operator(ctx, w, tl, machines)
	if err == nil {
		err = eventually(ctx, 60*time.Second, func() (bool, error) {
			for _, c := range cases {
				if ok, _, err := c.check(ctx, w, machines[c.node]); err != nil || !ok {
					return false, nil
				}
			}
			return true, nil
		})
	}
	if errors.Is(err, errTimeout) {
		err = nil // the table says which machine did not get there
	}
	time.Sleep(300 * time.Millisecond) // the last journal lines
	stop()
	wg.Wait()
	if err != nil {
		return false, err
	}
	return table(ctx, out, w, cases, machines, time.Since(start))
}

// operator does what the runbook asks of the operator in the demo.
func operator(ctx context.Context, w *world, tl *timeline, machines map[string]*simMachine) error {
	// Approve a machine's EKs: print the waiting claim and the two lines.
	err := eventually(ctx, 30*time.Second, func() (bool, error) {
		res, attested, _, _, _ := machines["w-04"].state()
		return attested && res.Verdict == attest.PendingApproval, nil
	})
	if err != nil {
		return fmt.Errorf("w-04 never waited for approval: %w", err)
	}
	serial := machines["w-04"].serial
	tl.say("operator", "approve", "fleetctl approve "+serial)
	claims, err := approveClaims(ctx, w, serial)
	if err != nil {
		return err
	}
	if len(claims) > 1 {
		tl.say("operator", "approve", fmt.Sprintf("  more than one TPM claims serial %s: %d claims; compare each with your evidence, and approve none you cannot tie to the machine", serial, len(claims)))
	}
	for _, claim := range claims {
		for _, l := range strings.Split(strings.TrimSpace(claim.Text), "\n") {
			tl.say("operator", "approve", "  "+l)
		}
		for _, l := range strings.Split(strings.TrimSpace(inventory.ApprovalLines(claim.RSA2048, claim.ECCP256)), "\n") {
			tl.say("operator", "approve", "  "+l)
		}
	}
	tl.say("operator", "approve", "  fleetctl approved nothing: compare each hash with your evidence")

	// Provision a control plane: it waits in HookOS until desired_action.
	err = eventually(ctx, 30*time.Second, func() (bool, error) {
		res, attested, _, _, _ := machines["cp-03"].state()
		return attested && res.Verdict == attest.Attested, nil
	})
	if err != nil {
		return fmt.Errorf("cp-03 never attested: %w", err)
	}
	op, err := inventory.NewNetBox(w.nbsrv.URL, w.nbsrv.Token(userOperator), nil)
	if err != nil {
		return err
	}
	if err := op.SetDesiredAction(ctx, w.devices["cp-03"].ID, inventory.DesiredActionProvision); err != nil {
		return err
	}
	tl.say("operator", "netbox", "cp-03: desired_action = provision")
	return nil
}

// approveClaims asks fleetd's approver API for the claims waiting for
// serial, as fleetctl approve does.
func approveClaims(ctx context.Context, w *world, serial string) ([]attest.WaitingClaim, error) {
	var c []attest.WaitingClaim
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url+daemon.ClaimsPath+serial, nil)
	if err != nil {
		return c, err
	}
	req.Header.Set("Authorization", "Bearer "+approverToken)
	rsp, err := w.client.Do(req)
	if err != nil {
		return c, err
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("GET %s%s: %s", daemon.ClaimsPath, serial, rsp.Status)
	}
	err = json.NewDecoder(rsp.Body).Decode(&c)
	return c, err
}

// followJournal prints each NetBox journal line as fleetd writes it.
func followJournal(ctx context.Context, w *world, tl *timeline) {
	var seen int64
	for {
		for _, e := range w.journal() {
			if e.ID > seen {
				seen = e.ID
				tl.say(e.Device, "journal", e.Kind+": "+e.Text)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// demoCases are the demo's machines: most reach active; one has a swapped
// TPM, one is not approved yet, one is on the wrong port, one control plane
// waits for desired_action, and one is provisioned by it.
func demoCases() []demoCase {
	active := func(ctx context.Context, w *world, m *simMachine) (bool, string, error) {
		d, err := w.device(ctx, m.name)
		if err != nil {
			return false, "", err
		}
		_, _, _, _, fetched := m.state()
		return d.Status == inventory.StatusActive && fetched == 1, string(d.Status), nil
	}
	verdict := func(v attest.Verdict, reason string) func(context.Context, *world, *simMachine) (bool, string, error) {
		return func(ctx context.Context, w *world, m *simMachine) (bool, string, error) {
			d, err := w.device(ctx, m.name)
			if err != nil {
				return false, "", err
			}
			res, attested, _, _, _ := m.state()
			ok := attested && res.Verdict == v && strings.Contains(res.Reason, reason) && d.Status == inventory.StatusPlanned
			return ok, string(d.Status), nil
		}
	}
	journaled := func(line string) func(context.Context, *world, *simMachine) (bool, string, error) {
		return func(ctx context.Context, w *world, m *simMachine) (bool, string, error) {
			d, err := w.device(ctx, m.name)
			if err != nil {
				return false, "", err
			}
			for _, e := range w.journal() {
				if e.Device == m.name && strings.Contains(e.Text, line) {
					return d.Status == inventory.StatusPlanned, string(d.Status), nil
				}
			}
			return false, string(d.Status), nil
		}
	}
	return []demoCase{
		{node: "w-01", port: 5, expect: "active", check: active},
		{node: "w-05", port: 10, expect: "active", check: active},
		{node: "w-06", port: 11, expect: "active", check: active},
		{node: "s-01", port: 9, expect: "active", check: active},
		{node: "cp-03", port: 3, expect: "active, after desired_action=provision", check: active},
		{node: "cp-02", port: 2, expect: "waits for desired_action", check: verdict(attest.Attested, "a control plane waits for desired_action=provision")},
		{node: "w-02", port: 12, expect: "refused: on port 12, expected 6", check: journaled("on port 12, expected 6")},
		{node: "w-03", port: 7, swapped: true, expect: "attest: FAILED ek-hash-mismatch", check: verdict(attest.EKHashMismatch, "")},
		{node: "w-04", port: 8, expect: "attest: FAILED pending-approval", check: verdict(attest.PendingApproval, "")},
	}
}

// table prints the final table and reports whether every machine ended as
// expected.
func table(ctx context.Context, out io.Writer, w *world, cases []demoCase, machines map[string]*simMachine, took time.Duration) (bool, error) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATUS\tVERDICT\tLAST RUN\tEXPECTED\tOK")
	all := true
	for _, c := range cases {
		m := machines[c.node]
		ok, _, err := c.check(ctx, w, m)
		if err != nil {
			return false, err
		}
		d, err := w.device(ctx, c.node)
		if err != nil {
			return false, err
		}
		res, _, _, _, _ := m.state()
		run := d.LastRun
		if run == "" {
			run = "-"
		}
		mark := "ok"
		if !ok {
			mark, all = "NO", false
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.node, d.Status, res.Verdict, run, c.expect, mark)
	}
	tw.Flush()
	fmt.Fprintf(out, "\n%d machines in %.1f s: ", len(cases), took.Seconds())
	if all {
		fmt.Fprintln(out, "every machine ended as expected")
	} else {
		fmt.Fprintln(out, "some machines did not end as expected")
	}
	return all, nil
}
