package inventory

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const (
	hashA = "1b5bbe2e96054f7bc34ebe7ba9a4a9eac5611c6879285ceff6094fa556af485c"
	hashB = "8b79d607109d613d398d5b49889cb09495322067e60aebc09b72575429ce4534"
	hashC = "e5dedd3f4ffa22d7fc3eee83e05e12ead50c7c1358845c8948403c1b9066e2b3"
)

// header declares one model and two classes; nodes follow from line 11.
const header = `models:
  ms-01:
    manufacturer: Minisforum
    name: MS-01
classes:
  worker:
    type: worker
    installer_image: factory.talos.dev/installer/abc:v1.13.9
  controlplane: {type: controlplane, installer_image: "factory.talos.dev/installer/abc:v1.13.9"}
nodes:
`

// node renders one node entry; fields overrides or (with "-") removes the
// default fields, in order.
func node(name string, fields ...string) string {
	def := [][2]string{
		{"model", "ms-01"}, {"serial", "SN-" + name}, {"class", "worker"},
		{"switch_port", "5"}, {"address", "10.40.0.21"}, {"bmc", "amt"},
		{"disk", "/dev/nvme0n1"}, {"disk_serial", "DS-" + name},
	}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, ": ")
		i := slices.IndexFunc(def, func(kv [2]string) bool { return kv[0] == strings.TrimPrefix(k, "-") })
		switch {
		case i < 0:
			def = append(def, [2]string{k, v})
		case strings.HasPrefix(k, "-"):
			def[i][1] = "\x00"
		default:
			def[i][1] = v
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "  %s:\n", name)
	for _, kv := range def {
		if kv[1] != "\x00" {
			fmt.Fprintf(&sb, "    %s: %s\n", kv[0], kv[1])
		}
	}
	return sb.String()
}

func TestParseValid(t *testing.T) {
	src := header +
		node("w-01", "approved_ek_rsa2048: "+hashA, "approved_ek_eccp256: "+hashB) +
		node("cp-02", "class: controlplane", "switch_port: 2", "address: 10.40.0.11", "-disk", "bmc: none")
	// cp-02 has no disk: give the model one.
	src = strings.Replace(src, "    name: MS-01\n", "    name: MS-01\n    disk: /dev/sda\n", 1)
	inv := parseNodes(t, src)
	want := &Inventory{
		Nodes: []Node{
			{Name: "w-01", Model: "ms-01", Serial: "SN-w-01", Class: "worker", SwitchPort: 5, Address: netip.MustParseAddr("10.40.0.21"), BMC: BMCAMT, Disk: "/dev/nvme0n1", DiskSerial: "DS-w-01", ApprovedEKRSA2048: hashA, ApprovedEKECCP256: hashB},
			{Name: "cp-02", Model: "ms-01", Serial: "SN-cp-02", Class: "controlplane", SwitchPort: 2, Address: netip.MustParseAddr("10.40.0.11"), BMC: BMCNone, Disk: "/dev/sda", DiskSerial: "DS-cp-02"},
		},
		Models: map[string]Model{"ms-01": {Key: "ms-01", Manufacturer: "Minisforum", Name: "MS-01", Disk: "/dev/sda"}},
		Classes: map[string]Class{
			"worker":       {Name: "worker", Type: Worker, InstallerImage: "factory.talos.dev/installer/abc:v1.13.9"},
			"controlplane": {Name: "controlplane", Type: ControlPlane, InstallerImage: "factory.talos.dev/installer/abc:v1.13.9"},
		},
		Topology: fleetTopology,
	}
	if diff := cmp.Diff(want, inv, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	if got := inv.Prefix(inv.Nodes[1]); got != netip.MustParsePrefix("10.40.0.11/24") {
		t.Errorf("Prefix = %v", got)
	}
}

// wantProblems checks that Parse refuses src with exactly the problem
// lines want.
func wantProblems(t *testing.T, src string, want []string) {
	t.Helper()
	_, err := Parse("nodes.yaml", []byte(src), fleetTopology)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Parse error = %v, want one that is ErrInvalid", err)
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("problems (-want +got):\n%s\nfile:\n%s", diff, src)
	}
}

