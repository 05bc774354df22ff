package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
	yamlv4 "go.yaml.in/yaml/v4"
)

// parseYAML parses data into a document node, or returns nil for a document
// with no content.
//
// Nodes files are block mappings of plain and quoted scalars, so parseYAML
// first tries a scanner for exactly that subset, which is about ten times
// faster than a full YAML parser and keeps 10,000 nodes well inside the
// validation budget. Anything else (anchors, aliases, merge keys, flow
// collections, sequences, block scalars, tags, multi-line scalars, escapes,
// tabs, and every syntax error) makes it hand the whole document to
// go.yaml.in/yaml/v3, so the result is always what a YAML parser makes of the
// file; FuzzParseYAML holds the two paths to the same tree.
func parseYAML(data []byte) (*yaml.Node, error) {
	if doc, ok := scanBlockYAML(data); ok {
		return doc, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlSyntaxError(err, data)
	}
	if doc.Kind == 0 {
		return nil, nil
	}
	return &doc, nil
}

// syntaxError is a YAML syntax error: the YAML parser's words, and the
// place in the file they are about (line 0 when the parser named none).
type syntaxError struct {
	line, column int
	text         string
}

func (e *syntaxError) Error() string { return e.text }

// yamlSyntaxError turns yaml.v3's error for data into a syntaxError that
// names the line and column a person finds the mistake on.
//
// yaml.v3's message names one line, taken from a zero-based mark for some
// problems and a one-based one for others, and often the start of the
// enclosing mapping rather than the problem. So the place comes from
// go.yaml.in/yaml/v4, whose errors carry the problem's mark and the mark
// of the construct it is in, parsing data again (only when data is not
// YAML): a problem found where a construct was left open (a flow
// collection, a quoted scalar or a key not closed) is placed at the
// construct's start, and any other at the problem itself, but never past
// the file's last line. The words are yaml.v3's, without its "yaml: " and
// "line N: " prefixes.
func yamlSyntaxError(err error, data []byte) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, ok := strings.Cut(rest, ": "); ok && strings.Trim(num, "0123456789") == "" {
			msg = text
		}
	}
	e := &syntaxError{text: msg}
	var doc yamlv4.Node
	var le *yamlv4.LoadError
	if !errors.As(yamlv4.Unmarshal(data, &doc), &le) {
		return e
	}
	mark := le.Mark
	if le.ContextMark.Line > 0 && (leftOpen[le.Message] || mark.Line > lastLine(data)) {
		mark = le.ContextMark
	}
	if last := lastLine(data); mark.Line > last {
		mark.Line, mark.Column = last, 1
	}
	if mark.Line > 0 {
		e.line, e.column = mark.Line, max(mark.Column, 1)
	}
	return e
}

// leftOpen are the problems a YAML parser finds past a construct that was
// left open: the construct's start is where to look.
var leftOpen = map[string]bool{
	"did not find expected ',' or ']'": true,
	"did not find expected ',' or '}'": true,
	"could not find expected ':'":      true,
	"found unexpected end of stream":   true,
}

// lastLine is the number of the last line of data that holds anything,
// at least 1.
func lastLine(data []byte) int {
	trimmed := bytes.TrimRight(data, " \t\r\n")
	return bytes.Count(trimmed, []byte("\n")) + 1
}

// blockScanner scans the block-mapping subset of YAML. Its nodes carry the
// same Kind, Tag, Value, Line and Column as yaml.v3 gives them.
type blockScanner struct {
	slab  []yaml.Node // nodes are carved from here, a few hundred at a time
	stack []openMap
	// pending is the key whose value is on the following lines (a nested
	// mapping) or absent (null); nil when the last line ended a scalar.
	pending *pendingKey
}

type openMap struct {
	indent int
	node   *yaml.Node
}

type pendingKey struct {
	parent    openMap
	key       *yaml.Node
	line, col int // where yaml.v3 places a null value: just after the colon
}

