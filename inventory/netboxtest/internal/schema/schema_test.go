package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

// A document with every path Paths names, each referring to schema A,
// which refers to B; C is referred to by nothing kept.
func tinyDoc() string {
	var b strings.Builder
	b.WriteString("openapi: 3.0.3\ninfo: {title: NetBox REST API, version: '4.3'}\nservers: [{url: ''}]\npaths:\n")
	for _, p := range Paths {
		b.WriteString("  " + p + ":\n    get:\n      responses:\n        '200':\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/A'}\n")
	}
	b.WriteString("  /api/dcim/racks/:\n    get:\n      responses:\n        '200':\n          content:\n            application/json:\n              schema: {$ref: '#/components/schemas/C'}\n")
	b.WriteString("components:\n  schemas:\n    A: {type: object, properties: {b: {$ref: '#/components/schemas/B'}}}\n    B: {type: string}\n    C: {type: integer}\n  securitySchemes:\n    tokenAuth: {type: apiKey, in: header, name: Authorization}\n")
	return b.String()
}

func TestPrune(t *testing.T) {
	out, err := Prune([]byte(tinyDoc()), Source{Module: Module, Version: "v4.3.0", File: File})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]any
		Components struct {
			Schemas         map[string]any
			SecuritySchemes map[string]any
		}
		Source Source `json:"x-fleet-source"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Paths) != len(Paths) || doc.Paths["/api/dcim/racks/"] != nil {
		t.Errorf("kept %d paths", len(doc.Paths))
	}
	if doc.Components.Schemas["A"] == nil || doc.Components.Schemas["B"] == nil || doc.Components.Schemas["C"] != nil {
		t.Errorf("kept schemas %v", doc.Components.Schemas)
	}
	if doc.Components.SecuritySchemes["tokenAuth"] == nil {
		t.Error("the security schemes were dropped")
	}
	if doc.Source.SHA256 != Digest([]byte(tinyDoc())) || doc.Source.Version != "v4.3.0" {
		t.Errorf("source %+v", doc.Source)
	}
	again, err := Prune([]byte(tinyDoc()), Source{Module: Module, Version: "v4.3.0", File: File})
	if err != nil || string(again) != string(out) {
		t.Error("pruning twice gives two answers")
	}
}

func TestPruneRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"not YAML":       "{",
		"no paths":       "openapi: 3.0.3\n",
		"a path missing": strings.Replace(tinyDoc(), "  /api/dcim/devices/:\n", "  /api/dcim/devicez/:\n", 1),
		"a dangling ref": strings.Replace(tinyDoc(), "    B: {type: string}\n", "", 1),
		"a remote ref":   strings.Replace(tinyDoc(), "'#/components/schemas/B'", "'other.yaml#/B'", 1),
	} {
		if _, err := Prune([]byte(doc), Source{}); err == nil {
			t.Errorf("%s: pruned", name)
		}
	}
}