// TestParseProblems holds one case per validation rule, each with the exact
// problem lines Parse reports. Node entries start at line 11.
func TestParseProblems(t *testing.T) {
	w2 := func(fields ...string) string {
		return node("w-02", append([]string{"switch_port: 6", "address: 10.40.0.22"}, fields...)...)
	}
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"unknown model", header + node("w-01", "model: ms-02"),
			[]string{`nodes.yaml:12:12: node w-01: unknown model "ms-02" (did you mean "ms-01"?)`}},
		{"unknown class", header + node("w-01", "class: gpu"),
			[]string{`nodes.yaml:14:12: node w-01: unknown class "gpu" (classes: controlplane, worker)`}},
		{"unknown class, typo", header + node("w-01", "class: wroker"),
			[]string{`nodes.yaml:14:12: node w-01: unknown class "wroker" (did you mean "worker"?)`}},
		{"address held by another node", header + node("w-01") + node("w-02", "switch_port: 6"),
			[]string{`nodes.yaml:25:14: node w-02: address 10.40.0.21 is also held by node w-01 (line 16:14)`}},
		{"switch port held by another node", header + node("w-01") + node("w-02", "address: 10.40.0.22"),
			[]string{`nodes.yaml:24:18: node w-02: switch_port 5 is also held by node w-01 (line 15:18)`}},
		{"serial held by another node", header + node("w-01") + w2("serial: SN-w-01"),
			[]string{`nodes.yaml:22:13: node w-02: serial SN-w-01 is also held by node w-01 (line 13:13)`}},
		{"disk serial held by another node", header + node("w-01") + w2("disk_serial: DS-w-01"),
			[]string{`nodes.yaml:28:18: node w-02: disk_serial DS-w-01 is also held by node w-01 (line 19:18)`}},
		{"approved EK held by another node", header + node("w-01", "approved_ek_rsa2048: "+hashA) + w2("approved_ek_rsa2048: "+hashA),
			[]string{`nodes.yaml:30:26: node w-02: approved_ek_rsa2048 ` + hashA + ` is also held by node w-01 (line 20:26)`}},
		{"approved EK held by another node as the other type", header + node("w-01", "approved_ek_rsa2048: "+hashA) + w2("approved_ek_eccp256: "+hashA),
			[]string{`nodes.yaml:30:26: node w-02: approved_ek_eccp256 ` + hashA + ` is also held by node w-01 as approved_ek_rsa2048 (line 20:26)`}},
		{"one node approves one hash twice", header + node("w-01", "approved_ek_rsa2048: "+hashA, "approved_ek_eccp256: "+hashA),
			[]string{`nodes.yaml:21:26: node w-01: approved_ek_eccp256 equals approved_ek_rsa2048 (line 20:26): each names its own key`}},
		{"approved EK in upper case", header + node("w-01", "approved_ek_rsa2048: "+strings.ToUpper(hashA)),
			[]string{`nodes.yaml:20:26: node w-01: approved_ek_rsa2048 "` + strings.ToUpper(hashA) + `" is not 64 lowercase hex characters`}},
		{"approved EK too short", header + node("w-01", "approved_ek_eccp256: "+hashA[:63]),
			[]string{`nodes.yaml:20:26: node w-01: approved_ek_eccp256 "` + hashA[:63] + `" is not 64 lowercase hex characters`}},
		{"approved EK not hex", header + node("w-01", "approved_ek_eccp256: "+hashA[:63]+"g"),
			[]string{`nodes.yaml:20:26: node w-01: approved_ek_eccp256 "` + hashA[:63] + `g" is not 64 lowercase hex characters`}},
		{"address outside K8S_NODE_CIDR", header + node("w-01", "address: 10.41.0.21"),
			[]string{`nodes.yaml:16:14: node w-01: address 10.41.0.21 is outside K8S_NODE_CIDR 10.40.0.0/24`}},
		{"network address", header + node("w-01", "address: 10.40.0.0"),
			[]string{`nodes.yaml:16:14: node w-01: address 10.40.0.0 is the network address of K8S_NODE_CIDR 10.40.0.0/24`}},
		{"broadcast address", header + node("w-01", "address: 10.40.0.255"),
			[]string{`nodes.yaml:16:14: node w-01: address 10.40.0.255 is the broadcast address of K8S_NODE_CIDR 10.40.0.0/24`}},
		{"malformed address", header + node("w-01", "address: 10.40.0.300"),
			[]string{`nodes.yaml:16:14: node w-01: address "10.40.0.300" is not an IP address`}},
		{"address with a prefix", header + node("w-01", "address: 10.40.0.21/24"),
			[]string{`nodes.yaml:16:14: node w-01: address "10.40.0.21/24" has a prefix length: write the address alone; the prefix is K8S_NODE_CIDR's`}},
		{"missing fields", header + node("w-01", "-model", "-serial", "-class", "-switch_port", "-address", "-bmc"),
			[]string{
				`nodes.yaml:11:3: node w-01: model is missing`,
				`nodes.yaml:11:3: node w-01: serial is missing`,
				`nodes.yaml:11:3: node w-01: class is missing`,
				`nodes.yaml:11:3: node w-01: switch_port is missing`,
				`nodes.yaml:11:3: node w-01: address is missing`,
				`nodes.yaml:11:3: node w-01: bmc is missing`,
			}},
		{"no disk and the model names none", header + node("w-01", "-disk"),
			[]string{`nodes.yaml:11:3: node w-01: disk is missing, and model ms-01 names no disk`}},
		{"empty value", header + node("w-01", "serial: ''"),
			[]string{`nodes.yaml:13:13: node w-01: serial is empty`}},
		{"null value", header + node("w-01", "serial: ~"),
			[]string{`nodes.yaml:13:13: node w-01: serial is empty`}},
		{"no value", header + strings.Replace(node("w-01"), "serial: SN-w-01", "serial:", 1),
			[]string{`nodes.yaml:13:12: node w-01: serial is empty`}},
		{"unknown key", header + node("w-01", "disk_seral: DS-9"),
			[]string{`nodes.yaml:20:5: node w-01: unknown field "disk_seral" (did you mean "disk_serial"?)`}},
		{"unknown key without a near one", header + node("w-01", "colour: red"),
			[]string{`nodes.yaml:20:5: node w-01: unknown field "colour"`}},
		{"field given twice", header + node("w-01", "serial: X", "disk_serial: Y") + "    serial: Z\n",
			[]string{`nodes.yaml:20:5: node w-01: serial is given twice; first at line 13:5`}},
		{"duplicate host name", header + node("w-01") + node("w-01", "switch_port: 6"),
			[]string{`nodes.yaml:20:3: node w-01: declared twice; first at line 11:3`}},
		{"invalid host name", header + node("Node_1"),
			[]string{`nodes.yaml:11:3: node Node_1: host name "Node_1" is not a DNS label: 1-63 lowercase letters, digits and hyphens, starting and ending with a letter or digit`}},
		{"host name too long", header + node(strings.Repeat("a", 64)),
			[]string{`nodes.yaml:11:3: node ` + strings.Repeat("a", 64) + `: host name "` + strings.Repeat("a", 64) + `" is not a DNS label: 1-63 lowercase letters, digits and hyphens, starting and ending with a letter or digit`}},
		{"switch port not a number", header + node("w-01", "switch_port: Port 5"),
			[]string{`nodes.yaml:15:18: node w-01: switch_port "Port 5" is not a port number (1 or more)`}},
		{"switch port zero", header + node("w-01", "switch_port: 0"),
			[]string{`nodes.yaml:15:18: node w-01: switch_port "0" is not a port number (1 or more)`}},
		{"unknown bmc", header + node("w-01", "bmc: ilo"),
			[]string{`nodes.yaml:17:10: node w-01: bmc "ilo" is not one of amt, ipmi, redfish, none`}},
		{"disk not a device path", header + node("w-01", "disk: nvme0n1"),
			[]string{`nodes.yaml:18:11: node w-01: disk "nvme0n1" is not a device path such as /dev/nvme0n1 or /dev/disk/by-id/...`}},
		{"value is a mapping", header + node("w-01", "serial: {a: b}"),
			[]string{`nodes.yaml:13:13: node w-01: serial must be a single value, not a mapping`}},
		{"entry is not a mapping", header + "  w-01: yes\n",
			[]string{`nodes.yaml:11:9: node w-01: the entry must be a mapping of fields, not "yes"`}},
		{"no nodes", strings.TrimSuffix(header, "nodes:\n"),
			[]string{`nodes.yaml:1:1: no nodes: the file must have a nodes mapping`}},
		{"unknown top-level key", header + node("w-01") + "node:\n  x: y\n",
			[]string{`nodes.yaml:20:1: unknown field "node" (did you mean "nodes"?)`}},
		{"model missing fields", "models:\n  m:\n    disk: /dev/sda\n    colour: red\nclasses: {}\nnodes: {}\n",
			[]string{
				`nodes.yaml:2:3: model m: manufacturer is missing`,
				`nodes.yaml:2:3: model m: name is missing`,
				`nodes.yaml:4:5: model m: unknown field "colour"`,
			}},
		{"class problems", "models: {}\nclasses:\n  w:\n    type: agent\n    installer_image: installer\n  x:\n    installer_image: r/i@sha256:abc\nnodes: {}\n",
			[]string{
				`nodes.yaml:4:11: class w: type "agent" is neither controlplane nor worker`,
				`nodes.yaml:5:22: class w: installer_image "installer" names no tag or digest: pin the installer, e.g. ...:v1.13.9`,
				`nodes.yaml:6:3: class x: type is missing`,
				`nodes.yaml:7:22: class x: installer_image "r/i@sha256:abc" has a digest that is not sha256:<64 hex characters>`,
			}},
		{"secure_boot neither required nor optional", classes("    secure_boot: on\n", ""),
			[]string{`nodes.yaml:9:18: class worker: secure_boot "on" is neither required nor optional`}},
		{"secure_boot misspelt", classes("    secure_boot: requried\n", ""),
			[]string{`nodes.yaml:9:18: class worker: secure_boot "requried" is neither required nor optional`}},
		{"secure_boot empty", classes("    secure_boot:\n", ""),
			[]string{`nodes.yaml:9:17: class worker: secure_boot is empty`}},
		{"secure_boot key misspelt", classes("    secureboot: required\n", ""),
			[]string{`nodes.yaml:9:5: class worker: unknown field "secureboot" (did you mean "secure_boot"?)`}},
		{"not a mapping", "- a\n- b\n",
			[]string{`nodes.yaml:1:1: the top level must be a mapping of models, classes and nodes, not a list`}},
		// A file that is not YAML is reported on the line a person finds the
		// mistake on, whether yaml.v3's parser or its scanner found it.
		{"unclosed flow sequence", "models: {}\nclasses: {}\nnodes: [\n  a: 1\n",
			[]string{"nodes.yaml:3:8: not YAML: did not find expected ',' or ']'"}},
		{"unclosed flow mapping", "models: {}\n\nclasses: {x: 1\nnodes: {}\n",
			[]string{"nodes.yaml:3:10: not YAML: did not find expected ',' or '}'"}},
		{"a key indented wrong", "models: {}\nclasses:\n  w:\n    type: worker\n   installer_image: x\nnodes: {}\n",
			[]string{"nodes.yaml:5:4: not YAML: did not find expected key"}},
		{"a key without a colon", "models: {}\nclasses: {}\nnodes\n",
			[]string{"nodes.yaml:3:1: not YAML: could not find expected ':'"}},
		{"a character no token starts with", "models: {}\nclasses: {}\nnodes: @x\n",
			[]string{"nodes.yaml:3:8: not YAML: found character that cannot start any token"}},
		{"a problem at the end of the file", "models: {}\nclasses: {}\nnodes:\n  a: [\n\n\n",
			[]string{"nodes.yaml:4:1: not YAML: did not find expected node content"}},
		{"a tab in the indentation", "models: {}\nclasses: {}\nnodes:\n\tw-01: {}\n",
			[]string{"nodes.yaml:4:1: not YAML: found character that cannot start any token"}},
		{"an unclosed quote", "models: {}\nclasses: \"x\nnodes: {}\n",
			[]string{"nodes.yaml:2:10: not YAML: found unexpected end of stream"}},
		{"an unknown anchor", "models: {}\nclasses: &a {}\nnodes: *b\n",
			[]string{"nodes.yaml:3:8: not YAML: unknown anchor 'b' referenced"}},
		{"empty file", "# nothing\n",
			[]string{`nodes.yaml: empty: a nodes file has models, classes and nodes`}},
		{"not YAML", "nodes:\n  a: [\n",
			[]string{`nodes.yaml:2:1: not YAML: did not find expected node content`}},
		{"every problem at once", header + node("w-01", "model: x", "address: 1.2.3.4") + node("w-02", "class: y", "bmc: z"),
			[]string{
				`nodes.yaml:12:12: node w-01: unknown model "x" (models: ms-01)`,
				`nodes.yaml:16:14: node w-01: address 1.2.3.4 is outside K8S_NODE_CIDR 10.40.0.0/24`,
				`nodes.yaml:23:12: node w-02: unknown class "y" (classes: controlplane, worker)`,
				`nodes.yaml:24:18: node w-02: switch_port 5 is also held by node w-01 (line 15:18)`,
				`nodes.yaml:26:10: node w-02: bmc "z" is not one of amt, ipmi, redfish, none`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantProblems(t, tc.src, tc.want) })
	}
}

