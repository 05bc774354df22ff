package main

import (
	"bytes"
	"testing"

	"github.com/fleetkit/fleet/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version"}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
		t.Fatalf("fleetctl version: exit %d, stderr %q", code, stderr.String())
	}
	if want := "fleetctl " + buildinfo.Read().String() + "\n"; stdout.String() != want {
		t.Errorf("fleetctl version printed %q, want %q", stdout.String(), want)
	}
	if code := run([]string{"version", "extra"}, &stdout, &stderr); code != 2 {
		t.Errorf("fleetctl version extra: exit %d, want 2", code)
	}
}
