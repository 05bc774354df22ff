package netboxtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/fleetkit/fleet/inventory/netboxtest/internal/schema"
)

// The embedded document is NetBox's, pruned, from the go-netbox module
// go.mod requires: the same file (by SHA-256), pruned as schemagen prunes.
func TestSchemaIsCurrent(t *testing.T) {
	src, err := schema.ModuleSource()
	noErr(t, err)
	data, err := os.ReadFile(src.Path)
	noErr(t, err)
	want, err := schema.Prune(data, src)
	noErr(t, err)
	if !bytes.Equal(want, openapiJSON) {
		t.Fatalf("openapi.json is not what schemagen makes of %s@%s %s (sha256 %s): run go generate ./inventory/netboxtest", src.Module, src.Version, src.File, schema.Digest(data))
	}
}

// collector records what the schema check reports.
type collector struct {
	mu   sync.Mutex
	errs []string
}

func (c *collector) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func (c *collector) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.errs
	c.errs = nil
	return out
}

// Each relaxation is needed: without it, what NetBox (and netboxtest)
// answers fails the schema at exactly the relaxed field; with it, passes.
func TestRelaxations(t *testing.T) {
	srv, tok, ids := fleet(t, nil)
	ports := srv.Interfaces(ids["switch"])
	mustIDs(t)(srv.Create("alice", pathIPs, map[string]any{"address": "10.0.0.1/24", "assigned_object_type": typeInterface, "assigned_object_id": ports["Port 1"]}))
	mustIDs(t)(srv.Create("alice", pathCables, map[string]any{
		"a_terminations": []any{map[string]any{"object_type": typeInterface, "object_id": ports["Port 2"]}},
		"b_terminations": []any{map[string]any{"object_type": typeInterface, "object_id": ports["Port 3"]}},
	}))
	srv.DeleteUser("alice")

	relaxed, err := newValidator()
	noErr(t, err)
	strictDoc, err := loadDoc(false)
	noErr(t, err)
	strict := validatorOf(strictDoc)
	for _, c := range []struct {
		uri    string
		fields []string // where the strict schema refuses the answer
	}{
		{pathDevices, []string{"/results/0/face", "/results/0/airflow", "/results/0/custom_fields/class"}},
		{pathInterfaces, []string{"/results/0/mode", "/results/0/rf_role", "/results/0/rf_channel", "/results/0/poe_mode", "/results/0/poe_type"}},
		{pathIPs, []string{"/results/0/role", "/results/0/dns_name"}},
		{pathCables, []string{"/results/0/color"}},
		{pathChanges, []string{"/results/0/user"}},
		{pathSites, nil},
		{pathCustomFields, nil},
	} {
		rsp, body, err := send(http.DefaultClient, srv, tok, "GET", c.uri, nil)
		noErr(t, err)
		req := rsp.Request
		h := http.Header{"Content-Type": {"application/json"}}
		if errs := relaxed.check(req, c.uri, nil, nil, rsp.StatusCode, h, body); len(errs) > 0 {
			t.Errorf("GET %s: the relaxed check refuses it: %v", c.uri, errs)
		}
		errs := strict.check(req, c.uri, nil, nil, rsp.StatusCode, h, body)
		if len(c.fields) == 0 {
			if len(errs) > 0 {
				t.Errorf("GET %s: the schema as shipped refuses it: %v", c.uri, errs)
			}
			continue
		}
		if len(errs) == 0 {
			t.Errorf("GET %s: the schema as shipped accepts it; the relaxation of %v is not needed", c.uri, c.fields)
			continue
		}
		text := fmt.Sprint(errs)
		for _, f := range c.fields {
			if !strings.Contains(text, `"`+f+`"`) {
				t.Errorf("GET %s: the schema as shipped does not refuse %s:\n%.2000s", c.uri, f, text)
			}
		}
	}
}

// The check catches what is wrong in a request or an answer.
func TestValidationCatchesMistakes(t *testing.T) {
	rec := &collector{}
	srv := New(&Config{Validate: rec})
	defer srv.Close()
	tok := srv.Token("admin")
	site, err := srv.AddSite("folly")
	noErr(t, err)
	for _, c := range []struct {
		method, uri string
		body        any
		want        string
	}{
		{"POST", pathDevices, map[string]any{"device_type": "ms-01", "role": 1, "site": site}, `Error at "/device_type"`},
		{"POST", pathDevices, map[string]any{"role": 1, "site": site}, `property "device_type" is missing`},
		{"PATCH", pathDevices, []any{map[string]any{"id": 1, "status": "retired"}}, `"status"`},
		{"POST", pathJournal, map[string]any{"assigned_object_type": "dcim.device", "assigned_object_id": 1, "comments": "", "kind": "info"}, `Error at "/comments"`},
		{"POST", pathSites, []any{map[string]any{"name": "b", "slug": "b"}, map[string]any{"name": "c", "slug": "not a slug"}}, "item 1"},
		{"GET", pathChanges + "?request_id=not-a-uuid", nil, `"request_id"`},
	} {
		call(t, srv, tok, c.method, c.uri, c.body)
		errs := rec.take()
		if len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), c.want) {
			t.Errorf("%s %s %v: the check reported %q, want a mention of %s", c.method, c.uri, c.body, errs, c.want)
		}
	}
	// A valid request passes.
	call(t, srv, tok, "POST", pathSites, map[string]any{"name": "d", "slug": "d"})
	if errs := rec.take(); len(errs) > 0 {
		t.Errorf("a valid request: %v", errs)
	}

	// An answer missing a required field, or with a bad format, fails.
	v, err := newValidator()
	noErr(t, err)
	req, _ := http.NewRequest("GET", srv.URL+pathSites, nil)
	h := http.Header{"Content-Type": {"application/json"}}
	_, good, err := send(http.DefaultClient, srv, tok, "GET", pathSites, nil)
	noErr(t, err)
	for name, mutate := range map[string]func(m map[string]any){
		"no id":      func(m map[string]any) { delete(m, "id") },
		"bad url":    func(m map[string]any) { m["url"] = "/api/dcim/sites/1/" },
		"bad time":   func(m map[string]any) { m["created"] = "yesterday" },
		"bad status": func(m map[string]any) { m["status"] = map[string]any{"value": "closed", "label": "Closed"} },
	} {
		var page map[string]any
		noErr(t, json.Unmarshal(good, &page))
		mutate(page["results"].([]any)[0].(map[string]any))
		if errs := v.check(req, pathSites, nil, nil, 200, h, mustJSON(t, page)); len(errs) == 0 {
			t.Errorf("an answer with %s passes the check", name)
		}
	}
	if errs := v.check(req, pathSites, nil, nil, 200, h, good); len(errs) > 0 {
		t.Errorf("the answer as sent: %v", errs)
	}
}
