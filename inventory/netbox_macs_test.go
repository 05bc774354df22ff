package inventory

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestFirstOfEach(t *testing.T) {
	tests := []struct {
		devices      []int64
		first, again []int
	}{
		{nil, nil, nil},
		{[]int64{1}, []int{0}, nil},
		{[]int64{1, 2, 3}, []int{0, 1, 2}, nil},
		{[]int64{1, 1}, []int{0}, []int{1}},
		{[]int64{1, 2, 1, 3, 2, 1}, []int{0, 1, 3}, []int{2, 4, 5}},
	}
	for _, tt := range tests {
		recs := make([]macRecord, len(tt.devices))
		for i, d := range tt.devices {
			recs[i] = macRecord{device: d, mac: "02:00:00:00:00:01"}
		}
		first, again := firstOfEach(recs, func(r macRecord) int64 { return r.device })
		if !cmp.Equal(first, tt.first) || !cmp.Equal(again, tt.again) {
			t.Errorf("firstOfEach(%v) = %v, %v; want %v, %v", tt.devices, first, again, tt.first, tt.again)
		}
	}
}

// iface is an interface of device dev holding the MAC objects macs (id,
// address), the first of them primary when primary is set.
func iface(id, dev int64, primary bool, macs ...nbMAC) *nbInterface {
	i := &nbInterface{ID: id, Name: "eth0", Type: nbChoice{Value: "25gbase-x-sfp28"}, MACAddresses: macs}
	i.Device.ID = dev
	if primary {
		i.PrimaryMAC = &macs[0]
	}
	return i
}

func TestPlanMACs(t *testing.T) {
	const mac, other = "02:00:00:00:00:01", "02:00:00:00:00:02"
	unavailable := fmt.Errorf("netbox: GET /api/dcim/interfaces/: %w", ErrUnavailable)
	noIface := func(device int64) error { return fmt.Errorf("device %d: %w", device, ErrNotFound) }

	bare := iface(10, 1, false)
	holds := iface(20, 2, false, nbMAC{ID: 7, MACAddress: "02-00-00-00-00-01"})
	primary := iface(30, 3, true, nbMAC{ID: 8, MACAddress: "02:00:00:00:00:01"})
	another := iface(40, 4, true, nbMAC{ID: 9, MACAddress: other}, nbMAC{ID: 11, MACAddress: mac})

	// A case of one record leaves first, ierrs and errs unset: they are
	// {0}, {nil} and {nil}.
	tests := []struct {
		name    string
		recs    []macRecord
		first   []int
		ifaces  []*nbInterface
		ierrs   []error
		outs    []*nbInterface
		errs    []error
		pending []macWork
	}{
		{name: "a new MAC", recs: []macRecord{{1, mac}}, ifaces: []*nbInterface{bare}, outs: []*nbInterface{bare},
			pending: []macWork{{i: 0, iface: bare, mac: mac}}},
		{name: "a MAC object the interface holds, in another notation", recs: []macRecord{{2, mac}}, ifaces: []*nbInterface{holds}, outs: []*nbInterface{holds},
			pending: []macWork{{i: 0, iface: holds, mac: mac, macID: 7}}},
		{name: "already the primary MAC", recs: []macRecord{{3, mac}}, ifaces: []*nbInterface{primary}, outs: []*nbInterface{primary}},
		{name: "another primary MAC", recs: []macRecord{{4, mac}}, ifaces: []*nbInterface{another}, outs: []*nbInterface{another},
			pending: []macWork{{i: 0, iface: another, mac: mac, macID: 11}}},
		{name: "only a read", recs: []macRecord{{1, ""}}, ifaces: []*nbInterface{bare}, outs: []*nbInterface{bare}},
		{name: "no interface, a MAC to record", recs: []macRecord{{5, mac}}, ifaces: []*nbInterface{nil}, outs: []*nbInterface{nil},
			errs: []error{ErrNotFound}},
		{name: "no interface, only a read", recs: []macRecord{{5, ""}}, ifaces: []*nbInterface{nil}, outs: []*nbInterface{nil}},
		{name: "the read failed", recs: []macRecord{{1, mac}}, ifaces: []*nbInterface{bare}, ierrs: []error{unavailable},
			outs: []*nbInterface{nil}, errs: []error{ErrUnavailable}},
		{
			name:    "a batch, a device twice",
			recs:    []macRecord{{1, mac}, {3, mac}, {1, other}, {5, mac}, {2, mac}},
			first:   []int{0, 1, 3, 4},
			ifaces:  []*nbInterface{bare, primary, nil, holds},
			ierrs:   []error{nil, nil, nil, nil},
			outs:    []*nbInterface{bare, primary, nil, nil, holds},
			errs:    []error{nil, nil, nil, ErrNotFound, nil},
			pending: []macWork{{i: 0, iface: bare, mac: mac}, {i: 4, iface: holds, mac: mac, macID: 7}},
		},
	}
	for _, tt := range tests {
		if len(tt.recs) == 1 {
			tt.first = []int{0}
			if tt.ierrs == nil {
				tt.ierrs = []error{nil}
			}
			if tt.errs == nil {
				tt.errs = []error{nil}
			}
		}
		outs, errs, pending := planMACs(tt.recs, tt.first, tt.ifaces, tt.ierrs, noIface)
		if diff := cmp.Diff(tt.outs, outs); diff != "" {
			t.Errorf("%s: interfaces (-want +got):\n%s", tt.name, diff)
		}
		if diff := cmp.Diff(tt.errs, errs, cmpopts.EquateErrors()); diff != "" {
			t.Errorf("%s: errors (-want +got):\n%s", tt.name, diff)
		}
		if diff := cmp.Diff(tt.pending, pending, cmp.AllowUnexported(macWork{})); diff != "" {
			t.Errorf("%s: pending (-want +got):\n%s", tt.name, diff)
		}
	}
}

