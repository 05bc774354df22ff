package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetkit/fleet/internal/termsafe"
	"github.com/fleetkit/fleet/inventory"
)

// statusFlags defines fleetctl status's flags and returns its body: a
// table of fleet's devices in NetBox, with their Workflows when a
// kubeconfig names the cluster that runs them.
func statusFlags(fs *flag.FlagSet) func(*call) int {
	role := fs.String("role", inventory.DefaultRole, "the `SLUG` of the device role of fleet's devices")
	timeout := fs.Duration("timeout", 30*time.Second, "how long one NetBox request may take")
	output := outputFlag(fs)
	kubeconfig := fs.String("kubeconfig", "", "a kubeconfig `FILE` of the cluster that runs the Workflows, to show each device's Workflow state and action (default: none, and no Workflow is read)")
	namespace := fs.String("namespace", "tinkerbell", "the `NAMESPACE` of the Workflows")
	watch := fs.Bool("w", false, "watch: after the table, print a device's row again each time it changes, until interrupted")
	interval := fs.Duration("interval", 2*time.Second, "how often -w reads NetBox and the Workflows")
	return func(c *call) int {
		jsonOut, ok := c.jsonOutput(*output)
		if !ok {
			return 2
		}
		if jsonOut && *watch {
			fmt.Fprintf(c.stderr, "fleetctl status: -w prints text only\n")
			return c.usage()
		}
		nb, err := netBoxFromEnv(&inventory.NetBoxConfig{Role: *role, Timeout: *timeout})
		if err != nil {
			return c.fail(2, err)
		}
		r := &statusReader{nb: nb}
		if *kubeconfig != "" {
			if r.wf, err = newWorkflows(*kubeconfig, *namespace); err != nil {
				return c.fail(2, err)
			}
		}
		ctx, stop := c.context()
		defer stop()
		if *watch {
			return c.watchStatus(ctx, r, *role, *interval)
		}
		st, err := r.read(ctx)
		if err != nil {
			return c.failStatus(err)
		}
		if jsonOut {
			writeStatusJSON(c.stdout, st, *role)
			return 0
		}
		writeStatus(c.stdout, st, *role)
		return 0
	}
}

// statusReader reads what status shows.
type statusReader struct {
	nb *inventory.NetBox
	wf *workflows // nil: no Workflows are read
}

// status is what status shows: fleet's devices, sorted, and their
// Workflows when they were read.
type status struct {
	devices   []inventory.Device  // sorted by host name, then ID
	workflows map[string]workflow // by name; nil when not read
}

// read reads the devices, then the Workflows.
func (r *statusReader) read(ctx context.Context) (status, error) {
	devs, err := r.nb.Devices(ctx)
	if err != nil {
		return status{}, err
	}
	st := status{devices: sortedDevices(devs)}
	if r.wf != nil {
		if st.workflows, err = r.wf.byName(ctx); err != nil {
			return status{}, err
		}
	}
	return st, nil
}

// failStatus says why status could not read, and returns 2.
func (c *call) failStatus(err error) int {
	if errors.Is(err, inventory.ErrUnavailable) || errors.Is(err, inventory.ErrRefusedToken) {
		return c.failNetBox(err)
	}
	return c.fail(2, err)
}

// devices reads fleet's devices (of role) from the NetBox that NETBOX_URL
// and NETBOX_TOKEN name. code is 0 when it read them, and 2 when the
// environment names no NetBox or NetBox did not answer.
func (c *call) devices(role string, timeout time.Duration) (devs []inventory.Device, code int) {
	nb, err := netBoxFromEnv(&inventory.NetBoxConfig{Role: role, Timeout: timeout})
	if err != nil {
		return nil, c.fail(2, err)
	}
	ctx, stop := c.context()
	defer stop()
	devs, err = nb.Devices(ctx)
	if err != nil {
		return nil, c.failNetBox(err)
	}
	return devs, 0
}

// header is the status table's header.
func (st status) header() []string {
	h := []string{"NAME", "SERIAL", "STATUS", "ADDRESS", "MAC", "ATTEST_VERDICT", "LAST_RUN"}
	if st.workflows != nil {
		h = append(h, "WORKFLOW_STATE", "ACTION")
	}
	return append(h, "DESIRED_ACTION")
}

// row is d's row of the status table.
func (st status) row(d inventory.Device) []string {
	r := []string{cell(d.Name), cell(d.Serial), cell(string(d.Status)), cell(addr(d.Address)), cell(d.MAC.String()),
		cell(d.AttestVerdict), cell(d.LastRun)}
	if st.workflows != nil {
		wf := st.workflows[d.LastRun]
		if d.LastRun == "" {
			wf = workflow{}
		}
		r = append(r, cell(wf.State), cell(wf.Action))
	}
	return append(r, cell(d.DesiredAction))
}

// writeStatus prints st as an aligned table sorted by host name, then a
// count by status.
func writeStatus(w io.Writer, st status, role string) {
	if len(st.devices) == 0 {
		fmt.Fprintf(w, "NetBox holds no device of role %s.\n", termsafe.Quote(role))
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(st.header(), "\t"))
	byStatus := map[string]int{}
	for _, d := range st.devices {
		byStatus[string(d.Status)]++
		fmt.Fprintln(tw, strings.Join(st.row(d), "\t"))
	}
	tw.Flush()

	statuses := make([]string, 0, len(byStatus))
	for s := range byStatus {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	parts := make([]string, len(statuses))
	for i, s := range statuses {
		parts[i] = fmt.Sprintf("%d %s", byStatus[s], cell(s))
	}
	fmt.Fprintf(w, "\n%d %s: %s\n", len(st.devices), plural(len(st.devices), "device", "devices"), strings.Join(parts, ", "))
}

// writeStatusJSON prints st as status -o json does.
func writeStatusJSON(w io.Writer, st status, role string) {
	doc := statusJSON{FormatVersion: jsonFormat, Role: role, Devices: []deviceJSON{}}
	for _, d := range st.devices {
		dj := newDeviceJSON(d)
		if wf, ok := st.workflows[d.LastRun]; ok && d.LastRun != "" {
			dj.Workflow = &workflowJSON{Name: wf.Name, State: nullable(wf.State), Action: nullable(wf.Action)}
		}
		doc.Devices = append(doc.Devices, dj)
	}
	writeJSON(w, doc)
}

// sortedDevices is a copy of devs sorted by host name, then NetBox ID.
func sortedDevices(devs []inventory.Device) []inventory.Device {
	devs = slices.Clone(devs)
	slices.SortFunc(devs, func(a, b inventory.Device) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return devs
}

// netBoxEnv reads NETBOX_URL and NETBOX_TOKEN, which name the NetBox and
// its API token; it is an error when either is unset.
func netBoxEnv() (url, token string, err error) {
	url, token = os.Getenv("NETBOX_URL"), os.Getenv("NETBOX_TOKEN")
	if url == "" || token == "" {
		return "", "", errors.New("set NETBOX_URL to the NetBox (e.g. https://netbox.example) and NETBOX_TOKEN to an API token")
	}
	return url, token, nil
}

// netBoxFromEnv returns a client of the NetBox that NETBOX_URL and
// NETBOX_TOKEN name, as plan and apply reach it.
func netBoxFromEnv(cfg *inventory.NetBoxConfig) (*inventory.NetBox, error) {
	url, token, err := netBoxEnv()
	if err != nil {
		return nil, err
	}
	return inventory.NewNetBox(url, token, cfg)
}

// cell is a value as a table cell: "-" when empty, quoted when it holds
// space or anything a terminal does not print as itself.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return termsafe.Quote(s)
}