// scanBlockYAML returns the document node for data, or ok false when data is
// outside the subset it knows (the caller then uses the full parser).
func scanBlockYAML(data []byte) (doc *yaml.Node, ok bool) {
	// Printable ASCII and newlines only, so that the scanner and yaml.v3
	// cannot differ on encodings, byte order marks, tabs or line breaks.
	for _, c := range data {
		if (c < 0x20 && c != '\n') || c >= 0x7f {
			return nil, false
		}
	}
	s := &blockScanner{}
	var root *yaml.Node
	docLine, docCol := 0, 0
	lineNo := 0
	// One copy of the text: every key and value is a substring of it.
	src := string(data)
	for len(src) > 0 {
		lineNo++
		var line string
		if i := strings.IndexByte(src, '\n'); i >= 0 {
			line, src = src[:i], src[i+1:]
		} else {
			line, src = src, ""
		}
		indent := 0
		for indent < len(line) && line[indent] == ' ' {
			indent++
		}
		rest := line[indent:]
		if len(rest) == 0 || rest[0] == '#' {
			continue
		}
		if root == nil && indent == 0 && rest == "---" {
			if docLine != 0 {
				return nil, false // a second document
			}
			docLine, docCol = lineNo, 1
			continue
		}
		if root == nil {
			if indent != 0 {
				return nil, false
			}
			root = s.node(yaml.MappingNode, "!!map", "", lineNo, 1)
			s.stack = append(s.stack, openMap{indent: 0, node: root})
		}
		if !s.line(lineNo, indent, rest) {
			return nil, false
		}
	}
	if root == nil {
		return nil, false // let the full parser decide what an empty file is
	}
	s.closePending()
	if docLine == 0 {
		docLine, docCol = root.Line, root.Column
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Line: docLine, Column: docCol, Content: []*yaml.Node{root}}, true
}

// node returns a new node, carved from the scanner's slab.
func (s *blockScanner) node(kind yaml.Kind, tag, value string, line, col int) *yaml.Node {
	if len(s.slab) == 0 {
		s.slab = make([]yaml.Node, 256)
	}
	n := &s.slab[0]
	s.slab = s.slab[1:]
	n.Kind, n.Tag, n.Value, n.Line, n.Column = kind, tag, value, line, col
	return n
}

func (s *blockScanner) line(lineNo, indent int, rest string) bool {
	top := &s.stack[len(s.stack)-1]
	switch {
	case s.pending != nil && indent > s.pending.parent.indent:
		// The value of the pending key is a nested mapping.
		m := s.node(yaml.MappingNode, "!!map", "", lineNo, indent+1)
		s.pending.parent.node.Content = append(s.pending.parent.node.Content, s.pending.key, m)
		s.pending = nil
		s.stack = append(s.stack, openMap{indent: indent, node: m})
		top = &s.stack[len(s.stack)-1]
	default:
		s.closePending()
		for len(s.stack) > 1 && indent < top.indent {
			s.stack = s.stack[:len(s.stack)-1]
			top = &s.stack[len(s.stack)-1]
		}
		if indent != top.indent {
			return false
		}
	}
	return s.pair(top, lineNo, indent, rest)
}

// closePending gives a key with nothing after it a null value.
func (s *blockScanner) closePending() {
	p := s.pending
	if p == nil {
		return
	}
	null := s.node(yaml.ScalarNode, "!!null", "", p.line, p.col)
	p.parent.node.Content = append(p.parent.node.Content, p.key, null)
	s.pending = nil
}

// pair scans "key: value", "key:" or "key: # comment" at column indent+1.
func (s *blockScanner) pair(m *openMap, lineNo, indent int, rest string) bool {
	col := indent + 1
	key, n, ok := s.scanKey(rest)
	if !ok {
		return false
	}
	key.Line, key.Column = lineNo, col
	pos := n
	for pos < len(rest) && rest[pos] == ' ' {
		pos++
	}
	if pos == len(rest) || (rest[pos] == '#' && pos > n) {
		s.pending = &pendingKey{parent: *m, key: key, line: lineNo, col: col + n}
		return true
	}
	if pos == n { // "key:value" with no space is not a pair
		return false
	}
	val, ok := s.scanValue(rest[pos:])
	if !ok {
		return false
	}
	val.Line, val.Column = lineNo, col+pos
	m.node.Content = append(m.node.Content, key, val)
	return true
}

// maxKey is the longest key, quotes included, that the scanner takes:
// YAML allows an implicit key up to 1024 characters, and yaml.v3 refuses
// a longer one, so the scanner leaves keys near that length to it.
const maxKey = 1000

