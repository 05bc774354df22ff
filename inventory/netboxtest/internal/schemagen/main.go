// Command schemagen writes the part of NetBox's OpenAPI document that
// netboxtest validates against: the paths fleet's NetBox client uses, every
// component they reference, and nothing else of the document changed.
//
//	go run ./internal/schemagen [-in openapi.yaml] [-out openapi.json]
//
// Without -in it reads api/openapi.yaml of the go-netbox module that go.mod
// requires (found with `go list -m`). The output records the module, the
// file and its SHA-256, so a test can tell when the copy is stale.
// netboxtest's go:generate line runs it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/fleetkit/fleet/inventory/netboxtest/internal/schema"
)

func main() {
	in := flag.String("in", "", "the OpenAPI `FILE` (default: api/openapi.yaml of the go-netbox module in go.mod)")
	out := flag.String("out", "openapi.json", "the `FILE` to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	src := schema.Source{}
	if in == "" {
		var err error
		if src, err = schema.ModuleSource(); err != nil {
			return err
		}
		in = src.Path
	}
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	pruned, err := schema.Prune(data, src)
	if err != nil {
		return err
	}
	return os.WriteFile(out, pruned, 0o644)
}
