package inventory

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Inventory is a checked nodes file with its cluster topology. It is a
// value: nothing in it changes after Load or Parse returns, and it is safe
// to read from many goroutines.
//
// A nodes file has three mappings: models, classes and nodes.
//
//	models:
//	  ms-01:                      # a key of the hardware inventory
//	    manufacturer: Minisforum  # required: NetBox manufacturer
//	    name: MS-01               # required: NetBox device type
//	    disk: /dev/nvme0n1        # optional: install disk of its nodes
//	classes:
//	  controlplane:               # a Talos class
//	    type: controlplane        # required: controlplane or worker
//	    installer_image: factory.talos.dev/installer/<schematic>:v1.13.9  # required, pinned by tag or digest
//	  worker:
//	    type: worker
//	    installer_image: factory.talos.dev/installer/<schematic>:v1.13.9
//	    secure_boot: required     # optional: required, or optional (the default)
//	nodes:
//	  w-01:                       # host name: a DNS label
//	    model: ms-01              # required: a key under models
//	    serial: MS01-2407-0021    # required: the SMBIOS serial
//	    class: worker             # required: a key under classes
//	    switch_port: 5            # required: the switch port it stays on
//	    address: 10.40.0.21       # required: its static address, in K8S_NODE_CIDR
//	    bmc: amt                  # required: amt, ipmi, redfish or none
//	    disk: /dev/nvme0n1        # the install disk; required unless the model names one
//	    disk_serial: S6B0NL0W412345A   # the install disk's serial; a run waits until it is declared
//	    approved_ek_rsa2048: 1b5bbe2e96054f7bc34ebe7ba9a4a9eac5611c6879285ceff6094fa556af485c
//	    approved_ek_eccp256: 8fcef54df4c28620c6043ddab91157dcff92bc0d571c008d267674d1228c42fc
//
// The approved_ek_* fields hold the approved EK binding: the SHA-256 of each
// EK public key's DER SubjectPublicKeyInfo, as 64 lowercase hex characters,
// from independent evidence (a receiving scan, or the supplier's
// authenticated record). An entry without them attests as
// pending-approval; ApprovalLines formats the two lines for a waiting
// claim, and printing them approves nothing.
//
// A class with secure_boot: required admits its machines only when the
// TPM's quote proves a boot with Secure Boot on: a machine of the class
// whose proven boot is off, unknown, or not quoted at all is attested but
// gets no install code (see package provision). secure_boot: optional, or
// no secure_boot, admits its machines whatever their boot.
//
// Anchors, aliases and merge keys (<<) work as YAML defines them, so common
// fields can be shared.
type Inventory struct {
	Nodes    []Node           // in the order the file declares them
	Models   map[string]Model // by key
	Classes  map[string]Class // by name
	Topology Topology
}

// Node is one entry under nodes: one machine and what it may be.
type Node struct {
	Name       string     // host name: the entry's key, a DNS label
	Model      string     // key into Models
	Serial     string     // SMBIOS serial
	Class      string     // key into Classes: the Talos class
	SwitchPort int        // the switch port the machine stays on, 1 or more
	Address    netip.Addr // the static address, inside K8S_NODE_CIDR
	BMC        BMC        // how Rufio reaches the machine
	Disk       string     // install disk: the entry's disk, else its model's; "" if neither names one
	DiskSerial string     // install disk serial; "" until declared (a run waits for it)

	// The approved EK binding: SHA-256 of each EK's SubjectPublicKeyInfo,
	// 64 lowercase hex characters; "" when the entry approves none of that
	// type.
	ApprovedEKRSA2048 string
	ApprovedEKECCP256 string
}

// Prefix returns the node's address with the prefix length of
// K8S_NODE_CIDR: the address its Talos config sets statically.
func (inv *Inventory) Prefix(n Node) netip.Prefix {
	return netip.PrefixFrom(n.Address, inv.Topology.NodeCIDR.Bits())
}

