package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFrom(t *testing.T) {
	const rev = "3c16fca1a2b3c4d5e6f708192a3b4c5d6e7f8091"
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want Info
	}{
		{"a commit", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/fleetkit/fleet", Version: "v0.0.0-20261201120000-3c16fca1a2b3"},
			Settings: []debug.BuildSetting{
				{Key: "-buildmode", Value: "exe"}, {Key: "vcs", Value: "git"},
				{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-12-01T12:00:00Z"}, {Key: "vcs.modified", Value: "false"},
			},
		}, Info{Version: "v0.0.0-20261201120000-3c16fca1a2b3", Revision: rev, Modified: "false", GoVersion: "go1.26.8"}},
		{"a tree with changes", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/fleetkit/fleet", Version: "v1.2.0+dirty"},
			Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}},
		}, Info{Version: "v1.2.0+dirty", Revision: rev, Modified: "true", GoVersion: "go1.26.8"}},
		{"no VCS information", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/fleetkit/fleet", Version: "(devel)"},
		}, Info{Version: "(devel)", Revision: Unknown, Modified: Unknown, GoVersion: "go1.26.8"}},
		{"go install module@version", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/fleetkit/fleet", Version: "v1.2.0", Sum: "h1:abc="},
		}, Info{Version: "v1.2.0", Revision: Unknown, Modified: Unknown, GoVersion: "go1.26.8"}},
		{"a malformed vcs.modified", &debug.BuildInfo{
			Main:     debug.Module{Version: ""},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: ""}, {Key: "vcs.modified", Value: "perhaps"}},
		}, Info{Version: Unknown, Revision: Unknown, Modified: Unknown, GoVersion: Unknown}},
		{"no build information", nil, Info{Version: Unknown, Revision: Unknown, Modified: Unknown, GoVersion: Unknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := From(tc.bi); got != tc.want {
				t.Errorf("From = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	i := Info{Version: "v1.2.0+dirty", Revision: "abc", Modified: "true", GoVersion: "go1.26.8"}
	if got, want := i.String(), "version=v1.2.0+dirty revision=abc modified=true goversion=go1.26.8"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	// The log attributes carry the same keys and values as String.
	var pairs []string
	for _, a := range i.Attrs() {
		pairs = append(pairs, a.Key+"="+a.Value.String())
	}
	if got := strings.Join(pairs, " "); got != i.String() {
		t.Errorf("Attrs() = %s, want %s", got, i.String())
	}
}

// A test binary records no VCS information, but it does record its Go
// release, and Read never returns an empty field.
func TestRead(t *testing.T) {
	i := Read()
	if i.GoVersion == Unknown || !strings.HasPrefix(i.GoVersion, "go") {
		t.Errorf("Read().GoVersion = %q", i.GoVersion)
	}
	for name, v := range map[string]string{"Version": i.Version, "Revision": i.Revision, "Modified": i.Modified} {
		if v == "" {
			t.Errorf("Read().%s is empty", name)
		}
	}
}
