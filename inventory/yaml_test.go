package inventory

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// treeString renders what validation reads of a YAML tree: kind, resolved
// tag, value and position of every node.
func treeString(n *yaml.Node) string {
	var sb strings.Builder
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		fmt.Fprintf(&sb, "%s%d %s %q %d:%d\n", strings.Repeat(" ", depth), n.Kind, n.ShortTag(), n.Value, n.Line, n.Column)
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	if n != nil {
		walk(n, 0)
	}
	return sb.String()
}

// checkSameTree fails t when the block scanner accepts data but yaml.v3
// parses it into another tree or refuses it.
func checkSameTree(t *testing.T, data []byte) (scanned bool) {
	t.Helper()
	fast, ok := scanBlockYAML(data)
	if !ok {
		return false
	}
	var full yaml.Node
	if err := yaml.Unmarshal(data, &full); err != nil {
		t.Fatalf("scanner accepted what yaml.v3 refuses (%v):\n%s", err, data)
	}
	if got, want := treeString(fast), treeString(&full); got != want {
		t.Fatalf("scanner and yaml.v3 differ on\n%s\nscanner:\n%s\nyaml.v3:\n%s", data, got, want)
	}
	return true
}

func TestScannerMatchesYAML(t *testing.T) {
	for _, tc := range []struct {
		in      string
		scanned bool
	}{
		{"a: b\n", true},
		{"---\na: b\n", true},
		{"# c\n\na:\n  b: c # comment\n  d: 'it''s'\n  e: \"x y\"\n", true},
		{"a:\n", true},
		{"a:\nb: 1\n", true},
		{"a:   # c\n  b:\n    c: d\n  e: f\nz: 5\n", true},
		{"a: b#c\n", true},
		{"a: 10.0.0.1\nb: 0x1f\nc: 1_000\nd: -5\ne: .5\nf: ~\ng: null\nh: true\n", true},
		{"a: b", true},
		{"'k': v\n\"q\": w\n", true},
		{"a: http://x:80/y\n", true},
		{"a: [1]\n", false},
		{"a: &x b\nc: *x\n", false},
		{"a: |\n  text\n", false},
		{"a:\n  - b\n", false},
		{"a: b\n  c\n", false},
		{"a: b: c\n", false},
		{"a:b\n", false},
		{"a: \"x\\ty\"\n", false},
		{"a: b\r\n", false},
		{"\ta: b\n", false},
		{"  a: b\n", false},
		{"a:\n    b: c\n  d: e\n", false},
		{"", false},
		{"a: 'open\n", false},
		{"a: é\n", false},
		{strings.Repeat("k", 1000) + ": v\n", true},
		{"0:\n " + strings.Repeat("8", 1030) + ": v\n", false},
		{"'" + strings.Repeat("q", 1030) + "': v\n", false},
	} {
		if got := checkSameTree(t, []byte(tc.in)); got != tc.scanned {
			t.Errorf("scanBlockYAML(%q) accepted = %v, want %v", tc.in, got, tc.scanned)
		}
	}
}

func FuzzParseYAML(f *testing.F) {
	for _, s := range []string{"a: b\n", "a:\n  b: c\n  d:\n", "x: 'y' # z\n", "n:\n  a:\n    b: 1\n  c: d\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSameTree(t, data)
		parseYAML(data) // must not panic
	})
}