// asJSON is v as it goes to NetBox.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	noErr(t, err)
	return string(b)
}

func TestMACCreates(t *testing.T) {
	pending := []macWork{
		{i: 0, iface: iface(10, 1, false), mac: "02:00:00:00:00:01"},
		{i: 3, iface: iface(20, 2, false), mac: "02:00:00:00:00:02", macID: 7},
		{i: 4, iface: iface(30, 3, false), mac: "02:00:00:00:00:03"},
	}
	creates, made := macCreates(pending)
	want := `[{"assigned_object_id":10,"assigned_object_type":"dcim.interface","mac_address":"02:00:00:00:00:01"},` +
		`{"assigned_object_id":30,"assigned_object_type":"dcim.interface","mac_address":"02:00:00:00:00:03"}]`
	if got := asJSON(t, creates); got != want {
		t.Errorf("macCreates:\n got %s\nwant %s", got, want)
	}
	if !cmp.Equal(made, []int{0, 2}) {
		t.Errorf("macCreates made %v, want [0 2]", made)
	}
	if creates, made := macCreates(pending[1:2]); creates != nil || made != nil {
		t.Errorf("macCreates of a held MAC = %v, %v; want none", creates, made)
	}
}

func TestPrimaryPatches(t *testing.T) {
	w := func(ifaceID, dev, macID int64, typ string) macWork {
		i := iface(ifaceID, dev, false)
		i.Type.Value = typ
		return macWork{iface: i, mac: "02:00:00:00:00:01", macID: macID}
	}
	patches, err := primaryPatches([]macWork{w(10, 1, 7, "25gbase-x-sfp28"), w(20, 2, 8, "1000base-t")})
	want := `[{"device":1,"id":10,"name":"eth0","primary_mac_address":7,"type":"25gbase-x-sfp28"},` +
		`{"device":2,"id":20,"name":"eth0","primary_mac_address":8,"type":"1000base-t"}]`
	if err != nil || asJSON(t, patches) != want {
		t.Errorf("primaryPatches = %s, %v; want %s", asJSON(t, patches), err, want)
	}
	for _, tt := range []struct {
		name string
		w    macWork
		want string
	}{
		{"a device ID out of range", w(10, 1<<31, 7, "1000base-t"), "netbox: 2147483648 is not a NetBox ID: not found in netbox"},
		{"no MAC object", w(10, 1, 0, "1000base-t"), "netbox: 0 is not a NetBox ID: not found in netbox"},
		{"an unknown type", w(10, 1, 7, "carrier-pigeon"), `netbox: interface 10 has type "carrier-pigeon": `},
	} {
		patches, err := primaryPatches([]macWork{w(30, 3, 9, "1000base-t"), tt.w})
		if err == nil || patches != nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: primaryPatches = %v, %v; want an error beginning %q", tt.name, patches, err, tt.want)
		}
	}
	if patches, err := primaryPatches(nil); patches != nil || err != nil {
		t.Errorf("primaryPatches(nil) = %v, %v", patches, err)
	}
}
