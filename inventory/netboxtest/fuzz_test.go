package netboxtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

var fuzzServer = sync.OnceValue(func() *Server {
	srv := New(nil)
	if _, err := srv.AddSwitch(Switch{Site: "folly", Name: "usw", Ports: 4}); err != nil {
		panic(err)
	}
	srv.Create("", pathCustomFields, map[string]any{"name": "class", "type": "text", "object_types": []string{"dcim.device"}})
	srv.Create("", pathCustomFields, map[string]any{"name": "port", "type": "integer", "object_types": []string{"dcim.device"}})
	return srv
})

// Whatever a client sends, the server answers with a status and, but for
// 204, JSON; it never panics.
func FuzzServer(f *testing.F) {
	f.Add("GET", "/api/dcim/devices/", "role=switch&limit=1", []byte(nil))
	f.Add("POST", "/api/dcim/devices/", "", []byte(`[{"name":"a","device_type":1,"role":1,"site":1,"custom_fields":{"class":"w","port":5}}]`))
	f.Add("PATCH", "/api/dcim/devices/1/", "", []byte(`{"primary_ip4":{"id":1},"custom_fields":{"port":"x"}}`))
	f.Add("PATCH", "/api/dcim/devices/", "", []byte(`[{"id":1,"serial":"S"},{"id":"x"}]`))
	f.Add("POST", "/api/dcim/cables/", "", []byte(`{"a_terminations":[{"object_type":"dcim.interface","object_id":1}],"b_terminations":[{"object_type":"dcim.interface","object_id":2}]}`))
	f.Add("POST", "/api/ipam/ip-addresses/", "", []byte(`{"address":"10.0.0.1/24","assigned_object_type":"dcim.interface","assigned_object_id":3}`))
	f.Add("GET", "/api/core/object-changes/", "time_after=2026-01-01T00:00:00Z&ordering=time", []byte(nil))
	f.Add("DELETE", "/api/dcim/cables/1/", "", []byte(nil))
	f.Add("GET", "/api/dcim/devices/", "cf_class__empty=maybe&cf_port__n=1", []byte(nil))
	f.Fuzz(func(t *testing.T, method, path, query string, body []byte) {
		srv := fuzzServer()
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path+query, " \t\r\n#") {
			return
		}
		req := httptest.NewRequest(http.MethodGet, "http://netbox.test/", bytes.NewReader(body))
		req.Method = method
		req.URL.Path, req.URL.RawQuery = path, query
		req.Header.Set("Authorization", "Token "+srv.Token("admin"))
		w := httptest.NewRecorder()
		srv.serveHTTP(w, req)
		if w.Code < 200 || w.Code > 599 {
			t.Fatalf("%s %s?%s: status %d", method, path, query, w.Code)
		}
		if w.Code != http.StatusNoContent && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s %s?%s: %d, not JSON: %q", method, path, query, w.Code, w.Body.Bytes())
		}
	})
}
