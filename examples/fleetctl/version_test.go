package main

import (
	"testing"

	"github.com/fleetkit/fleet/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	code, stdout, stderr := fleetctl("version")
	if code != 0 || stderr != "" {
		t.Fatalf("fleetctl version: exit %d, stderr %q", code, stderr)
	}
	if want := "fleetctl " + buildinfo.Read().String() + "\n"; stdout != want {
		t.Errorf("fleetctl version printed %q, want %q", stdout, want)
	}
}