// TestParseYAMLFeatures checks that anchors, merge keys and flow mappings
// (parsed by the full YAML parser) validate like plain block mappings.
func TestParseYAMLFeatures(t *testing.T) {
	src := header + `  w-01: &base
    model: ms-01
    serial: SN-1
    class: worker
    switch_port: 5
    address: 10.40.0.21
    bmc: amt
    disk: /dev/nvme0n1
  w-02:
    <<: *base
    serial: SN-2
    switch_port: 6
    address: "10.40.0.22"
  w-03: {model: ms-01, serial: SN-3, class: worker, switch_port: 7, address: 10.40.0.23, bmc: none, disk: /dev/sda}
`
	inv := parseNodes(t, src)
	if len(inv.Nodes) != 3 || inv.Nodes[1].Serial != "SN-2" || inv.Nodes[1].Disk != "/dev/nvme0n1" || inv.Nodes[1].SwitchPort != 6 {
		t.Errorf("Nodes = %+v", inv.Nodes)
	}
	// The merged entry still holds w-01's values where it does not
	// override them: no duplicate is reported for fields it replaced.
	bad := strings.Replace(src, "    switch_port: 6\n", "", 1)
	_, err := Parse("nodes.yaml", []byte(bad), fleetTopology)
	if err == nil || !strings.Contains(err.Error(), "node w-02: switch_port 5 is also held by node w-01") {
		t.Errorf("merged duplicate port: %v", err)
	}
}

