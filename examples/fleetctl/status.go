package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetkit/fleet/internal/termsafe"
	"github.com/fleetkit/fleet/inventory"
)

// statusCmd runs fleetctl status: a table of fleet's devices in NetBox.
func statusCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", inventory.DefaultRole, "the `SLUG` of the device role of fleet's devices")
	timeout := fs.Duration("timeout", 30*time.Second, "how long one NetBox request may take")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fleetctl status [-role SLUG] [-timeout DURATION]")
		fmt.Fprintln(stderr, "NETBOX_URL and NETBOX_TOKEN name the NetBox and its API token.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	nb, err := netBoxFromEnv(&inventory.NetBoxConfig{Role: *role, Timeout: *timeout})
	if err != nil {
		fmt.Fprintf(stderr, "fleetctl status: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	devs, err := nb.Devices(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "fleetctl status: %v\n", err)
		return 2
	}
	writeStatus(stdout, devs, *role)
	return 0
}

// writeStatus prints devices as an aligned table sorted by host name,
// then a count by status.
func writeStatus(w io.Writer, devs []inventory.Device, role string) {
	if len(devs) == 0 {
		fmt.Fprintf(w, "NetBox holds no device of role %s.\n", termsafe.Quote(role))
		return
	}
	devs = slices.Clone(devs)
	slices.SortFunc(devs, func(a, b inventory.Device) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
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

// netBoxFromEnv returns a client of the NetBox that NETBOX_URL and
// NETBOX_TOKEN name, as plan and apply reach it.
func netBoxFromEnv(cfg *inventory.NetBoxConfig) (*inventory.NetBox, error) {
	url, token := os.Getenv("NETBOX_URL"), os.Getenv("NETBOX_TOKEN")
	if url == "" || token == "" {
		return nil, errors.New("set NETBOX_URL to the NetBox (e.g. https://netbox.example) and NETBOX_TOKEN to an API token")
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
