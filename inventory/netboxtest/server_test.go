package netboxtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// noErr fails the test at once when err is not nil.
func noErr(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// send makes one API request as token ("": none) through client and
// returns the answer and its body.
func send(client *http.Client, srv *Server, token, method, uri string, body any) (*http.Response, []byte, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, nil, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, srv.URL+uri, r)
	if err != nil {
		return nil, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	rsp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer rsp.Body.Close()
	data, err := io.ReadAll(rsp.Body)
	return rsp, data, err
}

// call makes one API request as token and decodes the answer.
func call(t *testing.T, srv *Server, token, method, uri string, body any) (int, any) {
	t.Helper()
	rsp, data, err := send(http.DefaultClient, srv, token, method, uri, body)
	noErr(t, err)
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

// listed is how many objects the server lists at uri, answered 200.
func listed(t *testing.T, srv *Server, tok, uri string) int {
	t.Helper()
	return int(must(t, 200)(call(t, srv, tok, "GET", uri, nil))["count"].(float64))
}

// TestTour walks through what fleet does, in the fleet world, with every
// request checked against the schema too.
func TestTour(t *testing.T) {
	srv, tok, ids := fleet(t, t)
	ok := must(t, 200)
	created := must(t, 201)
	_, devs := call(t, srv, tok, "POST", pathDevices, []any{newDevice(ids, "w-01", "custom_fields", map[string]any{"ek": "aaaa"}), newDevice(ids, "w-02")})
	d1 := devs.([]any)[0].(map[string]any)
	ifc := created(call(t, srv, tok, "POST", pathInterfaces, map[string]any{"device": id(d1), "name": "eth0", "type": "other"}))
	ip := created(call(t, srv, tok, "POST", pathIPs, map[string]any{"address": "10.40.0.21/24", "assigned_object_type": "dcim.interface", "assigned_object_id": id(ifc)}))
	ok(call(t, srv, tok, "PATCH", fmt.Sprintf("%s%d/", pathDevices, id(d1)), map[string]any{"primary_ip4": id(ip)}))
	port := ok(call(t, srv, tok, "GET", fmt.Sprintf("%s?device_id=%d&name=Port+4", pathInterfaces, ids["switch"]), nil))["results"].([]any)[0].(map[string]any)
	created(call(t, srv, tok, "POST", pathCables, map[string]any{
		"a_terminations": []any{map[string]any{"object_type": "dcim.interface", "object_id": id(ifc)}},
		"b_terminations": []any{map[string]any{"object_type": "dcim.interface", "object_id": id(port)}},
		"status":         "connected",
	}))
	mac := created(call(t, srv, tok, "POST", pathMACs, map[string]any{"mac_address": "aa:bb:cc:dd:ee:ff", "assigned_object_type": "dcim.interface", "assigned_object_id": id(ifc)}))
	ok(call(t, srv, tok, "PATCH", fmt.Sprintf("%s%d/", pathInterfaces, id(ifc)), map[string]any{"primary_mac_address": id(mac)}))
	ok(call(t, srv, tok, "PATCH", fmt.Sprintf("%s%d/", pathDevices, id(d1)), map[string]any{"custom_fields": map[string]any{"port": 4, "at": "2026-12-01T10:00:00Z"}}))
	ok(call(t, srv, tok, "PATCH", pathDevices, []any{map[string]any{"id": id(d1), "device_type": ids["type"], "role": ids["role"], "site": ids["site"], "serial": "SN1b"}}))
	j := created(call(t, srv, tok, "POST", pathJournal, map[string]any{"assigned_object_type": "dcim.device", "assigned_object_id": id(d1), "kind": "success", "comments": "hello"}))
	if j["created_by"] != float64(2) {
		t.Errorf("the journal entry's created_by: %v, want 2 (terraform)", j["created_by"])
	}
	if got, want := srv.Journal(0), []JournalEntry{{ID: id(j), Device: id(d1), Kind: "success", Text: "hello"}}; !slices.Equal(got, want) || len(srv.Journal(id(d1)+1)) != 0 {
		t.Errorf("Journal: %+v, want %+v", got, want)
	}
	for _, uri := range []string{
		"/api/dcim/interfaces/?device_role=node&name=eth0&limit=1000",
		"/api/dcim/devices/?role=node&limit=1",
		"/api/dcim/devices/?cf_port__empty=false",
		"/api/ipam/ip-addresses/?parent=10.40.0.0/24",
		"/api/extras/custom-fields/?object_type=dcim.device",
		"/api/dcim/mac-addresses/", "/api/dcim/cables/", "/api/extras/journal-entries/",
		"/api/dcim/device-types/", "/api/dcim/device-roles/", "/api/dcim/manufacturers/",
	} {
		if code, v := call(t, srv, tok, "GET", uri, nil); code != 200 {
			t.Fatalf("GET %s: %d %v", uri, code, v)
		}
	}
	srv.DeleteUser("admin")
	ch := ok(call(t, srv, tok, "GET", fmt.Sprintf("%s?changed_object_type=dcim.device&changed_object_id=%d&limit=1000", pathChanges, id(d1)), nil))
	t.Logf("%d changes", len(ch["results"].([]any)))
	ok(call(t, srv, tok, "GET", pathChanges+"?limit=1000", nil))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	noErr(t, err)
	return data
}

// answersOnly fails the test when an answer does not match the schema, but
// lets requests that do not pass: tests of refusals send them on purpose.
type answersOnly struct{ t *testing.T }

func (a answersOnly) Errorf(format string, args ...any) {
	a.t.Helper()
	msg := fmt.Sprintf(format, args...)
	if strings.HasPrefix(msg, "netboxtest: request ") || strings.Contains(msg, ": request ") && !strings.Contains(msg, "response ") {
		return
	}
	a.t.Errorf("%s", msg)
}

// fleet is a server with the folly site, a 4-port switch, a role, a device
// type and custom fields on devices; what it exchanges is checked against
// the schema by check (answersOnly: its answers).
func fleet(t *testing.T, check Reporter) (*Server, string, map[string]int64) {
	t.Helper()
	srv := New(&Config{Validate: check, Users: []string{"admin", "terraform", "alice"}})
	t.Cleanup(srv.Close)
	sw, err := srv.AddSwitch(Switch{Site: "folly", Name: "usw", Ports: 4})
	noErr(t, err)
	ids := map[string]int64{"switch": sw, "site": 1}
	ids["role"] = mustIDs(t)(srv.Create("", pathRoles, map[string]any{"name": "node", "slug": "node"}))[0]
	ids["type"] = mustIDs(t)(srv.Create("", pathDeviceTypes, map[string]any{"manufacturer": 1, "model": "MS-01", "slug": "ms-01"}))[0]
	mustIDs(t)(srv.Create("", pathCustomFields,
		map[string]any{"name": "class", "type": "text", "object_types": []string{"dcim.device"}},
		map[string]any{"name": "port", "type": "integer", "object_types": []string{"dcim.device"}, "filter_logic": "exact"},
		map[string]any{"name": "ek", "type": "text", "object_types": []string{"dcim.device"}, "validation_regex": "^[0-9a-f]{4}$"},
		map[string]any{"name": "at", "type": "datetime", "object_types": []string{"dcim.device"}},
	))
	return srv, srv.Token("terraform"), ids
}

func mustIDs(t *testing.T) func([]int64, error) []int64 {
	return func(ids []int64, err error) []int64 {
		t.Helper()
		noErr(t, err)
		return ids
	}
}

func newDevice(ids map[string]int64, name string, extra ...any) map[string]any {
	d := map[string]any{"name": name, "device_type": ids["type"], "role": ids["role"], "site": ids["site"], "status": "planned", "serial": "SN-" + name}
	for i := 0; i+1 < len(extra); i += 2 {
		d[extra[i].(string)] = extra[i+1]
	}
	return d
}

func TestPagination(t *testing.T) {
	srv, tok, ids := fleet(t, answersOnly{t})
	var devs []any
	for i := range 120 {
		devs = append(devs, newDevice(ids, fmt.Sprintf("n-%03d", i)))
	}
	if code, v := call(t, srv, tok, "POST", pathDevices, devs); code != 201 || len(v.([]any)) != 120 {
		t.Fatalf("bulk create: %d", code)
	}
	get := func(uri string) (page map[string]any, results []any) {
		t.Helper()
		page = must(t, 200)(call(t, srv, tok, "GET", uri, nil))
		return page, page["results"].([]any)
	}
	p, results := get(pathDevices + "?role=node")
	if p["count"] != float64(120) || len(results) != 50 || p["next"] == nil || p["previous"] != nil {
		t.Fatalf("the first page: count %v, %d results, next %v, previous %v", p["count"], len(results), p["next"], p["previous"])
	}
	// Follow next to the end.
	var names []any
	for uri := pathDevices + "?role=node&limit=45"; ; {
		p, results := get(uri)
		for _, r := range results {
			names = append(names, r.(map[string]any)["name"])
		}
		if p["next"] == nil {
			break
		}
		uri = strings.TrimPrefix(p["next"].(string), srv.URL)
	}
	if len(names) != 120 || names[0] != "n-000" || names[119] != "n-119" {
		t.Errorf("following next: %d names, %v ... ", len(names), names[:3])
	}
	p, results = get(pathDevices + "?role=node&limit=50&offset=100")
	if len(results) != 20 || p["next"] != nil || p["previous"] == nil || !strings.Contains(p["previous"].(string), "offset=50") {
		t.Errorf("the last page: %d results, next %v, previous %v", len(results), p["next"], p["previous"])
	}
	small := New(&Config{MaxPageSize: 30, Validate: t})
	defer small.Close()
	if _, err := small.AddSwitch(Switch{Site: "s", Name: "sw", Ports: 100}); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []string{"0", "1000"} {
		_, v := call(t, small, small.Token("admin"), "GET", pathInterfaces+"?limit="+limit, nil)
		if n := len(v.(map[string]any)["results"].([]any)); n != 30 {
			t.Errorf("limit=%s with MAX_PAGE_SIZE 30: %d results", limit, n)
		}
	}
}

func TestBulkWritesAreOneTransaction(t *testing.T) {
	srv, tok, ids := fleet(t, answersOnly{t})
	code, v := call(t, srv, tok, "POST", pathDevices, []any{newDevice(ids, "a"), newDevice(ids, "b", "status", "bogus"), newDevice(ids, "a")})
	if code != 400 {
		t.Fatalf("a bulk create with refused objects: %d %v", code, v)
	}
	errs := v.([]any)
	if len(errs) != 3 || len(errs[0].(map[string]any)) != 0 || errs[1].(map[string]any)["status"] == nil || errs[2].(map[string]any)["__all__"] == nil {
		t.Errorf("the errors: %v", errs)
	}
	if n := listed(t, srv, tok, pathDevices+"?role=node"); n != 0 {
		t.Errorf("%v devices written by a refused bulk create", n)
	}
	if n := listed(t, srv, tok, pathChanges+"?changed_object_type=dcim.device&user_name=terraform"); n != 0 {
		t.Errorf("%v changes recorded by a refused bulk create", n)
	}
	// A bulk update needs IDs, and is one transaction too.
	created := mustIDs(t)(srv.Create("terraform", pathDevices,
		newDevice(ids, "a", "custom_fields", map[string]any{"class": "worker", "port": 1, "ek": "00aa"}),
		newDevice(ids, "b", "custom_fields", map[string]any{"class": "worker", "port": 2, "ek": "00bb"})))
	refused(t, srv, tok, []request{
		{"a bulk update with a refused object", "PATCH", pathDevices, []any{
			map[string]any{"id": created[0], "serial": "X"},
			map[string]any{"id": created[1], "custom_fields": map[string]any{"ek": "not hex"}},
		}, "[map[] map[custom_fields:[Invalid value for custom field 'ek': Values must match this regex: ^[0-9a-f]{4}$]]]"},
		{"a bulk update without IDs", "PATCH", pathDevices, []any{map[string]any{"serial": "X"}}, "[map[id:[This field is required.]]]"},
		{"a bulk update that is not a list", "PATCH", pathDevices, map[string]any{"id": created[0]}, `map[non_field_errors:[Expected a list of items but got type "dict".]]`},
	})
	_, d := call(t, srv, tok, "GET", fmt.Sprintf("%s%d/", pathDevices, created[0]), nil)
	if s := d.(map[string]any)["serial"]; s != "SN-a" {
		t.Errorf("a refused bulk update changed the serial to %v", s)
	}
	// An item of a bulk update merges its custom_fields into the device's,
	// as a single PATCH does and as NetBox's partial update does: fields
	// the item does not name are kept, a null unsets its field.
	single := map[string]any{"custom_fields": map[string]any{"port": 7, "ek": nil}}
	must(t, 200)(call(t, srv, tok, "PATCH", fmt.Sprintf("%s%d/", pathDevices, created[0]), single))
	bulk := map[string]any{"id": created[1], "device_type": ids["type"], "role": ids["role"], "site": ids["site"], "custom_fields": single["custom_fields"]}
	must(t, 200)(call(t, srv, tok, "PATCH", pathDevices, []any{bulk}))
	for _, id := range created {
		_, d := call(t, srv, tok, "GET", fmt.Sprintf("%s%d/", pathDevices, id), nil)
		cf := d.(map[string]any)["custom_fields"].(map[string]any)
		if cf["class"] != "worker" || cf["port"] != float64(7) || cf["ek"] != nil {
			t.Errorf("device %d's custom fields after a PATCH of port and ek: %v", id, cf)
		}
	}
}

func TestChangelog(t *testing.T) {
	srv, tok, ids := fleet(t, answersOnly{t})
	created := mustIDs(t)(srv.Create("terraform", pathDevices, newDevice(ids, "a", "custom_fields", map[string]any{"ek": "abcd"})))
	uri := fmt.Sprintf("%s%d/", pathDevices, created[0])
	call(t, srv, srv.Token("alice"), "PATCH", uri, map[string]any{"custom_fields": map[string]any{"ek": "0123"}})
	call(t, srv, tok, "PATCH", uri, map[string]any{"custom_fields": map[string]any{"ek": "0123"}}) // changes nothing
	call(t, srv, tok, "PATCH", uri, map[string]any{"custom_fields": map[string]any{"class": "worker"}})
	_, v := call(t, srv, tok, "GET", fmt.Sprintf("%s?changed_object_type=dcim.device&changed_object_id=%d", pathChanges, created[0]), nil)
	// cf is the ek and class of a change's data, "-" for none.
	cf := func(data any) string {
		if data == nil {
			return "-"
		}
		f := data.(map[string]any)["custom_fields"].(map[string]any)
		return fmt.Sprint(f["ek"], "/", f["class"])
	}
	got := []string{}
	for _, r := range v.(map[string]any)["results"].([]any) {
		c := r.(map[string]any)
		got = append(got, fmt.Sprintf("%s %s %s -> %s", c["user_name"], c["action"].(map[string]any)["value"], cf(c["prechange_data"]), cf(c["postchange_data"])))
	}
	want := []string{
		"terraform update 0123/<nil> -> 0123/worker",
		"alice update abcd/<nil> -> 0123/<nil>",
		"terraform create - -> abcd/<nil>",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the changelog, newest first:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, q := range []string{"user_name=alice", "action=create", "ordering=time&limit=1"} {
		_, v := call(t, srv, tok, "GET", fmt.Sprintf("%s?changed_object_type=dcim.device&changed_object_id=%d&%s", pathChanges, created[0], q), nil)
		if n := len(v.(map[string]any)["results"].([]any)); n != 1 {
			t.Errorf("changes with %s: %d", q, n)
		}
	}
	// One bulk request has one request ID.
	two := mustIDs(t)(srv.Create("terraform", pathDevices, newDevice(ids, "b"), newDevice(ids, "c")))
	_, v = call(t, srv, tok, "GET", fmt.Sprintf("%s?changed_object_type=dcim.device&changed_object_id=%d&changed_object_id=%d", pathChanges, two[0], two[1]), nil)
	res := v.(map[string]any)["results"].([]any)
	if len(res) != 2 || res[0].(map[string]any)["request_id"] != res[1].(map[string]any)["request_id"] {
		t.Errorf("a bulk create's changes: %v", res)
	}
	if n := srv.ForgetChanges("dcim.device", created[0]); n != 3 {
		t.Errorf("ForgetChanges forgot %d changes, want 3", n)
	}
}

func TestFilters(t *testing.T) {
	srv, tok, ids := fleet(t, answersOnly{t})
	mustIDs(t)(srv.Create("terraform", pathDevices,
		newDevice(ids, "a", "custom_fields", map[string]any{"class": "worker", "port": 5}),
		newDevice(ids, "b", "custom_fields", map[string]any{"class": "controlplane"}),
		newDevice(ids, "c")))
	for q, want := range map[string]int{
		"name=a":                     1,
		"name=a&name=b":              2,
		"serial=SN-c":                1,
		"serial=sn-C":                1, // iexact, as in NetBox
		"cf_class=worker":            1,
		"cf_class=WORK":              1, // loose: contains, any case
		"cf_class__ie=WORKER":        1,
		"cf_class__n=worker":         2,
		"cf_class__empty=true":       1,
		"cf_class__empty=false":      2,
		"cf_port=5":                  1,
		"cf_port=50":                 0,
		"status=planned":             3,
		"site=folly&name=a":          1,
		"role_id=999":                0,
		"id=1&id=2&id=3&id=4&id=5":   3,
		"cf_class__ic=PLANE&name=b":  1,
		"device_type_id=1&name=zzzz": 0,
	} {
		if got := listed(t, srv, tok, pathDevices+"?role=node&"+q); got != want {
			t.Errorf("?%s: %d devices, want %d", q, got, want)
		}
	}
	for _, q := range []string{"colour=red", "cf_nope=1", "cf_class__regex=x", "id=x", "ordering=-name", "role=nope", "site=nope"} {
		if code, _ := call(t, srv, tok, "GET", pathDevices+"?"+q, nil); code != 400 {
			t.Errorf("?%s: %d, want 400", q, code)
		}
	}
}

// request is a named API request, and the whole 400 answer it gets, as
// fmt.Sprint prints it.
type request struct {
	name, method, uri string
	body              any
	answer            string
}

// refused checks that the server answers each request 400, with the
// answer the request names.
func refused(t *testing.T, srv *Server, tok string, reqs []request) {
	t.Helper()
	for _, c := range reqs {
		if code, v := call(t, srv, tok, c.method, c.uri, c.body); code != 400 || fmt.Sprint(v) != c.answer {
			t.Errorf("%s: %d %v, want 400 %s", c.name, code, v, c.answer)
		}
	}
}

func TestNetBoxRules(t *testing.T) {
	srv, tok, ids := fleet(t, answersOnly{t})
	ports := srv.Interfaces(ids["switch"])
	dev := mustIDs(t)(srv.Create("terraform", pathDevices, newDevice(ids, "a"), newDevice(ids, "b")))
	ifc := mustIDs(t)(srv.Create("terraform", pathInterfaces,
		map[string]any{"device": dev[0], "name": "eth0", "type": "other"},
		map[string]any{"device": dev[1], "name": "eth0", "type": "other"}))
	ip := mustIDs(t)(srv.Create("terraform", pathIPs, map[string]any{"address": "10.0.0.1/24", "assigned_object_type": typeInterface, "assigned_object_id": ifc[0]}))
	mac := mustIDs(t)(srv.Create("terraform", pathMACs, map[string]any{"mac_address": "58-47-ca-71-0a-01", "assigned_object_type": typeInterface, "assigned_object_id": ifc[0]}))
	refused(t, srv, tok, []request{
		{"a name twice in a site", "POST", pathDevices, newDevice(ids, "A"), "map[__all__:[Device name must be unique per site.]]"},
		{"an address twice", "POST", pathIPs, map[string]any{"address": "10.0.0.1/16"}, "map[address:[Duplicate IP address found in global table: 10.0.0.1/24]]"},
		{"a primary address of another device", "PATCH", fmt.Sprintf("%s%d/", pathDevices, dev[1]), map[string]any{"primary_ip4": ip[0]}, "map[primary_ip4:[The specified IP address (10.0.0.1/24) is not assigned to this device.]]"},
		{"a primary MAC of another interface", "PATCH", fmt.Sprintf("%s%d/", pathInterfaces, ifc[1]), map[string]any{"primary_mac_address": mac[0]}, "map[primary_mac_address:[MAC address 58:47:CA:71:0A:01 is not assigned to this interface.]]"},
		{"an interface name twice", "POST", pathInterfaces, map[string]any{"device": dev[0], "name": "eth0", "type": "other"}, "map[__all__:[Interface with this Device and Name already exists.]]"},
		{"an unknown custom field", "PATCH", fmt.Sprintf("%s%d/", pathDevices, dev[0]), map[string]any{"custom_fields": map[string]any{"nope": "x"}}, "map[custom_fields:[Unknown field name 'nope' in custom field data.]]"},
		{"a custom field of the wrong type", "PATCH", fmt.Sprintf("%s%d/", pathDevices, dev[0]), map[string]any{"custom_fields": map[string]any{"port": "five"}}, "map[custom_fields:[Invalid value for custom field 'port': Value must be an integer.]]"},
		{"a custom field against its regex", "PATCH", fmt.Sprintf("%s%d/", pathDevices, dev[0]), map[string]any{"custom_fields": map[string]any{"ek": "ABCD"}}, "map[custom_fields:[Invalid value for custom field 'ek': Values must match this regex: ^[0-9a-f]{4}$]]"},
		{"a bad datetime", "PATCH", fmt.Sprintf("%s%d/", pathDevices, dev[0]), map[string]any{"custom_fields": map[string]any{"at": "yesterday"}}, "map[custom_fields:[Invalid value for custom field 'at': Date values must be in ISO 8601 format (YYYY-MM-DD HH:MM:SS).]]"},
		{"a field netboxtest lacks", "PATCH", fmt.Sprintf("%s%d/", pathDevices, dev[0]), map[string]any{"rack": 1}, "map[rack:[netboxtest does not implement this field.]]"},
		{"a cable to nothing", "POST", pathCables, map[string]any{"a_terminations": []any{map[string]any{"object_type": typeInterface, "object_id": ifc[0]}}, "b_terminations": []any{}}, "map[b_terminations:[Must define A and B terminations when creating a new cable.]]"},
		{"a journal entry without text", "POST", pathJournal, map[string]any{"assigned_object_type": "dcim.device", "assigned_object_id": dev[0], "comments": " "}, "map[comments:[This field may not be blank.]]"},
		// Names (in any case) and slugs of organizational objects are unique.
		{"a site's name and slug twice", "POST", pathSites, map[string]any{"name": "FOLLY", "slug": "folly"}, "map[name:[site with this name already exists.] slug:[site with this slug already exists.]]"},
		{"a manufacturer's name and slug twice", "POST", pathManufacturers, map[string]any{"name": "ubiquiti", "slug": "ubiquiti"}, "map[name:[manufacturer with this name already exists.] slug:[manufacturer with this slug already exists.]]"},
		{"a role's name and slug twice", "POST", pathRoles, map[string]any{"name": "Node", "slug": "node"}, "map[name:[device role with this name already exists.] slug:[device role with this slug already exists.]]"},
		{"a device type's model and slug twice", "POST", pathDeviceTypes, map[string]any{"manufacturer": 1, "model": "ms-01", "slug": "ms-01"}, "map[__all__:[Device type with this Manufacturer and Model already exists. Device type with this Manufacturer and Slug already exists.]]"},
		{"a custom field's name twice", "POST", pathCustomFields, map[string]any{"name": "class", "object_types": []string{"dcim.device"}}, "map[name:[custom field with this name already exists.]]"},
		{"a role color that is not hex", "POST", pathRoles, map[string]any{"name": "red", "slug": "red", "color": "red"}, "map[color:[Enter a valid hexadecimal RGB color code.]]"},
	})
	// What NetBox allows.
	must(t, 200)(call(t, srv, tok, "PATCH", fmt.Sprintf("%s%d/", pathDevices, dev[0]), map[string]any{"primary_ip4": ip[0], "custom_fields": map[string]any{"at": "2026-12-01T10:00:00.5Z", "port": 7}}))
	must(t, 200)(call(t, srv, tok, "PATCH", fmt.Sprintf("%s%d/", pathInterfaces, ifc[0]), map[string]any{"primary_mac_address": mac[0]}))
	cab := must(t, 201)(call(t, srv, tok, "POST", pathCables, map[string]any{
		"a_terminations": []any{map[string]any{"object_type": typeInterface, "object_id": ifc[0]}},
		"b_terminations": []any{map[string]any{"object_type": typeInterface, "object_id": ports["Port 3"]}},
	}))
	// Now: the primary address cannot move, the primary MAC cannot leave, a
	// cabled interface takes no second cable.
	refused(t, srv, tok, []request{
		{"moving a primary address", "PATCH", fmt.Sprintf("%s%d/", pathIPs, ip[0]), map[string]any{"assigned_object_type": typeInterface, "assigned_object_id": ifc[1]}, "map[interface:[Cannot reassign IP address while it is designated as the primary IP for the parent object]]"},
		{"moving a primary MAC", "PATCH", fmt.Sprintf("%s%d/", pathMACs, mac[0]), map[string]any{"assigned_object_type": nil, "assigned_object_id": nil}, "map[assigned_object:[Cannot unassign MAC Address while it is designated as the primary MAC for an object]]"},
		{"a second cable", "POST", pathCables, map[string]any{
			"a_terminations": []any{map[string]any{"object_type": typeInterface, "object_id": ifc[1]}},
			"b_terminations": []any{map[string]any{"object_type": typeInterface, "object_id": ports["Port 3"]}},
		}, "map[b_terminations:[Duplicate termination found for dcim.interface:3: cable 1]]"},
	})
	_, d := call(t, srv, tok, "GET", fmt.Sprintf("%s%d/", pathDevices, dev[0]), nil)
	cf := d.(map[string]any)["custom_fields"].(map[string]any)
	if cf["at"] != "2026-12-01T10:00:00.500000+00:00" || cf["port"] != float64(7) || cf["class"] != nil || d.(map[string]any)["interface_count"] != float64(1) {
		t.Errorf("the device: %v", d)
	}
	_, i := call(t, srv, tok, "GET", fmt.Sprintf("%s%d/", pathInterfaces, ifc[0]), nil)
	im := i.(map[string]any)
	if im["mac_address"] != "58:47:CA:71:0A:01" || im["count_ipaddresses"] != float64(1) || len(im["link_peers"].([]any)) != 1 || im["link_peers_type"] != typeInterface {
		t.Errorf("the interface: %v", im)
	}
	// Deleting the cable frees both ends.
	if code, _ := call(t, srv, tok, "DELETE", fmt.Sprintf("%s%d/", pathCables, id(cab)), nil); code != 204 {
		t.Errorf("DELETE cable: %d", code)
	}
	_, i = call(t, srv, tok, "GET", fmt.Sprintf("%s%d/", pathInterfaces, ports["Port 3"]), nil)
	if i.(map[string]any)["cable"] != nil {
		t.Errorf("the port after the cable's deletion: %v", i)
	}
	for _, c := range []struct{ method, uri string }{
		{"DELETE", fmt.Sprintf("%s%d/", pathDevices, dev[0])},
		{"PUT", fmt.Sprintf("%s%d/", pathDevices, dev[0])},
		{"POST", pathChanges},
	} {
		if code, _ := call(t, srv, tok, c.method, c.uri, map[string]any{}); code != 405 {
			t.Errorf("%s %s: %d, want 405", c.method, c.uri, code)
		}
	}
	for _, uri := range []string{"/api/dcim/racks/", pathDevices + "999/", pathDevices + "x/", "/api/dcim/devices"} {
		if code, _ := call(t, srv, tok, "GET", uri, nil); code != 404 {
			t.Errorf("GET %s: %d, want 404", uri, code)
		}
	}
}

// A missing or unknown token is refused, and each request is recorded;
// the faults Inject sets fail requests as they say.
func TestFaults(t *testing.T) {
	srv, _, ids := fleet(t, answersOnly{t})
	for _, tok := range []string{"", "0000000000000000000000000000000000000000"} {
		code, v := call(t, srv, tok, "GET", pathDevices, nil)
		if code != 403 || v.(map[string]any)["detail"] == nil {
			t.Errorf("token %q: %d %v", tok, code, v)
		}
	}
	if srv.Token("nobody") != "" || srv.AddUser("alice") != srv.Token("alice") {
		t.Error("tokens of users")
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].User != "" || reqs[0].Method != "GET" || reqs[0].URI != pathDevices {
		t.Errorf("requests: %+v", reqs)
	}
	client := &http.Client{Timeout: 200 * time.Millisecond}
	for _, c := range []struct {
		name   string
		fault  *Fault // nil: the fault of the row before goes on
		user   string
		method string
		body   any
		status int // 0: no whole answer
	}{
		{"Down", &Fault{Kind: Down}, "terraform", "GET", nil, 0},
		{"Failing after 1: the first request", &Fault{Kind: Failing, After: 1}, "terraform", "GET", nil, 200},
		{"Failing", nil, "terraform", "POST", newDevice(ids, "x"), 503},
		{"Failing 502", &Fault{Kind: Failing, Status: 502}, "terraform", "GET", nil, 502},
		{"Slow", &Fault{Kind: Slow, Delay: time.Hour}, "terraform", "POST", newDevice(ids, "y"), 0},
		{"Slow 10ms", &Fault{Kind: Slow, Delay: 10 * time.Millisecond}, "terraform", "GET", nil, 200},
		{"Cut", &Fault{Kind: Cut}, "terraform", "POST", newDevice(ids, "z"), 0},
		// A fault of one user's requests: alice's fail, terraform's go on.
		{"another user's request during alice's fault", &Fault{Kind: Failing, User: "alice"}, "terraform", "GET", nil, 200},
		{"alice's request during her fault", nil, "alice", "GET", nil, 503},
	} {
		if c.fault != nil {
			srv.Inject(*c.fault)
		}
		start := time.Now()
		rsp, _, err := send(client, srv, srv.Token(c.user), c.method, pathDevices, c.body)
		switch took := time.Since(start); {
		case c.status == 0 && err == nil:
			t.Errorf("%s: the answer arrived whole: %d", c.name, rsp.StatusCode)
		case c.status != 0 && (err != nil || rsp.StatusCode != c.status):
			t.Errorf("%s: %v %v, want %d", c.name, rsp, err, c.status)
		case took > 5*time.Second:
			t.Errorf("%s: %v after %v", c.name, err, took)
		}
	}
	srv.Inject(Fault{})
	// Only the cut request was processed.
	if n := listed(t, srv, srv.Token("terraform"), pathDevices+"?role=node"); n != 1 {
		t.Errorf("%v devices after the faults, want 1 (the cut request's)", n)
	}
	if srv.RequestCount() < 7 {
		t.Errorf("%d requests counted", srv.RequestCount())
	}
	srv.ResetRequests()
	if srv.RequestCount() != 0 {
		t.Error("ResetRequests")
	}
}