func TestParseTopology(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string
	}{
		{`{"K8S_NODE_CIDR": "10.40.0.0/24", "API_SERVER_IP": "10.40.0.10", "OTHER": 5}`, ""},
		{`{"API_SERVER_IP": "10.40.0.10"}`, `t.json:1:1: K8S_NODE_CIDR is missing`},
		{"{\n  \"K8S_NODE_CIDR\": \"10.40.0.1/24\",\n  \"API_SERVER_IP\": \"10.40.0.10\"\n}", `t.json:2:20: K8S_NODE_CIDR "10.40.0.1/24" has host bits set; the prefix is 10.40.0.0/24`},
		{`{"K8S_NODE_CIDR": "10.40.0.0", "API_SERVER_IP": "10.40.0.10"}`, `t.json:1:19: K8S_NODE_CIDR "10.40.0.0" is not a CIDR prefix such as 10.20.0.0/24`},
		{`{"K8S_NODE_CIDR": "10.40.0.0/24", "API_SERVER_IP": "10.50.0.10"}`, `t.json:1:52: API_SERVER_IP 10.50.0.10 is outside K8S_NODE_CIDR 10.40.0.0/24`},
		{`{"K8S_NODE_CIDR": 5, "API_SERVER_IP": "x"}`, "t.json:1:19: K8S_NODE_CIDR: must be a string\nt.json:1:39: API_SERVER_IP \"x\" is not an IP address"},
		{`[1]`, `t.json:1:1: not a JSON object: the top level is an array`},
		{`{"K8S_NODE_CIDR": "10.40.0.0/24",`, `t.json:1:34: not a JSON object: EOF`},
		{`{"K8S_NODE_CIDR": "10.40.0.0/24", "API_SERVER_IP": "10.40.0.10"} {}`, `t.json:1:67: not a JSON object: data after the top-level object`},
	} {
		topo, err := ParseTopology("t.json", []byte(tc.src))
		if tc.want == "" {
			if err != nil || topo != fleetTopology {
				t.Errorf("ParseTopology(%s) = %v, %v", tc.src, topo, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.want || !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseTopology(%s) error =\n%v\nwant\n%s", tc.src, err, tc.want)
		}
	}
}

func TestLoadReportsBothFiles(t *testing.T) {
	dir := t.TempDir()
	np := filepath.Join(dir, "nodes.yaml")
	tp := filepath.Join(dir, "cluster-topology.json")
	os.WriteFile(np, []byte(header+node("w-01", "bmc: x")), 0o644)
	os.WriteFile(tp, []byte(`{"K8S_NODE_CIDR": "bad", "API_SERVER_IP": "10.40.0.10"}`), 0o644)
	_, err := Load(np, tp)
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 2 {
		t.Fatalf("Load = %v, want a problem in each file", err)
	}
	if ps[0].File != np || ps[1].File != tp {
		t.Errorf("problems in %s and %s, want %s then %s", ps[0].File, ps[1].File, np, tp)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), tp); err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("Load of a missing file = %v, want an I/O error", err)
	}
}

