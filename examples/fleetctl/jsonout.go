package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"

	"github.com/fleetkit/fleet/inventory"
)

// jsonFormat is the format_version of every JSON document fleetctl prints.
// A change that renames, removes or retypes a key raises it; new keys may
// be added without raising it.
const jsonFormat = 1

// jsonHelp is the -h help of the -o flag: where the shape is documented.
const jsonHelp = "-o json prints one JSON object on stdout; fleetctl help json shows its keys."

// jsonShapes is what fleetctl help json prints: the keys of each command's
// JSON document, as the package documentation gives them.
const jsonShapes = `check, plan and status -o json print one JSON object, with the exit codes
of text output; errors that exit 2 stay text on stderr. Every key is always
present: null is an unset value, [] an empty list. "format_version" is 1; a
change that renames, removes or retypes a key raises it.

check -o json:
  {"format_version": 1, "file": NODES_FILE, "valid": bool, "problems": [PROBLEM...],
   "summary": null | {"nodes": n, "control_planes": n, "workers": n,
     "approved_ek_bindings": n, "models": n, "classes": n,
     "node_cidr": CIDR, "bootstrap_node": NAME | null}}
  PROBLEM: {"file": FILE, "line": n, "column": n (0: no place in the file),
     "subject": "node w-01" | "model ms-01" | "class worker" | null, "text": TEXT}

plan -o json:
  {"format_version": 1, "file": NODES_FILE, "problems": [PROBLEM...],
   "conflicts": [TEXT...],
   "changes": [{"action": "create" | "update", "kind": KIND, "name": NAME,
     "fields": [{"name": FIELD, "old": VALUE | null, "new": VALUE | null}...]}...],
   "unlisted": [NAME...], "add": n, "change": n}
  KIND: "custom field", "device role", "manufacturer", "device type" or "device"

status -o json:
  {"format_version": 1, "role": SLUG,
   "devices": [{"id": n, "name", "serial", "status", "class", "address",
     "mac", "switch_port": n, "attest_verdict", "attested_at" (RFC 3339),
     "last_run", "desired_action", "workflow": null | {"name": NAME,
       "state": STATE | null, "action": ACTION | null}}...]}
  workflow is read with -kubeconfig: the Workflow last_run names.
`

// outputFlag defines -o on fs: text (the default) or json.
func outputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", "text", "the output `FORMAT`: text or json")
}

// jsonOutput reports whether -o's value asks for JSON; ok is false,
// having printed the usage, when it is neither text nor json.
func (c *call) jsonOutput(format string) (jsonOut, ok bool) {
	switch format {
	case "text":
		return false, true
	case "json":
		return true, true
	}
	fmt.Fprintf(c.stderr, "fleetctl %s: -o %q: the output is text or json\n", c.name, format)
	c.fs.Usage()
	return false, false
}

// writeJSON prints v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// problemJSON is one problem of a nodes file or its topology.
type problemJSON struct {
	File    string  `json:"file"`
	Line    int     `json:"line"`    // 0: no place in the file
	Column  int     `json:"column"`  // 0 with line
	Subject *string `json:"subject"` // "node w-01", "model ms-01", ...; null for the file
	Text    string  `json:"text"`
}

func problemsJSON(ps inventory.Problems) []problemJSON {
	out := make([]problemJSON, len(ps))
	for i, p := range ps {
		out[i] = problemJSON{File: p.File, Line: p.Line, Column: p.Column, Subject: nullable(p.Subject), Text: p.Text}
	}
	return out
}

// checkJSON is what fleetctl check -o json prints.
type checkJSON struct {
	FormatVersion int           `json:"format_version"`
	File          string        `json:"file"`
	Valid         bool          `json:"valid"`
	Problems      []problemJSON `json:"problems"` // [] when valid
	Summary       *checkSumJSON `json:"summary"`  // null when not valid
}

// checkSumJSON counts a valid nodes file.
type checkSumJSON struct {
	Nodes         int    `json:"nodes"`
	ControlPlanes int    `json:"control_planes"`
	Workers       int    `json:"workers"`
	Approved      int    `json:"approved_ek_bindings"` // nodes whose entry approves an EK
	Models        int    `json:"models"`
	Classes       int    `json:"classes"`
	NodeCIDR      string `json:"node_cidr"`
	// BootstrapNode is the node at API_SERVER_IP, which the Talos root
	// bootstraps and fleetd never runs; null when no node is there.
	BootstrapNode *string `json:"bootstrap_node"`
}

