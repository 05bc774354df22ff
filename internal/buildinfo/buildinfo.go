// Package buildinfo names the build of a fleet program: the main module's
// version, the commit it was built from and the Go release, as the Go
// toolchain recorded them in the binary (runtime/debug.ReadBuildInfo).
// fleetd prints it for -version, in its first log line and as the
// fleet_build_info gauge; fleetctl prints it for fleetctl version. The
// same four key=value fields appear in each, so one command answers
// whether a host runs a given commit:
//
//	$ fleetd -version
//	fleetd version=v0.0.0-20261201120000-3c16fca1a2b3 revision=3c16fca1a2b3... modified=false goversion=go1.26.8
//
// go build inside a git checkout records the revision and whether the tree
// had uncommitted changes (modified=true, and a version ending in
// "+dirty"). A build that recorded no VCS information (go build
// -buildvcs=false, a build outside a checkout, a test binary) reports the
// revision and modified as "unknown"; go install module@version records
// the module's version and no revision.
package buildinfo

import (
	"log/slog"
	"runtime/debug"
	"strconv"
)

// Unknown stands for a field the build did not record.
const Unknown = "unknown"

// Info is one build's identity. Its fields are never empty: a field the
// build did not record holds Unknown.
type Info struct {
	// Version is the main module's version as Go recorded it: a tag
	// (v1.2.0), a pseudo-version naming the commit (v0.0.0-<time>-<12
	// hex digits>), either followed by "+dirty" for a tree with
	// uncommitted changes, or "(devel)" when Go recorded none.
	Version string
	// Revision is the full commit hash (vcs.revision).
	Revision string
	// Modified says whether the tree had uncommitted changes
	// (vcs.modified): "true", "false", or Unknown.
	Modified string
	// GoVersion is the Go release that built the binary, e.g. go1.26.8.
	GoVersion string
}

// Read returns the running binary's Info.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return From(bi)
}

// From returns the Info that bi records; nil (a binary built without
// module support) gives every field Unknown.
func From(bi *debug.BuildInfo) Info {
	i := Info{Version: Unknown, Revision: Unknown, Modified: Unknown, GoVersion: Unknown}
	if bi == nil {
		return i
	}
	i.Version = or(bi.Main.Version, Unknown)
	i.GoVersion = or(bi.GoVersion, Unknown)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = or(s.Value, Unknown)
		case "vcs.modified":
			if b, err := strconv.ParseBool(s.Value); err == nil {
				i.Modified = strconv.FormatBool(b)
			}
		}
	}
	return i
}

// String returns the fields as key=value pairs, separated by spaces, in
// the order version, revision, modified, goversion.
func (i Info) String() string {
	return "version=" + i.Version + " revision=" + i.Revision + " modified=" + i.Modified + " goversion=" + i.GoVersion
}

// Attrs returns the fields as log attributes with the keys String uses.
func (i Info) Attrs() []slog.Attr {
	return []slog.Attr{
		slog.String("version", i.Version),
		slog.String("revision", i.Revision),
		slog.String("modified", i.Modified),
		slog.String("goversion", i.GoVersion),
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
