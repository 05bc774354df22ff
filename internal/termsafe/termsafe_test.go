package termsafe

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"serial X\n":               "serial X\n",
		"a\x1b]0;approved\x07b":    `a\x1b]0;approved\x07b`,
		"\u202eevil\xff\tok":       `\u202eevil\xff` + "\tok",
		"caf\u00e9 \u4e2d\u6587\n": "caf\u00e9 \u4e2d\u6587\n",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"w-01":      "w-01",
		"":          `""`,
		"two words": `"two words"`,
		"a\u202eb":  `"a\u202eb"`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzText checks that Text keeps the lines of any text and gives
// printable runes only, that printable text passes unchanged, and that
// Quote's quoted form unquotes to the original.
func FuzzText(f *testing.F) {
	f.Add("serial X\x1b]0;approved\x07\u202e\n\xff\xfe\t\r\n")
	f.Add("\u00a0\u200b\ufffd\x7f\u0085")
	f.Fuzz(func(t *testing.T, s string) {
		out := Text(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Text(%q) = %q: invalid UTF-8", s, out)
		}
		clean := utf8.ValidString(s)
		for _, r := range s {
			if r != '\n' && r != '\t' && !strconv.IsPrint(r) {
				clean = false
			}
		}
		for _, r := range out {
			if r != '\n' && r != '\t' && !strconv.IsPrint(r) {
				t.Fatalf("Text(%q) = %q: holds %U", s, out, r)
			}
		}
		if strings.Count(out, "\n") != strings.Count(s, "\n") {
			t.Fatalf("Text(%q) = %q: lines changed", s, out)
		}
		if clean && out != s {
			t.Fatalf("Text(%q) = %q: printable text changed", s, out)
		}
		p := Quote(s)
		if p != s {
			if back, err := strconv.Unquote(p); err != nil || back != s {
				t.Fatalf("Quote(%q) = %s, which unquotes to %q, %v", s, p, back, err)
			}
		}
		for _, r := range p {
			if r == ' ' && p == s || !strconv.IsPrint(r) {
				t.Fatalf("Quote(%q) = %q: holds %U", s, p, r)
			}
		}
	})
}
