package inventory

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// nodeValidator checks node entries one by one and remembers which node
// holds each value that must be unique.
type nodeValidator struct {
	c    *checker
	inv  *Inventory
	topo *Topology

	addresses   map[netip.Addr]holder
	ports       map[int]holder
	serials     map[string]holder
	diskSerials map[string]holder
	eks         map[string]holder // approved EK hashes of either type
}

// holder is the node entry that first declared a value.
type holder struct {
	node  string
	field string
	at    *yaml.Node
}

// newNodeValidator prepares for about n nodes.
func newNodeValidator(c *checker, inv *Inventory, topo *Topology, n int) *nodeValidator {
	inv.Nodes = make([]Node, 0, n)
	return &nodeValidator{
		c: c, inv: inv, topo: topo,
		addresses:   make(map[netip.Addr]holder, n),
		ports:       make(map[int]holder, n),
		serials:     make(map[string]holder, n),
		diskSerials: make(map[string]holder, n),
		eks:         make(map[string]holder, 2*n),
	}
}

// claim records that node holds value in field, or reports the node that
// held it first.
func claim[K comparable](nv *nodeValidator, m map[K]holder, value K, shown string, node, field string, at *yaml.Node) {
	prev, taken := m[value]
	if !taken {
		m[value] = holder{node: node, field: field, at: at}
		return
	}
	subject := "node " + node
	switch {
	case prev.node == node:
		nv.c.at(at, subject, "%s equals %s (%s): each names its own key", field, prev.field, nv.c.where(prev.at))
	case prev.field == field:
		nv.c.at(at, subject, "%s %s is also held by node %s (%s)", field, shown, prev.node, nv.c.where(prev.at))
	default:
		nv.c.at(at, subject, "%s %s is also held by node %s as %s (%s)", field, shown, prev.node, prev.field, nv.c.where(prev.at))
	}
}

// node checks one entry under nodes and adds it to the inventory.
func (nv *nodeValidator) node(key, v *yaml.Node) {
	c := nv.c
	name := key.Value
	subject := "node " + name
	if !validHostName(name) {
		c.at(key, subject, "host name %q is not a DNS label: 1-63 lowercase letters, digits and hyphens, starting and ending with a letter or digit", name)
	}
	n := Node{Name: name}
	var present fieldSet
	c.pairs(v, subject, nodeKeys, "", func(k, fv *yaml.Node) {
		present.add(k.Value) // a field given but wrong is reported as such, not as missing
		if s, ok := c.str(fv, subject, k.Value); ok {
			nv.field(&n, k.Value, s, fv)
		}
	})
	for _, f := range requiredNodeKeys {
		if !present.has(f) {
			c.at(key, subject, "%s is missing", f)
		}
	}
	if !present.has("disk") && n.Model != "" {
		if md := nv.inv.Models[n.Model].Disk; md != "" {
			n.Disk = md
		} else {
			c.at(key, subject, "disk is missing, and model %s names no disk", n.Model)
		}
	}
	nv.inv.Nodes = append(nv.inv.Nodes, n)
}

// field checks the value s, at fv, of one field of node n's entry, sets it
// in n when it is right, and claims the values that must be unique.
func (nv *nodeValidator) field(n *Node, field, s string, fv *yaml.Node) {
	c := nv.c
	subject := "node " + n.Name
	switch field {
	case "model":
		if _, known := nv.inv.Models[s]; !known {
			c.at(fv, subject, "unknown model %q%s", s, nv.known("models", s, keys(nv.inv.Models)))
			return
		}
		n.Model = s
	case "serial":
		n.Serial = s
		claim(nv, nv.serials, s, s, n.Name, field, fv)
	case "class":
		if _, known := nv.inv.Classes[s]; !known {
			c.at(fv, subject, "unknown class %q%s", s, nv.known("classes", s, keys(nv.inv.Classes)))
			return
		}
		n.Class = s
	case "switch_port":
		p, err := strconv.Atoi(s)
		if err != nil || p < 1 {
			c.at(fv, subject, "switch_port %q is not a port number (1 or more)", s)
			return
		}
		n.SwitchPort = p
		claim(nv, nv.ports, p, s, n.Name, field, fv)
	case "address":
		a, ok := nv.address(fv, subject, s)
		if !ok {
			return
		}
		n.Address = a
		claim(nv, nv.addresses, a, a.String(), n.Name, field, fv)
	case "bmc":
		switch b := BMC(s); b {
		case BMCNone, BMCAMT, BMCIPMI, BMCRedfish:
			n.BMC = b
		default:
			c.at(fv, subject, "bmc %q is not one of %s, %s, %s, %s", s, BMCAMT, BMCIPMI, BMCRedfish, BMCNone)
		}
	case "disk":
		if c.devPath(fv, subject, field, s) {
			n.Disk = s
		}
	case "disk_serial":
		n.DiskSerial = s
		claim(nv, nv.diskSerials, s, s, n.Name, field, fv)
	case "approved_ek_rsa2048", "approved_ek_eccp256":
		if !isLowerHex(s) {
			c.at(fv, subject, "%s %q is not 64 lowercase hex characters", field, s)
			return
		}
		if field == "approved_ek_rsa2048" {
			n.ApprovedEKRSA2048 = s
		} else {
			n.ApprovedEKECCP256 = s
		}
		claim(nv, nv.eks, s, s, n.Name, field, fv)
	}
}

// requiredNodeKeys are the fields every node entry must have.
var requiredNodeKeys = []string{"model", "serial", "class", "switch_port", "address", "bmc"}

// fieldSet is a set of node fields, by their index in nodeKeys.
type fieldSet uint32

func (fs *fieldSet) add(field string) {
	if i := slices.Index(nodeKeys, field); i >= 0 {
		*fs |= 1 << i
	}
}

func (fs fieldSet) has(field string) bool {
	i := slices.Index(nodeKeys, field)
	return i >= 0 && fs&(1<<i) != 0
}

// address parses and places a node's address.
func (nv *nodeValidator) address(at *yaml.Node, subject, s string) (netip.Addr, bool) {
	c := nv.c
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		if _, perr := netip.ParsePrefix(s); perr == nil {
			c.at(at, subject, "address %q has a prefix length: write the address alone; the prefix is %s's", s, TopologyNodeCIDR)
		} else {
			c.at(at, subject, "address %q is not an IP address", s)
		}
		return netip.Addr{}, false
	}
	if nv.topo == nil {
		return a, true
	}
	cidr := nv.topo.NodeCIDR
	switch {
	case !cidr.Contains(a):
		c.at(at, subject, "address %s is outside %s %s", a, TopologyNodeCIDR, cidr)
		return netip.Addr{}, false
	case a == cidr.Addr() && cidr.Bits() < a.BitLen()-1:
		c.at(at, subject, "address %s is the network address of %s %s", a, TopologyNodeCIDR, cidr)
		return netip.Addr{}, false
	case a.Is4() && cidr.Bits() < 31 && a == lastAddr(cidr):
		c.at(at, subject, "address %s is the broadcast address of %s %s", a, TopologyNodeCIDR, cidr)
		return netip.Addr{}, false
	}
	return a, true
}

// lastAddr returns the highest address in p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// known says what a section holds, for an unknown reference, with a
// suggestion when one name is near.
func (nv *nodeValidator) known(section, s string, names []string) string {
	if len(names) == 0 {
		return fmt.Sprintf(": the file declares no %s", section)
	}
	if hint := suggest(s, names); hint != "" {
		return hint
	}
	return fmt.Sprintf(" (%s: %s)", section, strings.Join(names, ", "))
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
