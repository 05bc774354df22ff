package inventory

import (
	"fmt"
	"strconv"
	"strings"
)

// String renders the plan as terraform plan does: "+" for an object to
// create, "~" for one to update with each field's old -> new value (null
// for none), then a summary line such as "Plan: 2 to add, 1 to change.",
// or "No changes." when there is nothing to do. Devices NetBox holds that
// the nodes file does not name are listed in a note.
func (p *Plan) String() string {
	var b strings.Builder
	if p.Empty() {
		b.WriteString("No changes. NetBox matches the nodes file.\n")
		p.note(&b)
		return b.String()
	}
	b.WriteString("fleet will make these changes in NetBox:\n")
	prevKind := ""
	for _, c := range p.Changes {
		if c.Kind == "device" || c.Kind != prevKind {
			b.WriteString("\n")
		}
		prevKind = c.Kind
		sign := "+"
		if c.Action == ActionUpdate {
			sign = "~"
		}
		if c.Kind != "device" {
			// Objects fleet makes once are one line each.
			parts := make([]string, len(c.Fields))
			for i, f := range c.Fields {
				parts[i] = f.Name + " " + value(f.New)
			}
			fmt.Fprintf(&b, "  %s %s %s (%s)\n", sign, c.Kind, c.Name, strings.Join(parts, ", "))
			continue
		}
		fmt.Fprintf(&b, "  %s %s %s\n", sign, c.Kind, c.Name)
		width := 0
		for _, f := range c.Fields {
			width = max(width, len(f.Name))
		}
		for _, f := range c.Fields {
			if c.Action == ActionCreate {
				fmt.Fprintf(&b, "      + %-*s = %s\n", width, f.Name, value(f.New))
				continue
			}
			fmt.Fprintf(&b, "      ~ %-*s = %s -> %s\n", width, f.Name, value(f.Old), value(f.New))
		}
	}
	add, change := p.Counts()
	b.WriteString("\n")
	p.note(&b)
	fmt.Fprintf(&b, "Plan: %d to add, %d to change.\n", add, change)
	return b.String()
}

func (p *Plan) note(b *strings.Builder) {
	if len(p.Unlisted) == 0 {
		return
	}
	fmt.Fprintf(b, "Note: no entry of the nodes file names %d of fleet's devices in NetBox, which fleet never deletes: %s\n",
		len(p.Unlisted), strings.Join(p.Unlisted, ", "))
}

// value quotes a field's value; "" is null.
func value(s string) string {
	if s == "" {
		return "null"
	}
	return strconv.Quote(s)
}