func TestParseRequiresTopology(t *testing.T) {
	_, err := Parse("nodes.yaml", []byte(header+node("w-01")), Topology{})
	if err == nil || err.Error() != "nodes.yaml: no cluster topology: K8S_NODE_CIDR is unset" {
		t.Errorf("Parse without a topology = %v", err)
	}
}

func TestExampleInventory(t *testing.T) {
	inv, err := Load("../examples/testdata/nodes.yaml", "../examples/testdata/cluster-topology.json")
	noErr(t, err)
	var cp int
	for _, n := range inv.Nodes {
		if inv.Classes[n.Class].Type == ControlPlane {
			cp++
		}
	}
	if inv.Topology.Name != "folly" {
		t.Errorf("CLUSTER_NAME = %q", inv.Topology.Name)
	}
	if len(inv.Models) < 2 || len(inv.Classes) < 2 || cp < 2 || len(inv.Nodes)-cp < 2 {
		t.Errorf("the example inventory should have several models, classes, control planes and workers: %d models, %d classes, %d control planes of %d nodes", len(inv.Models), len(inv.Classes), cp, len(inv.Nodes))
	}
}

// ApprovalLines prints both lines as ExampleApprovalLines shows, or one.
func TestApprovalLines(t *testing.T) {
	if got := ApprovalLines("", hashB); got != "approved_ek_eccp256: "+hashB+"\n" {
		t.Errorf("ApprovalLines without RSA = %q", got)
	}
	// The printed lines are a valid part of a node entry.
	src := header + node("w-01") + "    " + strings.ReplaceAll(strings.TrimSpace(ApprovalLines(hashA, hashB)), "\n", "\n    ") + "\n"
	inv := parseNodes(t, src)
	if n := inv.Nodes[0]; n.ApprovedEKRSA2048 != hashA || n.ApprovedEKECCP256 != hashB {
		t.Errorf("pasted lines parse as %q, %q", n.ApprovedEKRSA2048, n.ApprovedEKECCP256)
	}
}

