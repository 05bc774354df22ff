package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// watchStatus prints the status table, then, every interval until ctx is
// done, a device's row again when it changed, as kubectl get -w does: a
// new device's row, a row whose status, Workflow state or action changed,
// and "NAME: no longer in NetBox" for a device that went. The first read
// failing exits 2; a later one is said on stderr once, the watch goes
// on, and "reading again" is said when a read succeeds after it. It
// returns 0 when ctx is done.
func (c *call) watchStatus(ctx context.Context, r *statusReader, role string, interval time.Duration) int {
	st, err := r.read(ctx)
	if err != nil {
		return c.failStatus(err)
	}
	widths := columnWidths(st)
	printed := map[int64][]string{}
	printRow := func(cells []string) {
		var b strings.Builder
		for i, v := range cells {
			if i == len(cells)-1 {
				b.WriteString(v)
				break
			}
			fmt.Fprintf(&b, "%-*s  ", widths[i], v)
		}
		fmt.Fprintln(c.stdout, b.String())
	}
	printRow(st.header())
	for _, d := range st.devices {
		row := st.row(d)
		printed[d.ID] = row
		printRow(row)
	}
	failing := false
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-tick.C:
		}
		st, err := r.read(ctx)
		switch {
		case ctx.Err() != nil:
			return 0
		case err != nil:
			if !failing {
				fmt.Fprintf(c.stderr, "fleetctl status: %v; trying again every %v\n", shortNetBoxError(netBoxURL(), err), interval)
			}
			failing = true
			continue
		case failing:
			fmt.Fprintln(c.stderr, "fleetctl status: reading again")
			failing = false
		}
		seen := map[int64]bool{}
		for _, d := range st.devices {
			seen[d.ID] = true
			row := st.row(d)
			if !slices.Equal(printed[d.ID], row) {
				printed[d.ID] = row
				printRow(row)
			}
		}
		for id, row := range printed {
			if !seen[id] {
				fmt.Fprintf(c.stdout, "%s: no longer in NetBox\n", row[0])
				delete(printed, id)
			}
		}
	}
}

// columnWidths are the widths of the status table's columns for st.
func columnWidths(st status) []int {
	h := st.header()
	widths := make([]int, len(h))
	for i, v := range h {
		widths[i] = len(v)
	}
	for _, d := range st.devices {
		for i, v := range st.row(d) {
			widths[i] = max(widths[i], len(v))
		}
	}
	return widths
}
