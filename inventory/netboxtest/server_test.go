package netboxtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// call makes one API request as token and decodes the answer.
func call(t *testing.T, srv *Server, token, method, uri string, body any) (int, any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, srv.URL+uri, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	data, err := io.ReadAll(rsp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s %s: answer is not JSON: %v: %s", method, uri, err, data)
		}
	}
	return rsp.StatusCode, v
}

func must(t *testing.T, want int) func(int, any) map[string]any {
	return func(status int, v any) map[string]any {
		t.Helper()
		if status != want {
			t.Fatalf("status %d, want %d: %v", status, want, v)
		}
		m, _ := v.(map[string]any)
		return m
	}
}

func id(m map[string]any) int64 { return int64(m["id"].(float64)) }

func TestTour(t *testing.T) {
	srv := New(&Config{Validate: t, Users: []string{"admin", "terraform"}})
	defer srv.Close()
	tok := srv.Token("terraform")
	sw, err := srv.AddSwitch(Switch{Site: "folly", Name: "switch", Ports: 8})
	if err != nil {
		t.Fatal(err)
	}
	ok := must(t, 200)
	created := must(t, 201)
	site := ok(call(t, srv, tok, "GET", "/api/dcim/sites/?slug=folly", nil))["results"].([]any)[0].(map[string]any)
	cf := created(call(t, srv, tok, "POST", "/api/extras/custom-fields/", map[string]any{
		"name": "approved_ek_hash", "type": "text", "object_types": []string{"dcim.device"}, "validation_regex": "^[0-9a-f]{64}$",
	}))
	created(call(t, srv, tok, "POST", "/api/extras/custom-fields/", map[string]any{
		"name": "attested_switch_port", "type": "integer", "object_types": []string{"dcim.device"},
	}))
	created(call(t, srv, tok, "POST", "/api/extras/custom-fields/", map[string]any{
		"name": "attested_at", "type": "datetime", "object_types": []string{"dcim.device"},
	}))
	_ = cf
	mfr := created(call(t, srv, tok, "POST", "/api/dcim/manufacturers/", map[string]any{"name": "Minisforum", "slug": "minisforum"}))
	dt := created(call(t, srv, tok, "POST", "/api/dcim/device-types/", map[string]any{"manufacturer": id(mfr), "model": "MS-01", "slug": "ms-01"}))
	ro := created(call(t, srv, tok, "POST", "/api/dcim/device-roles/", map[string]any{"name": "kubernetes-node", "slug": "kubernetes-node"}))
	_, devs := call(t, srv, tok, "POST", "/api/dcim/devices/", []any{
		map[string]any{"name": "w-01", "device_type": id(dt), "role": id(ro), "site": id(site), "status": "planned", "serial": "SN1",
			"custom_fields": map[string]any{"approved_ek_hash": strings.Repeat("a", 64)}},
		map[string]any{"name": "w-02", "device_type": id(dt), "role": id(ro), "site": id(site), "status": "planned", "serial": "SN2"},
	})
	d1 := devs.([]any)[0].(map[string]any)
	ifc := created(call(t, srv, tok, "POST", "/api/dcim/interfaces/", map[string]any{"device": id(d1), "name": "eth0", "type": "other"}))
	ip := created(call(t, srv, tok, "POST", "/api/ipam/ip-addresses/", map[string]any{"address": "10.40.0.21/24", "assigned_object_type": "dcim.interface", "assigned_object_id": id(ifc)}))
	ok(call(t, srv, tok, "PATCH", fmt.Sprintf("/api/dcim/devices/%d/", id(d1)), map[string]any{"primary_ip4": id(ip)}))
	port := ok(call(t, srv, tok, "GET", fmt.Sprintf("/api/dcim/interfaces/?device_id=%d&name=Port+5", sw), nil))["results"].([]any)[0].(map[string]any)
	created(call(t, srv, tok, "POST", "/api/dcim/cables/", map[string]any{
		"a_terminations": []any{map[string]any{"object_type": "dcim.interface", "object_id": id(ifc)}},
		"b_terminations": []any{map[string]any{"object_type": "dcim.interface", "object_id": id(port)}},
		"status":         "connected",
	}))
	mac := created(call(t, srv, tok, "POST", "/api/dcim/mac-addresses/", map[string]any{"mac_address": "aa:bb:cc:dd:ee:ff", "assigned_object_type": "dcim.interface", "assigned_object_id": id(ifc)}))
	ok(call(t, srv, tok, "PATCH", fmt.Sprintf("/api/dcim/interfaces/%d/", id(ifc)), map[string]any{"primary_mac_address": id(mac)}))
	ok(call(t, srv, tok, "PATCH", fmt.Sprintf("/api/dcim/devices/%d/", id(d1)), map[string]any{"custom_fields": map[string]any{"attested_switch_port": 5, "attested_at": "2026-12-01T10:00:00Z"}}))
	ok(call(t, srv, tok, "PATCH", "/api/dcim/devices/", []any{map[string]any{"id": id(d1), "device_type": id(dt), "role": id(ro), "site": id(site), "serial": "SN1b"}}))
	created(call(t, srv, tok, "POST", "/api/extras/journal-entries/", map[string]any{"assigned_object_type": "dcim.device", "assigned_object_id": id(d1), "kind": "success", "comments": "hello"}))
	ok(call(t, srv, tok, "GET", "/api/dcim/interfaces/?device_role=kubernetes-node&name=eth0&limit=1000", nil))
	ok(call(t, srv, tok, "GET", "/api/dcim/devices/?role=kubernetes-node&limit=1", nil))
	ok(call(t, srv, tok, "GET", "/api/dcim/devices/?cf_attested_switch_port__empty=false", nil))
	ok(call(t, srv, tok, "GET", "/api/ipam/ip-addresses/?parent=10.40.0.0/24", nil))
	ok(call(t, srv, tok, "GET", "/api/dcim/mac-addresses/", nil))
	ok(call(t, srv, tok, "GET", "/api/dcim/cables/", nil))
	ok(call(t, srv, tok, "GET", "/api/extras/custom-fields/?object_type=dcim.device", nil))
	ok(call(t, srv, tok, "GET", "/api/extras/journal-entries/", nil))
	ok(call(t, srv, tok, "GET", "/api/dcim/device-types/", nil))
	ok(call(t, srv, tok, "GET", "/api/dcim/device-roles/", nil))
	ok(call(t, srv, tok, "GET", "/api/dcim/manufacturers/", nil))
	srv.DeleteUser("admin")
	ch := ok(call(t, srv, tok, "GET", fmt.Sprintf("/api/core/object-changes/?changed_object_type=dcim.device&changed_object_id=%d&limit=1000", id(d1)), nil))
	t.Logf("%d changes", len(ch["results"].([]any)))
	ok(call(t, srv, tok, "GET", "/api/core/object-changes/?limit=1000", nil))
}
