package inventory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
)

// Topology is what fleet reads of the cluster topology
// (clusters/<cluster>/config/cluster-topology.json). The file holds more
// keys, for other tools; fleet ignores them.
type Topology struct {
	// Name is CLUSTER_NAME, the cluster's name; "" when the file has none.
	Name string
	// NodeCIDR is K8S_NODE_CIDR: the Kubernetes network every node's
	// address lies in, and whose prefix length the node's static address
	// gets.
	NodeCIDR netip.Prefix
	// APIServerIP is API_SERVER_IP: the address of the cluster's first
	// control plane, which the Talos root bootstraps and fleetd never
	// installs.
	APIServerIP netip.Addr
}

// The keys of the cluster topology fleet reads.
const (
	TopologyNodeCIDR    = "K8S_NODE_CIDR"
	TopologyAPIServerIP = "API_SERVER_IP"
	TopologyName        = "CLUSTER_NAME"
)

// maxFileSize bounds what Load reads of a nodes file or topology: far above
// any real inventory (10,000 nodes take about 4 MB), far below what would
// exhaust memory.
const maxFileSize = 64 << 20

// LoadTopology reads and checks the cluster topology at path. Its error is
// a Problems (errors.Is finds ErrInvalid) when the file is readable but
// wrong.
func LoadTopology(path string) (Topology, error) {
	data, err := readFile(path)
	if err != nil {
		return Topology{}, err
	}
	return ParseTopology(path, data)
}

// ParseTopology checks the cluster topology in data; name is the file name
// its problems carry. Both keys must be present: K8S_NODE_CIDR an IPv4 or
// IPv6 prefix with no host bits set, API_SERVER_IP an address inside it.
// CLUSTER_NAME, when present, must be a string.
func ParseTopology(name string, data []byte) (Topology, error) {
	var (
		topo     Topology
		problems Problems
	)
	add := func(off int64, format string, args ...any) {
		line, col := position(data, off)
		problems = append(problems, Problem{File: name, Line: line, Column: col, Text: fmt.Sprintf(format, args...)})
	}
	values, syntaxOff, err := topLevelStrings(data)
	if err != nil {
		add(syntaxOff, "not a JSON object: %v", err)
		return Topology{}, problems
	}
	if name, ok := values[TopologyName]; ok {
		if name.err != "" {
			add(name.off, "%s: %s", TopologyName, name.err)
		} else {
			topo.Name = name.s
		}
	}
	cidr, ok := values[TopologyNodeCIDR]
	switch {
	case !ok:
		add(0, "%s is missing", TopologyNodeCIDR)
	case cidr.err != "":
		add(cidr.off, "%s: %s", TopologyNodeCIDR, cidr.err)
	default:
		p, err := netip.ParsePrefix(cidr.s)
		switch {
		case err != nil:
			add(cidr.off, "%s %q is not a CIDR prefix such as 10.20.0.0/24", TopologyNodeCIDR, cidr.s)
		case p.Masked() != p:
			add(cidr.off, "%s %q has host bits set; the prefix is %s", TopologyNodeCIDR, cidr.s, p.Masked())
		default:
			topo.NodeCIDR = p
		}
	}
	api, ok := values[TopologyAPIServerIP]
	switch {
	case !ok:
		add(0, "%s is missing", TopologyAPIServerIP)
	case api.err != "":
		add(api.off, "%s: %s", TopologyAPIServerIP, api.err)
	default:
		a, err := netip.ParseAddr(api.s)
		switch {
		case err != nil || a.Zone() != "":
			add(api.off, "%s %q is not an IP address", TopologyAPIServerIP, api.s)
		case topo.NodeCIDR.IsValid() && !topo.NodeCIDR.Contains(a):
			add(api.off, "%s %s is outside %s %s", TopologyAPIServerIP, a, TopologyNodeCIDR, topo.NodeCIDR)
		default:
			topo.APIServerIP = a
		}
	}
	if len(problems) > 0 {
		problems.sort()
		return Topology{}, problems
	}
	return topo, nil
}

type jsonString struct {
	s   string
	err string // why the value is not a string
	off int64  // where the value starts
}

// topLevelStrings reads a JSON object and returns its string-valued
// members with their offsets. Members whose value is not a string carry
// err. On a syntax error it returns the offset where reading stopped.
func topLevelStrings(data []byte) (map[string]jsonString, int64, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, dec.InputOffset(), err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, 0, fmt.Errorf("the top level is %s", jsonKind(tok))
	}
	out := make(map[string]jsonString)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, dec.InputOffset(), err
		}
		key := tok.(string) // json.Decoder yields object keys as strings
		off := valueStart(data, dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, dec.InputOffset(), err
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			out[key] = jsonString{err: "must be a string", off: off}
			continue
		}
		out[key] = jsonString{s: s, off: off}
	}
	if _, err := dec.Token(); err != nil {
		return nil, dec.InputOffset(), err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, dec.InputOffset(), fmt.Errorf("data after the top-level object")
	}
	return out, 0, nil
}

func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return "an array"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// valueStart skips the colon and white space after a key at off.
func valueStart(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// readFile reads at most maxFileSize bytes of path.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, maxFileSize>>20)
	}
	return data, nil
}