// scanKey scans a mapping key and its colon, returning the key node and the
// length consumed through the colon.
func (s *blockScanner) scanKey(b string) (*yaml.Node, int, bool) {
	if len(b) == 0 {
		return nil, 0, false
	}
	switch b[0] {
	case '"', '\'':
		text, n, ok := scanQuoted(b)
		if !ok || n >= len(b) || b[n] != ':' || n > maxKey {
			return nil, 0, false
		}
		return s.quoted(b[0], text), n + 1, true
	}
	if isIndicator(b) {
		return nil, 0, false
	}
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case ':':
			if i+1 == len(b) || b[i+1] == ' ' {
				k := b[:i]
				if k == "" || strings.HasSuffix(k, " ") || len(k) > maxKey {
					return nil, 0, false
				}
				return s.node(yaml.ScalarNode, "", k, 0, 0), i + 1, true
			}
		case '#':
			if i > 0 && b[i-1] == ' ' {
				return nil, 0, false
			}
		}
	}
	return nil, 0, false
}

// scanValue scans a scalar that ends the line, with an optional comment.
func (s *blockScanner) scanValue(b string) (*yaml.Node, bool) {
	switch b[0] {
	case '"', '\'':
		text, n, ok := scanQuoted(b)
		if !ok {
			return nil, false
		}
		for n < len(b) && b[n] == ' ' {
			n++
		}
		if n < len(b) && (b[n] != '#' || b[n-1] != ' ') {
			return nil, false
		}
		return s.quoted(b[0], text), true
	}
	if isIndicator(b) {
		return nil, false
	}
	end := len(b)
	for i := 1; i < len(b); i++ {
		if b[i] == '#' && b[i-1] == ' ' {
			end = i
			break
		}
		if b[i] == ':' && (i+1 == len(b) || b[i+1] == ' ') {
			return nil, false // "a: b: c" is not a scalar
		}
	}
	// Plain scalars keep an empty Tag: Node.ShortTag resolves it when
	// asked, and validation reads Value.
	return s.node(yaml.ScalarNode, "", strings.TrimRight(b[:end], " "), 0, 0), true
}

// quoted returns the node of a quoted scalar; q is its quote character.
func (s *blockScanner) quoted(q byte, text string) *yaml.Node {
	n := s.node(yaml.ScalarNode, "!!str", text, 0, 0)
	n.Style = yaml.DoubleQuotedStyle
	if q == '\'' {
		n.Style = yaml.SingleQuotedStyle
	}
	return n
}

// scanQuoted scans a single- or double-quoted scalar that closes on the same
// line, returning its text and the length consumed. Double-quoted scalars
// with escapes are left to the full parser.
func scanQuoted(b string) (string, int, bool) {
	q := b[0]
	if end := strings.IndexByte(b[1:], q); end >= 0 && (q == '"' || end+2 >= len(b) || b[end+2] != q) && !strings.Contains(b[1:end+1], "\\") {
		return b[1 : end+1], end + 2, true // no escapes: a substring
	}
	var sb strings.Builder
	for i := 1; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\\' && q == '"':
			return "", 0, false
		case c == q && q == '\'' && i+1 < len(b) && b[i+1] == '\'':
			sb.WriteByte('\'')
			i++
		case c == q:
			return sb.String(), i + 1, true
		default:
			sb.WriteByte(c)
		}
	}
	return "", 0, false
}

// isIndicator reports whether b starts with a character that makes a YAML
// scalar something other than a plain scalar (or a syntax error).
func isIndicator(b string) bool {
	switch b[0] {
	case '-', '?', ':':
		return len(b) == 1 || b[1] == ' '
	case '[', ']', '{', '}', ',', '#', '&', '*', '!', '|', '>', '%', '@', '`', '"', '\'':
		return true
	}
	return false
}

// isNull reports whether n is a null scalar: "key:" with nothing after it,
// "~" or "null".
func isNull(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode {
		return false
	}
	if n.Tag != "" {
		return n.Tag == "!!null"
	}
	if n.Style != 0 {
		return false
	}
	switch n.Value {
	case "", "~", "null", "Null", "NULL":
		return true
	}
	return false
}

// describeKind names a node's kind for error messages.
func describeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "empty"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "not a value"
}
