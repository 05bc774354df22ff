package main

import (
	"flag"
	"fmt"

	"github.com/fleetkit/fleet/internal/buildinfo"
)

// versionFlags returns fleetctl version's body: it prints the build's
// version line, the fields fleetd -version prints.
func versionFlags(*flag.FlagSet) func(*call) int {
	return func(c *call) int {
		fmt.Fprintf(c.stdout, "fleetctl %s\n", buildinfo.Read())
		return 0
	}
}
