package netboxtest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"time"
)

// table holds the objects of one model by ID, in the order they were
// created (NetBox lists in its own orderings; netboxtest lists by ID, which
// clients must not rely on either way). The zero table is empty.
type table[T any] struct {
	byID map[int64]*T
	ids  []int64 // ascending; may hold deleted IDs, which byID lacks
	next int64
}

func (t *table[T]) get(id int64) *T { return t.byID[id] }

// all calls fn for each object in ID order until fn returns false.
func (t *table[T]) all(fn func(id int64, v *T) bool) {
	for _, id := range t.ids {
		if v, ok := t.byID[id]; ok && !fn(id, v) {
			return
		}
	}
}

// compact drops deleted IDs from ids once they are many.
func (t *table[T]) compact() {
	if len(t.ids) > 64 && len(t.ids) > 2*len(t.byID) {
		t.ids = slices.DeleteFunc(t.ids, func(id int64) bool { return t.byID[id] == nil })
	}
}

// The models. Objects are values: a write replaces the pointer in its table
// and never changes an object in place, so a rollback restores the old
// pointer.

type meta struct {
	id               int64
	created, updated time.Time
}

type user struct {
	id          int64
	name, token string
}

// named is what NetBox's organizational objects (sites, manufacturers,
// device roles) share: a name and a slug unique among their kind, and a
// description.
type named struct {
	name, slug, description string
}

type site struct {
	meta
	named
	status string
}

type manufacturer struct {
	meta
	named
}

type deviceType struct {
	meta
	manufacturer            int64
	model, slug, partNumber string
	description             string
}

type role struct {
	meta
	named
	color string
}

type device struct {
	meta
	name, serial, status, description, comments string
	deviceType, role, site, primaryIP4          int64
	customFields                                map[string]any // set values only; unset fields render null
}

type iface struct {
	meta
	device, primaryMAC, cable     int64
	name, typ, description, label string
	enabled, mgmtOnly             bool
	cableEnd                      string // "A" or "B" while cabled
}

type macAddress struct {
	meta
	mac         string // upper case, colon separated, as NetBox answers
	iface       int64  // 0: unassigned
	description string
}

type ipAddress struct {
	meta
	address                            netip.Prefix
	status, role, dnsName, description string
	iface                              int64 // 0: unassigned
}

type cable struct {
	meta
	status, typ, label, description string
	a, b                            []int64 // interface IDs
}

type customField struct {
	meta
	name, typ, label, description, groupName  string
	objectTypes                               []string
	required                                  bool
	regex, filterLogic, uiVisible, uiEditable string
	weight, searchWeight                      int64
	defaultValue                              any
}

type journalEntry struct {
	meta
	objectType, kind, comments string
	objectID                   int64
	createdBy                  int64 // user ID; 0: none
}

type objectChange struct {
	// meta's created is the time of the change.
	meta
	user                                  int64 // 0: the user was deleted (NetBox answers null)
	userName, requestID, objectType, repr string
	action                                string // create, update, delete
	objectID                              int64
	// The object's data before and after, as JSON: held as bytes, so that
	// a large changelog costs the garbage collector little.
	pre, post json.RawMessage
}

// store is the state of one server. Server.mu guards it.
type store struct {
	users         table[user]
	sites         table[site]
	manufacturers table[manufacturer]
	deviceTypes   table[deviceType]
	roles         table[role]
	devices       table[device]
	interfaces    table[iface]
	macs          table[macAddress]
	ips           table[ipAddress]
	cables        table[cable]
	customFields  table[customField]
	journal       table[journalEntry]
	changes       table[objectChange]

	lastTime time.Time

	// Indexes of interfaces by device, and of MAC and IP addresses by
	// interface, so that rendering a page stays proportional to the page.
	ifacesByDevice map[int64][]int64
	macsByIface    map[int64][]int64
	ipsByIface     map[int64][]int64
	// Indexes for NetBox's uniqueness rules: IP addresses by host, devices
	// by site and lower-case name.
	ipsByHost     map[netip.Addr][]int64
	devicesByName map[string][]int64
	ifacesByName  map[string][]int64 // by device ID and name
}