// planJSON is what fleetctl plan -o json prints.
type planJSON struct {
	FormatVersion int           `json:"format_version"`
	File          string        `json:"file"`
	Problems      []problemJSON `json:"problems"`  // the nodes file's; when any, nothing else was read
	Conflicts     []string      `json:"conflicts"` // what NetBox holds that the nodes file cannot have
	Changes       []changeJSON  `json:"changes"`
	Unlisted      []string      `json:"unlisted"` // fleet's devices no entry names
	Add           int           `json:"add"`
	Change        int           `json:"change"`
}

type changeJSON struct {
	Action string      `json:"action"` // "create" or "update"
	Kind   string      `json:"kind"`   // "custom field", "device role", "manufacturer", "device type" or "device"
	Name   string      `json:"name"`
	Fields []fieldJSON `json:"fields"`
}

type fieldJSON struct {
	Name string  `json:"name"`
	Old  *string `json:"old"` // null: no value (always null in a create)
	New  *string `json:"new"` // null: no value
}

// newPlanJSON is the document of a plan, or of problems or conflicts
// (p nil).
func newPlanJSON(file string, p *inventory.Plan) planJSON {
	doc := planJSON{FormatVersion: jsonFormat, File: file, Problems: []problemJSON{}, Conflicts: []string{}, Changes: []changeJSON{}, Unlisted: []string{}}
	if p == nil {
		return doc
	}
	for _, c := range p.Changes {
		cj := changeJSON{Action: actionName(c.Action), Kind: c.Kind, Name: c.Name, Fields: make([]fieldJSON, len(c.Fields))}
		for i, f := range c.Fields {
			cj.Fields[i] = fieldJSON{Name: f.Name, Old: nullable(f.Old), New: nullable(f.New)}
		}
		doc.Changes = append(doc.Changes, cj)
	}
	doc.Unlisted = append(doc.Unlisted, p.Unlisted...)
	doc.Add, doc.Change = p.Counts()
	return doc
}

func actionName(a inventory.Action) string {
	switch a {
	case inventory.ActionCreate:
		return "create"
	case inventory.ActionUpdate:
		return "update"
	}
	return fmt.Sprintf("action %d", int(a))
}

// statusJSON is what fleetctl status -o json prints.
type statusJSON struct {
	FormatVersion int          `json:"format_version"`
	Role          string       `json:"role"`
	Devices       []deviceJSON `json:"devices"` // sorted by name, then NetBox ID
}

// deviceJSON is one of fleet's devices; null is a field NetBox holds no
// value of.
type deviceJSON struct {
	ID            int64   `json:"id"`
	Name          *string `json:"name"`
	Serial        *string `json:"serial"`
	Status        *string `json:"status"`
	Class         *string `json:"class"`
	Address       *string `json:"address"`     // the primary IPv4 address, without its prefix length
	MAC           *string `json:"mac"`         // recorded at the device's first attestation
	SwitchPort    *int    `json:"switch_port"` // the port its cable runs to
	AttestVerdict *string `json:"attest_verdict"`
	AttestedAt    *string `json:"attested_at"` // RFC 3339, UTC
	LastRun       *string `json:"last_run"`    // the device's current or last Workflow
	DesiredAction *string `json:"desired_action"`
	// Workflow is the Workflow last_run names, read with -kubeconfig; null
	// without -kubeconfig, or when the cluster holds no such Workflow.
	Workflow *workflowJSON `json:"workflow"`
}

// workflowJSON is a device's Workflow.
type workflowJSON struct {
	Name   string  `json:"name"`
	State  *string `json:"state"`  // e.g. "RUNNING", "SUCCESS"; null before tink-controller set one
	Action *string `json:"action"` // the action running, or the last one run; null before the first
}

func newDeviceJSON(d inventory.Device) deviceJSON {
	dj := deviceJSON{
		ID: d.ID, Name: nullable(d.Name), Serial: nullable(d.Serial), Status: nullable(string(d.Status)),
		Class: nullable(d.Class), Address: nullable(addr(d.Address)), MAC: nullable(d.MAC.String()),
		AttestVerdict: nullable(d.AttestVerdict), LastRun: nullable(d.LastRun), DesiredAction: nullable(d.DesiredAction),
	}
	if d.SwitchPort > 0 {
		dj.SwitchPort = &d.SwitchPort
	}
	if !d.AttestedAt.IsZero() {
		dj.AttestedAt = nullable(d.AttestedAt.UTC().Format("2006-01-02T15:04:05Z07:00"))
	}
	return dj
}

// addr is a prefix's address, "" for none.
func addr(p netip.Prefix) string {
	if !p.IsValid() {
		return ""
	}
	return p.Addr().String()
}

// nullable is s, or nil (JSON null) when s is "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
