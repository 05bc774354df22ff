// Package termsafe makes text from elsewhere safe to print on an
// operator's terminal: a value from NetBox, or a claim another machine
// sent, can neither break a table nor drive the terminal with control
// sequences or bidirectional overrides.
package termsafe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Quote returns s, or s quoted in Go syntax when it is empty or holds
// space, a control character, invalid UTF-8 or another rune that does not
// print as itself (such as a bidirectional override).
func Quote(s string) string {
	for _, r := range s {
		if r == ' ' || r == utf8.RuneError || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// Text returns text with every rune but newline, tab and printable ones
// escaped (\x1b, \u202e, ...), keeping its lines.
func Text(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	for i, r := range text {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(text[i:]); size == 1 {
				fmt.Fprintf(&b, `\x%02x`, text[i])
				continue
			}
			b.WriteRune(r)
		case r == '\n', r == '\t', strconv.IsPrint(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}