func newStore() *store {
	return &store{
		ifacesByDevice: map[int64][]int64{},
		macsByIface:    map[int64][]int64{},
		ipsByIface:     map[int64][]int64{},
		ipsByHost:      map[netip.Addr][]int64{},
		devicesByName:  map[string][]int64{},
		ifacesByName:   map[string][]int64{},
	}
}

// now returns the current time, strictly after every time it returned
// before, so that the changelog has an order.
func (s *store) now() time.Time {
	t := time.Now().UTC().Truncate(time.Microsecond)
	if !t.After(s.lastTime) {
		t = s.lastTime.Add(time.Microsecond)
	}
	s.lastTime = t
	return t
}

// tx is one write request: every change it makes can be undone, as a
// NetBox request runs in one database transaction.
type tx struct {
	s         *store
	user      *user
	requestID string
	undo      []func()
}

func (s *store) begin(u *user) *tx {
	return &tx{s: s, user: u, requestID: newUUID()}
}

func (t *tx) rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.undo = nil
}

// put stores v under id in tab, creating it when id is 0 (it returns the
// new ID), and remembers how to undo that.
func put[T any](t *tx, tab *table[T], id int64, v *T) int64 {
	if tab.byID == nil {
		tab.byID = map[int64]*T{}
	}
	if id == 0 {
		tab.next++
		id = tab.next
		tab.ids = append(tab.ids, id)
		t.undo = append(t.undo, func() {
			delete(tab.byID, id)
			tab.next--
			tab.ids = tab.ids[:len(tab.ids)-1]
		})
	} else {
		old := tab.byID[id]
		t.undo = append(t.undo, func() { tab.byID[id] = old })
	}
	tab.byID[id] = v
	return id
}

// remove deletes id from tab, undoably.
func remove[T any](t *tx, tab *table[T], id int64) {
	old := tab.byID[id]
	delete(tab.byID, id)
	t.undo = append(t.undo, func() { tab.byID[id] = old })
}

// record adds an ObjectChange for a write by the transaction's user, as
// NetBox's change logging does. An update that changed nothing but the
// object's last_updated is not recorded, as NetBox 4 does not.
func (t *tx) record(action, objectType string, id int64, repr string, pre, post map[string]any) {
	if action == "update" && equalExceptUpdated(pre, post) {
		return
	}
	c := &objectChange{
		meta:       meta{created: t.s.now()},
		userName:   t.user.name,
		user:       t.user.id,
		requestID:  t.requestID,
		action:     action,
		objectType: objectType,
		objectID:   id,
		repr:       repr,
		pre:        snapshotJSON(pre),
		post:       snapshotJSON(post),
	}
	c.id = put(t, &t.s.changes, 0, c)
}

// snapshotJSON encodes a snapshot; nil stays nil (no data).
func snapshotJSON(m map[string]any) json.RawMessage {
	if m == nil {
		return nil
	}
	data, err := json.Marshal(m)
	if err != nil {
		panic("netboxtest: a snapshot does not encode: " + err.Error())
	}
	return data
}

func equalExceptUpdated(a, b map[string]any) bool {
	a, b = maps.Clone(a), maps.Clone(b)
	delete(a, "last_updated")
	delete(b, "last_updated")
	return reflect.DeepEqual(a, b)
}

// reindex moves id from key from to key to in the index m (the zero key:
// none), undoably.
func reindex[K comparable](t *tx, m map[K][]int64, id int64, from, to K) {
	var zero K
	if from == to {
		return
	}
	if from != zero {
		old := m[from]
		m[from] = slices.DeleteFunc(slices.Clone(old), func(e int64) bool { return e == id })
		t.undo = append(t.undo, func() { m[from] = old })
	}
	if to != zero {
		// Appending in place is safe: undo restores the old slice, whose
		// length leaves out what was appended.
		old := m[to]
		m[to] = append(old, id)
		t.undo = append(t.undo, func() { m[to] = old })
	}
}

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
