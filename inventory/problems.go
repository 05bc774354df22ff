package inventory

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalid is what errors.Is finds in every error that reports problems
// in a nodes file or a cluster topology.
var ErrInvalid = errors.New("invalid inventory")

// A Problem is one thing wrong in a nodes file or topology, at a place in it.
type Problem struct {
	File    string // the file's name as given to Parse or Load
	Line    int    // 1-based; 0 when the problem has no place in the file
	Column  int    // 1-based; 0 with Line
	Subject string // e.g. "node node-01", "model ms-01", "class worker"; "" for the file
	Text    string // what is wrong, e.g. `unknown model "ms-02"`
}

// String formats p as FILE:LINE:COL: SUBJECT: TEXT, leaving out the parts
// p does not have.
func (p Problem) String() string {
	var sb strings.Builder
	sb.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&sb, ":%d:%d", p.Line, p.Column)
	}
	sb.WriteString(": ")
	if p.Subject != "" {
		sb.WriteString(p.Subject)
		sb.WriteString(": ")
	}
	sb.WriteString(p.Text)
	return sb.String()
}

// Problems is the error Parse and Load return for an invalid inventory:
// every problem found, each file's in order of place. errors.Is(err, ErrInvalid)
// holds for it.
type Problems []Problem

// Error lists the problems one per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Is reports whether target is ErrInvalid.
func (ps Problems) Is(target error) bool { return target == ErrInvalid }

// sort orders the problems of one file by place.
func (ps Problems) sort() {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}
