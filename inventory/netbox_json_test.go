package inventory

import (
	"encoding/json"
	"testing"
	"time"
)

// Whatever NetBox (or something posing as it) answers, reading it never
// panics: a device view, a switch port, a binding verdict.
func FuzzNetBoxAnswers(f *testing.F) {
	f.Add([]byte(`{"count":1,"next":null,"results":[{"id":1,"name":"w-01","serial":"S","status":{"value":"planned","label":"Planned"},"device_type":{"id":1,"slug":"ms-01","model":"MS-01","manufacturer":{"id":1,"name":"Minisforum"}},"primary_ip4":{"id":1,"address":"10.40.0.21/24"},"custom_fields":{"class":"worker","attested_at":"2026-12-01T10:00:00.123456+00:00","attested_switch_port":5,"approved_ek_hash":null}}]}`))
	f.Add([]byte(`{"count":1,"next":null,"results":[{"id":3,"name":"eth0","device":{"id":1,"name":"w-01"},"cable":{"id":9},"link_peers_type":"dcim.interface","link_peers":[{"id":7,"name":"Port 5","device":{"id":2,"name":"usw"}}],"primary_mac_address":{"id":1,"mac_address":"58:47:CA:71:0A:01"},"mac_addresses":[{"id":1,"mac_address":"58:47:CA:71:0A:01"}]}]}`))
	f.Add([]byte(`{"count":2,"next":null,"results":[{"id":2,"user_name":"alice","action":{"value":"update"},"prechange_data":{"custom_fields":{"approved_ek_hash":"a"}},"postchange_data":{"custom_fields":{"approved_ek_hash":"b"}}},{"id":1,"user_name":"terraform","action":{"value":"create"},"prechange_data":null,"postchange_data":{"custom_fields":{"approved_ek_hash":"a","approved_ek_hash_ecc":7}}}]}`))
	f.Add([]byte(`{"count":1,"next":"http://x/?offset=1","results":[{"id":1,"address":"10.0.0.1/24","assigned_object_type":"dcim.interface","assigned_object_id":4,"assigned_object":{"id":4,"name":"eth0","device":{"id":1,"name":null}}}]}`))
	f.Add([]byte(`{"results":[{"custom_fields":{"attested_switch_port":"12","attested_at":"2026-12-01 10:00:00","class":{"x":1}},"primary_ip4":{"address":"bogus"},"name":null}]}`))
	nb, err := NewNetBox("https://netbox.example", "t", &NetBoxConfig{Switch: "usw"})
	noErr(f, err)
	f.Fuzz(func(t *testing.T, data []byte) {
		var devs page[nbDevice]
		if json.Unmarshal(data, &devs) == nil {
			for i := range devs.Results {
				d := nb.view(&devs.Results[i], nil)
				if d.AttestedAt.After(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) {
					t.Logf("a far future: %v", d.AttestedAt)
				}
			}
		}
		var ifaces page[nbInterface]
		if json.Unmarshal(data, &ifaces) == nil {
			for i := range ifaces.Results {
				if p := nb.switchPort(&ifaces.Results[i]); p < 0 {
					t.Fatalf("switch port %d", p)
				}
				nb.view(&nbDevice{}, &ifaces.Results[i])
			}
		}
		var changes page[nbChange]
		if json.Unmarshal(data, &changes) == nil {
			j := bindingJudge{author: "terraform", current: map[string]string{cfApprovedEKHash: "a", cfApprovedEKHashECC: ""}}
			for i := range changes.Results {
				if j.see(&changes.Results[i]) {
					break
				}
			}
			j.verdict()
		}
		var ips page[nbIP]
		if json.Unmarshal(data, &ips) == nil {
			for i := range ips.Results {
				_ = ips.Results[i].holder()
				_ = ips.Results[i].iface()
			}
		}
	})
}

// The judge of a binding reads the changelog newest first.
func TestBindingJudge(t *testing.T) {
	write := func(user string, pre, post map[string]cfText) nbChange {
		c := nbChange{UserName: user, Action: nbChoice{Value: "update"}}
		if pre != nil {
			c.Pre = &struct {
				CustomFields map[string]cfText `json:"custom_fields"`
			}{pre}
		}
		if post != nil {
			c.Post = &struct {
				CustomFields map[string]cfText `json:"custom_fields"`
			}{post}
		}
		return c
	}
	rsa, ecc := cfApprovedEKHash, cfApprovedEKHashECC
	for _, c := range []struct {
		name      string
		rsa, ecc  string
		changes   []nbChange // newest first
		want      bool
		wantEarly bool // the verdict is known before the changelog ends
	}{
		{"both by the author, one change", "a", "b", []nbChange{write("tf", nil, map[string]cfText{rsa: "a", ecc: "b"})}, true, true},
		{"both by the author, two changes", "a", "b", []nbChange{
			write("tf", map[string]cfText{rsa: "a"}, map[string]cfText{rsa: "a", ecc: "b"}),
			write("fleetd", map[string]cfText{rsa: "a"}, map[string]cfText{rsa: "a", "last_run": "x"}),
			write("tf", nil, map[string]cfText{rsa: "a"}),
		}, true, true},
		{"a value no change wrote", "a", "b", []nbChange{write("tf", nil, map[string]cfText{rsa: "a"})}, false, false},
		{"the last write left another value", "a", "", []nbChange{write("tf", nil, map[string]cfText{rsa: "z"})}, false, true},
		{"another user last", "a", "", []nbChange{write("alice", map[string]cfText{rsa: "z"}, map[string]cfText{rsa: "a"}), write("tf", nil, map[string]cfText{rsa: "z"})}, false, true},
		{"an empty field never written", "a", "", []nbChange{write("tf", nil, map[string]cfText{rsa: "a"})}, true, false},
		{"a deletion record is skipped", "a", "", []nbChange{write("alice", map[string]cfText{rsa: "a"}, nil), write("tf", nil, map[string]cfText{rsa: "a"})}, true, false},
	} {
		j := bindingJudge{author: "tf", current: map[string]string{rsa: c.rsa, ecc: c.ecc}}
		early := false
		for i := range c.changes {
			if j.see(&c.changes[i]) {
				early = true
				break
			}
		}
		if got := j.verdict(); got != c.want || early != c.wantEarly {
			t.Errorf("%s: verdict %v (early %v), want %v (early %v)", c.name, got, early, c.want, c.wantEarly)
		}
	}
}
