package main

import (
	"cmp"
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
// table of fleet's devices in NetBox.
func statusFlags(fs *flag.FlagSet) func(*call) int {
	role := fs.String("role", inventory.DefaultRole, "the `SLUG` of the device role of fleet's devices")
	timeout := fs.Duration("timeout", 30*time.Second, "how long one NetBox request may take")
	output := outputFlag(fs)
	return func(c *call) int {
		jsonOut, ok := c.jsonOutput(*output)
		if !ok {
			return 2
		}
		devs, code := c.devices(*role, *timeout)
		if code != 0 {
			return code
		}
		if jsonOut {
			writeStatusJSON(c.stdout, devs, *role)
			return 0
		}
		writeStatus(c.stdout, devs, *role)
		return 0
	}
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

// writeStatus prints devices as an aligned table sorted by host name,
// then a count by status.
func writeStatus(w io.Writer, devs []inventory.Device, role string) {
	if len(devs) == 0 {
		fmt.Fprintf(w, "NetBox holds no device of role %s.\n", termsafe.Quote(role))
		return
	}
	devs = sortedDevices(devs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSERIAL\tSTATUS\tATTEST_VERDICT\tLAST_RUN\tDESIRED_ACTION")
	byStatus := map[string]int{}
	for _, d := range devs {
		byStatus[string(d.Status)]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n",
			cell(d.Name), cell(d.Serial), cell(string(d.Status)), cell(d.AttestVerdict), cell(d.LastRun), cell(d.DesiredAction))
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
	fmt.Fprintf(w, "\n%d %s: %s\n", len(devs), plural(len(devs), "device", "devices"), strings.Join(parts, ", "))
}

// writeStatusJSON prints devices as status -o json does.
func writeStatusJSON(w io.Writer, devs []inventory.Device, role string) {
	doc := statusJSON{FormatVersion: jsonFormat, Role: role, Devices: []deviceJSON{}}
	for _, d := range sortedDevices(devs) {
		doc.Devices = append(doc.Devices, newDeviceJSON(d))
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