// Node returns the node with the given host name.
func (inv *Inventory) Node(name string) (Node, bool) {
	for _, n := range inv.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// Model is one entry under models: a hardware model, keyed as the hardware
// inventory names it.
type Model struct {
	Key          string
	Manufacturer string // NetBox manufacturer, e.g. "Minisforum"
	Name         string // NetBox device type, e.g. "MS-01"
	Disk         string // install disk of this model's nodes unless a node names its own; may be ""
}

// Class is one entry under classes: a Talos class.
type Class struct {
	Name           string
	Type           MachineType
	InstallerImage string // the Talos installer image its nodes install
	// RequireSecureBoot is secure_boot: required: a machine of the class
	// gets an install code only when the TPM's quote proves a boot with
	// Secure Boot on. false (secure_boot: optional, or absent): its
	// machines are admitted whatever their boot.
	RequireSecureBoot bool
}

// The values of a class's secure_boot.
const (
	SecureBootRequired = "required"
	SecureBootOptional = "optional"
)

// MachineType is the Talos machine type of a class. The zero value is
// invalid.
type MachineType string

// The machine types a class may have.
const (
	ControlPlane MachineType = "controlplane"
	Worker       MachineType = "worker"
)

// BMC is how a node's BMC is reached. The zero value is invalid; a node
// without one says BMCNone.
type BMC string

// The BMC types a node may have.
const (
	BMCNone    BMC = "none"
	BMCAMT     BMC = "amt"
	BMCIPMI    BMC = "ipmi"
	BMCRedfish BMC = "redfish"
)

// The keys of a nodes file.
var (
	topKeys   = []string{"models", "classes", "nodes"}
	modelKeys = []string{"manufacturer", "name", "disk"}
	classKeys = []string{"type", "installer_image", "secure_boot"}
	nodeKeys  = []string{"model", "serial", "class", "switch_port", "address", "bmc", "disk", "disk_serial", "approved_ek_rsa2048", "approved_ek_eccp256"}
)

// Load reads the nodes file at nodesPath and the cluster topology at
// topologyPath and checks them together. When either is wrong it returns a
// Problems holding every problem in both files (errors.Is finds
// ErrInvalid); an unreadable file is an ordinary error.
//
// Load refuses:
//
//   - an unknown model or class;
//   - an address, switch port, serial, disk serial or approved EK that another
//     node holds (both nodes and both places are named);
//   - an approved EK hash that is not 64 lowercase hex characters;
//   - an address that is malformed, carries a prefix length, or lies outside
//     K8S_NODE_CIDR (or is its network or broadcast address);
//   - a missing required field, an empty value, an unknown field (a typo
//     such as disk_seral is named, with the field it resembles), a field
//     given twice;
//   - a host name given twice or that is not a DNS label;
//   - a model or class lacking its required fields, an unpinned installer
//     image, a secure_boot that is neither required nor optional;
//   - a file that is not YAML (the problem carries the line and column of
//     the mistake, or of the construct it leaves open), or a topology without a valid K8S_NODE_CIDR
//     and an API_SERVER_IP inside it.
//
// A bad file never panics.
func Load(nodesPath, topologyPath string) (*Inventory, error) {
	topoData, err := readFile(topologyPath)
	if err != nil {
		return nil, err
	}
	data, err := readFile(nodesPath)
	if err != nil {
		return nil, err
	}
	topo, topoErr := ParseTopology(topologyPath, topoData)
	var problems Problems
	if topoErr != nil {
		if !errors.As(topoErr, &problems) {
			return nil, topoErr
		}
	}
	var tp *Topology
	if topoErr == nil {
		tp = &topo
	}
	inv, nodeProblems := parse(nodesPath, data, tp)
	nodeProblems.sort()
	// The nodes file's problems first, then the topology's.
	problems = append(nodeProblems, problems...)
	if len(problems) > 0 {
		return nil, problems
	}
	return inv, nil
}

// Parse checks the nodes file in data against topo, a topology from
// ParseTopology or LoadTopology; name is the file name its problems carry.
// It returns a Problems holding every problem (errors.Is finds ErrInvalid).
func Parse(name string, data []byte, topo Topology) (*Inventory, error) {
	if !topo.NodeCIDR.IsValid() {
		return nil, Problems{{File: name, Text: "no cluster topology: " + TopologyNodeCIDR + " is unset"}}
	}
	inv, problems := parse(name, data, &topo)
	if len(problems) > 0 {
		problems.sort()
		return nil, problems
	}
	return inv, nil
}

// checker gathers problems while it walks a nodes file.
type checker struct {
	file     string
	problems Problems
}

func (c *checker) at(n *yaml.Node, subject, format string, args ...any) {
	p := Problem{File: c.file, Subject: subject, Text: fmt.Sprintf(format, args...)}
	if n != nil {
		p.Line, p.Column = n.Line, n.Column
	}
	c.problems = append(c.problems, p)
}

// where names the place of n for a problem reported elsewhere in the same
// file.
func (c *checker) where(n *yaml.Node) string {
	return fmt.Sprintf("line %d:%d", n.Line, n.Column)
}

// parse checks data; topo is nil when the topology itself was wrong, and
// then the checks that need it are left out.
func parse(name string, data []byte, topo *Topology) (*Inventory, Problems) {
	c := &checker{file: name}
	doc, err := parseYAML(data)
	if err != nil {
		p := Problem{File: name, Text: "not YAML: " + err.Error()}
		if se, ok := err.(*syntaxError); ok && se.line > 0 {
			p.Line, p.Column = se.line, se.column
		}
		return nil, Problems{p}
	}
	if doc == nil {
		c.at(nil, "", "empty: a nodes file has models, classes and nodes")
		return nil, c.problems
	}
	root := resolve(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		c.at(root, "", "the top level must be a mapping of models, classes and nodes, not %s", describeKind(root))
		return nil, c.problems
	}
	inv := &Inventory{Models: map[string]Model{}, Classes: map[string]Class{}}
	if topo != nil {
		inv.Topology = *topo
	}
	var modelsNode, classesNode, nodesNode *yaml.Node
	c.pairs(root, "", topKeys, "", func(k, v *yaml.Node) {
		switch k.Value {
		case "models":
			modelsNode = v
		case "classes":
			classesNode = v
		case "nodes":
			nodesNode = v
		}
	})
	c.entries(modelsNode, root, "models", "model", func(key, v *yaml.Node) { c.model(inv, key, v) })
	c.entries(classesNode, root, "classes", "class", func(key, v *yaml.Node) { c.class(inv, key, v) })
	n := 0
	if nodesNode != nil {
		n = len(nodesNode.Content) / 2
	}
	nv := newNodeValidator(c, inv, topo, n)
	c.entries(nodesNode, root, "nodes", "node", nv.node)
	if len(c.problems) > 0 {
		return nil, c.problems
	}
	return inv, nil
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// pairs calls fn for each key and value of the mapping m, with merge keys
// (<<) expanded by a mergeWalk, reporting unknown keys (known nil allows
// any key) and keys given twice.
//
// In a section (models, classes, nodes) entry names the kind of its
// entries, so that a name declared twice is reported against that entry.
func (c *checker) pairs(m *yaml.Node, subject string, known []string, entry string, fn func(k, v *yaml.Node)) {
	use := func(k, v *yaml.Node) {
		if known != nil && !contains(known, k.Value) {
			c.at(k, subject, "unknown field %q%s", k.Value, suggest(k.Value, known))
			return
		}
		fn(k, v)
	}
	w := &mergeWalk{c: c, subject: subject, seen: newKeyIndex(len(m.Content) / 2), explicit: explicitKeys(m)}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], resolve(m.Content[i+1])
		if isMergeKey(k) {
			for _, kv := range w.keys(v) {
				use(kv[0], kv[1])
			}
			continue
		}
		if k.Kind != yaml.ScalarNode || isNull(k) {
			c.at(k, subject, "a key must be a name, not %s", describeKind(k))
			continue
		}
		if prev := w.seen.get(k.Value); prev != nil {
			if entry != "" {
				c.at(k, entry+" "+k.Value, "declared twice; first at %s", c.where(prev))
			} else {
				c.at(k, subject, "%s is given twice; first at %s", k.Value, c.where(prev))
			}
			continue
		}
		w.seen.put(k.Value, k)
		use(k, v)
	}
}

