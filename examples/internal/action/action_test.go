package action

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fleetkit/fleet/disksafe"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		exit   int
		ok     bool
		stderr string
	}{
		{nil, 0, true, ""},
		{[]string{"-v"}, 0, true, ""},
		{[]string{"-help"}, ExitOK, false, ""},
		{[]string{"-force"}, ExitUsage, false, "flag provided but not defined: -force\n"},
		{[]string{"extra"}, ExitUsage, false, "act: unexpected arguments [\"extra\"]\n"},
	} {
		var stderr bytes.Buffer
		fl := Flags("act", &stderr)
		fl.Usage = func() {}
		fl.Bool("v", false, "")
		exit, ok := Parse(fl, tt.args)
		if exit != tt.exit || ok != tt.ok || stderr.String() != tt.stderr {
			t.Errorf("Parse(%q) = %d, %t, stderr %q; want %d, %t, %q", tt.args, exit, ok, stderr.String(), tt.exit, tt.ok, tt.stderr)
		}
	}
}

func TestCause(t *testing.T) {
	cause := errors.New("the HookOS agent recorded no attestation in this boot")
	r := &disksafe.Refusal{Err: disksafe.ErrNotAttested, Cause: cause}
	var w bytes.Buffer
	Cause(&w, r, disksafe.ErrNotWiped)
	if w.Len() != 0 {
		t.Errorf("Cause of another refusal wrote %q", w.String())
	}
	Cause(&w, r, disksafe.ErrNotWiped, disksafe.ErrNotAttested)
	if got, want := w.String(), "  (the HookOS agent recorded no attestation in this boot)\n"; got != want {
		t.Errorf("Cause wrote %q, want %q", got, want)
	}
	w.Reset()
	Cause(&w, cause, disksafe.ErrNotAttested)
	if w.Len() != 0 {
		t.Errorf("Cause of a plain error wrote %q", w.String())
	}
}

func TestOneLine(t *testing.T) {
	for _, tt := range []struct {
		in   string
		max  int
		want string
	}{
		{"", 300, "no reason given"},
		{" \n ", 300, "no reason given"},
		{"Error response\n  manifest unknown\n", 300, "Error response manifest unknown"},
		{"abcdefgh", 5, "abcde..."},
		{"abcdé", 5, "abcd..."},
	} {
		if got := OneLine(tt.in, tt.max); got != tt.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}
