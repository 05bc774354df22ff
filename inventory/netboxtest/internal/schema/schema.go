// Package schema prunes NetBox's OpenAPI document to the part fleet uses.
// It is shared by the schemagen command, which writes netboxtest's copy,
// and by netboxtest's test that checks the copy is current.
package schema

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Module is the Go module that ships NetBox 4.3's OpenAPI document.
const Module = "github.com/netbox-community/go-netbox/v4"

// File is the document's path inside Module.
const File = "api/openapi.yaml"

// Paths are the API paths fleet's NetBox client and netboxtest use. The
// pruned document keeps these, every operation on them, and every component
// they reference.
var Paths = []string{
	"/api/core/object-changes/",
	"/api/core/object-changes/{id}/",
	"/api/dcim/cables/",
	"/api/dcim/cables/{id}/",
	"/api/dcim/device-roles/",
	"/api/dcim/device-roles/{id}/",
	"/api/dcim/device-types/",
	"/api/dcim/device-types/{id}/",
	"/api/dcim/devices/",
	"/api/dcim/devices/{id}/",
	"/api/dcim/interfaces/",
	"/api/dcim/interfaces/{id}/",
	"/api/dcim/mac-addresses/",
	"/api/dcim/mac-addresses/{id}/",
	"/api/dcim/manufacturers/",
	"/api/dcim/manufacturers/{id}/",
	"/api/dcim/sites/",
	"/api/dcim/sites/{id}/",
	"/api/extras/custom-fields/",
	"/api/extras/custom-fields/{id}/",
	"/api/extras/journal-entries/",
	"/api/extras/journal-entries/{id}/",
	"/api/ipam/ip-addresses/",
	"/api/ipam/ip-addresses/{id}/",
}

// SourceKey is the top-level extension of the pruned document that records
// where it came from.
const SourceKey = "x-fleet-source"

// Source says which document a pruned copy came from.
type Source struct {
	Module  string `json:"module"`  // e.g. github.com/netbox-community/go-netbox/v4
	Version string `json:"version"` // e.g. v4.3.0
	File    string `json:"file"`    // path inside the module
	SHA256  string `json:"sha256"`  // of the whole document, hex

	Path string `json:"-"` // where the document is on this machine
}

// ModuleSource finds the document in the module cache, through `go list -m`,
// at the version go.mod requires.
func ModuleSource() (Source, error) {
	out, err := exec.Command("go", "list", "-m", "-json", Module).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return Source{}, fmt.Errorf("go list -m %s: %v: %s", Module, err, ee.Stderr)
		}
		return Source{}, fmt.Errorf("go list -m %s: %v", Module, err)
	}
	var m struct{ Path, Version, Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return Source{}, fmt.Errorf("go list -m %s: %v", Module, err)
	}
	if m.Dir == "" {
		return Source{}, fmt.Errorf("%s@%s is not in the module cache: run go mod download %s", Module, m.Version, Module)
	}
	return Source{Module: m.Path, Version: m.Version, File: File, Path: filepath.Join(m.Dir, filepath.FromSlash(File))}, nil
}

// Digest returns the hex SHA-256 of data.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Prune returns the part of the OpenAPI document in data (YAML or JSON)
// that Paths needs, as JSON with sorted keys, recording src (its SHA256 is
// computed here) under SourceKey.
func Prune(data []byte, src Source) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not an OpenAPI document: %v", err)
	}
	paths, _ := doc["paths"].(map[string]any)
	components, _ := doc["components"].(map[string]any)
	if paths == nil || components == nil {
		return nil, fmt.Errorf("not an OpenAPI document: no paths or components")
	}
	keptPaths := map[string]any{}
	var queue []string
	for _, p := range Paths {
		item, ok := paths[p]
		if !ok {
			return nil, fmt.Errorf("the document has no path %s", p)
		}
		keptPaths[p] = item
		queue = append(queue, refs(item)...)
	}
	kept := map[string]map[string]any{} // kind -> name -> component
	seen := map[string]bool{}
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		if seen[ref] {
			continue
		}
		seen[ref] = true
		kind, name, ok := splitRef(ref)
		if !ok {
			return nil, fmt.Errorf("unsupported $ref %q", ref)
		}
		group, _ := components[kind].(map[string]any)
		c, ok := group[name]
		if !ok {
			return nil, fmt.Errorf("$ref %q names no component", ref)
		}
		if kept[kind] == nil {
			kept[kind] = map[string]any{}
		}
		kept[kind][name] = c
		queue = append(queue, refs(c)...)
	}
	outComponents := map[string]any{}
	for kind, group := range kept {
		outComponents[kind] = group
	}
	if ss, ok := components["securitySchemes"]; ok {
		outComponents["securitySchemes"] = ss
	}
	src.SHA256 = Digest(data)
	out := map[string]any{
		"paths":      keptPaths,
		"components": outComponents,
		SourceKey:    src,
	}
	for _, k := range []string{"openapi", "info", "servers", "security"} {
		if v, ok := doc[k]; ok {
			out[k] = v
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// refs returns every $ref below v, sorted.
func refs(v any) []string {
	set := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok {
				set[r] = true
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	return slices.Sorted(maps.Keys(set))
}

// splitRef splits "#/components/KIND/NAME".
func splitRef(ref string) (kind, name string, ok bool) {
	rest, ok := strings.CutPrefix(ref, "#/components/")
	if !ok {
		return "", "", false
	}
	kind, name, ok = strings.Cut(rest, "/")
	return kind, name, ok && name != "" && !strings.Contains(name, "/") && slices.Contains([]string{"schemas", "parameters", "responses", "requestBodies", "headers"}, kind)
}