// explicitKeys indexes the keys given in the mapping m itself, when m
// merges others in with <<; an empty index when it merges none.
func explicitKeys(m *yaml.Node) keyIndex {
	for i := 0; i < len(m.Content); i += 2 {
		if isMergeKey(m.Content[i]) {
			explicit := newKeyIndex(len(m.Content) / 2)
			for j := 0; j < len(m.Content); j += 2 {
				if k := m.Content[j]; !isMergeKey(k) {
					explicit.put(k.Value, k)
				}
			}
			return explicit
		}
	}
	return keyIndex{}
}

// mergeWalk finds the keys one mapping merges in with <<, for
// checker.pairs. A key given in the mapping itself overrides the same key
// merged in, wherever the merge key stands; of merged mappings the first
// wins.
type mergeWalk struct {
	c        *checker
	subject  string
	seen     keyIndex        // keys pairs handed on, or reported
	explicit keyIndex        // keys given in the mapping itself; empty when it merges none
	found    [][2]*yaml.Node // keys and values the current merge key brings
}

// keys returns, in order, the keys and values that v, the value of a merge
// key, brings and no key before it or in the mapping itself has brought,
// and marks them seen.
func (w *mergeWalk) keys(v *yaml.Node) [][2]*yaml.Node {
	w.found = w.found[:0]
	w.merge(v, 0)
	return w.found
}