// classes is header with worker added to the worker class (a block
// line) and cp to the controlplane class (a flow entry), and node w-01.
func classes(worker, cp string) string {
	return strings.NewReplacer(
		"    installer_image: factory.talos.dev/installer/abc:v1.13.9\n",
		"    installer_image: factory.talos.dev/installer/abc:v1.13.9\n"+worker,
		`installer_image: "factory.talos.dev/installer/abc:v1.13.9"}`,
		`installer_image: "factory.talos.dev/installer/abc:v1.13.9"`+cp+"}",
	).Replace(header) + node("w-01")
}

// A class's secure_boot is required or optional; absent is optional.
func TestParseSecureBoot(t *testing.T) {
	for _, tc := range []struct {
		name           string
		src            string
		worker, cplane bool
	}{
		{"absent", classes("", ""), false, false},
		{"required", classes("    secure_boot: required\n", ", secure_boot: required"), true, true},
		{"optional", classes("    secure_boot: optional\n", ", secure_boot: optional"), false, false},
		{"one class requires it", classes("    secure_boot: required\n", ""), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := parseNodes(t, tc.src)
			if got := inv.Classes["worker"].RequireSecureBoot; got != tc.worker {
				t.Errorf("worker RequireSecureBoot = %v, want %v", got, tc.worker)
			}
			if got := inv.Classes["controlplane"].RequireSecureBoot; got != tc.cplane {
				t.Errorf("controlplane RequireSecureBoot = %v, want %v", got, tc.cplane)
			}
		})
	}
}