// merge walks v: a mapping, or at the top a sequence of mappings, whose
// own merge keys nest up to 8 deep.
func (w *mergeWalk) merge(v *yaml.Node, depth int) {
	switch {
	case depth > 8:
		w.c.at(v, w.subject, "merge keys (<<) nest too deep")
	case v.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, mv := v.Content[i], resolve(v.Content[i+1])
			if isMergeKey(k) {
				w.merge(mv, depth+1)
				continue
			}
			if k.Kind != yaml.ScalarNode || w.explicit.get(k.Value) != nil || w.seen.get(k.Value) != nil {
				continue
			}
			w.seen.put(k.Value, k)
			w.found = append(w.found, [2]*yaml.Node{k, mv})
		}
	case v.Kind == yaml.SequenceNode && depth == 0:
		for _, e := range v.Content {
			if e = resolve(e); e.Kind == yaml.MappingNode {
				w.merge(e, depth+1)
			} else {
				w.c.at(e, w.subject, "a merge key (<<) takes mappings, not %s", describeKind(e))
			}
		}
	default:
		w.c.at(v, w.subject, "a merge key (<<) takes a mapping, not %s", describeKind(v))
	}
}

// keyIndex finds the keys of a mapping: by a linear search for the few keys
// of an entry, by a map for a section's many.
type keyIndex struct {
	small []*yaml.Node
	big   map[string]*yaml.Node
}

func newKeyIndex(n int) keyIndex {
	if n > 32 {
		return keyIndex{big: make(map[string]*yaml.Node, n)}
	}
	return keyIndex{small: make([]*yaml.Node, 0, n)}
}

func (ki *keyIndex) get(k string) *yaml.Node {
	if ki == nil {
		return nil
	}
	if ki.big != nil {
		return ki.big[k]
	}
	for _, n := range ki.small {
		if n.Value == k {
			return n
		}
	}
	return nil
}

func (ki *keyIndex) put(k string, n *yaml.Node) {
	if ki.big != nil {
		ki.big[k] = n
		return
	}
	ki.small = append(ki.small, n)
}

// isMergeKey reports whether k is YAML's merge key, <<.
func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style == 0
}

// entries walks a section (models, classes, nodes): a mapping of names to
// mappings. A missing nodes section is a problem; the others may be absent
// only when nothing refers to them, which the node checks report.
func (c *checker) entries(section, root *yaml.Node, name, what string, fn func(key, v *yaml.Node)) {
	if section == nil {
		if name == "nodes" {
			c.at(root, "", "no nodes: the file must have a nodes mapping")
		}
		return
	}
	if isNull(section) {
		return
	}
	if section.Kind != yaml.MappingNode {
		c.at(section, "", "%s must be a mapping of names to entries, not %s", name, describeKind(section))
		return
	}
	c.pairs(section, "", nil, what, func(k, v *yaml.Node) {
		if v.Kind != yaml.MappingNode {
			c.at(v, what+" "+k.Value, "the entry must be a mapping of fields, not %s", describeKind(v))
			return
		}
		fn(k, v)
	})
}

// str returns the text of a scalar field, reporting anything else.
func (c *checker) str(v *yaml.Node, subject, field string) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		c.at(v, subject, "%s must be a single value, not %s", field, describeKind(v))
		return "", false
	}
	if isNull(v) || strings.TrimSpace(v.Value) == "" {
		c.at(v, subject, "%s is empty", field)
		return "", false
	}
	return v.Value, true
}

func (c *checker) model(inv *Inventory, key, v *yaml.Node) {
	subject := "model " + key.Value
	m := Model{Key: key.Value}
	c.pairs(v, subject, modelKeys, "", func(k, fv *yaml.Node) {
		s, ok := c.str(fv, subject, k.Value)
		if !ok {
			return
		}
		switch k.Value {
		case "manufacturer":
			m.Manufacturer = s
		case "name":
			m.Name = s
		case "disk":
			if c.devPath(fv, subject, "disk", s) {
				m.Disk = s
			}
		}
	})
	c.require(key, subject, map[string]bool{"manufacturer": m.Manufacturer != "", "name": m.Name != ""}, v, modelKeys[:2])
	inv.Models[m.Key] = m
}

func (c *checker) class(inv *Inventory, key, v *yaml.Node) {
	subject := "class " + key.Value
	cl := Class{Name: key.Value}
	c.pairs(v, subject, classKeys, "", func(k, fv *yaml.Node) {
		s, ok := c.str(fv, subject, k.Value)
		if !ok {
			return
		}
		switch k.Value {
		case "type":
			switch t := MachineType(s); t {
			case ControlPlane, Worker:
				cl.Type = t
			default:
				c.at(fv, subject, "type %q is neither %s nor %s", s, ControlPlane, Worker)
			}
		case "installer_image":
			if why := imageProblem(s); why != "" {
				c.at(fv, subject, "installer_image %q %s", s, why)
				return
			}
			cl.InstallerImage = s
		case "secure_boot":
			switch s {
			case SecureBootRequired:
				cl.RequireSecureBoot = true
			case SecureBootOptional:
			default:
				c.at(fv, subject, "secure_boot %q is neither %s nor %s", s, SecureBootRequired, SecureBootOptional)
			}
		}
	})
	c.require(key, subject, map[string]bool{"type": cl.Type != "", "installer_image": cl.InstallerImage != ""}, v, classKeys[:2])
	inv.Classes[cl.Name] = cl
}

// require reports each field of order that the entry at key does not have.
// present says which fields came with a usable value; a field that was given
// but wrong has its own problem already.
func (c *checker) require(key *yaml.Node, subject string, present map[string]bool, entry *yaml.Node, order []string) {
	for _, f := range order {
		if !present[f] && !hasKey(entry, f) {
			c.at(key, subject, "%s is missing", f)
		}
	}
}

// hasKey reports whether the mapping m (or a mapping merged into it) has key.
func hasKey(m *yaml.Node, key string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if k.Value == key {
			return true
		}
		if isMergeKey(k) {
			v := resolve(m.Content[i+1])
			if v.Kind == yaml.MappingNode && hasKey(v, key) {
				return true
			}
			if v.Kind == yaml.SequenceNode {
				for _, e := range v.Content {
					if e = resolve(e); e.Kind == yaml.MappingNode && hasKey(e, key) {
						return true
					}
				}
			}
		}
	}
	return false
}

// devPath checks an install disk: a /dev path.
func (c *checker) devPath(v *yaml.Node, subject, field, s string) bool {
	if !strings.HasPrefix(s, "/dev/") || len(s) == len("/dev/") || strings.ContainsAny(s, " \t") || strings.Contains(s, "/../") {
		c.at(v, subject, "%s %q is not a device path such as /dev/nvme0n1 or /dev/disk/by-id/...", field, s)
		return false
	}
	return true
}

// imageProblem says what is wrong with an installer image reference, or "".
func imageProblem(s string) string {
	if strings.ContainsAny(s, " \t") {
		return "has white space"
	}
	if at := strings.Index(s, "@"); at >= 0 {
		d := s[at+1:]
		if !strings.HasPrefix(d, "sha256:") || !isLowerHex(d[len("sha256:"):]) {
			return "has a digest that is not sha256:<64 hex characters>"
		}
		s = s[:at]
	} else {
		slash := strings.LastIndex(s, "/")
		if !strings.Contains(s[slash+1:], ":") {
			return "names no tag or digest: pin the installer, e.g. ...:v1.13.9"
		}
	}
	if name, _, _ := strings.Cut(s, ":"); name == "" || strings.HasPrefix(s, "/") || strings.HasSuffix(s, ":") {
		return "is not an image reference"
	}
	return ""
}

// isLowerHex reports whether s is 64 lowercase hex characters: an EK hash
// or a sha256 digest.
func isLowerHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validHostName reports whether s is a DNS label, as a Kubernetes node
// name and a Talos host name must be: 1-63 lowercase letters, digits and
// hyphens, starting and ending with a letter or digit.
func validHostName(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// suggest returns ` (did you mean "x"?)` for the known key nearest to s,
// when one is near enough to be a typo.
func suggest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
