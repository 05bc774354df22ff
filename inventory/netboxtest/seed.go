package netboxtest

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The seed helpers write through the same code as the API, as the first
// user (or the named one), so their objects carry changelog records like any
// other.

// seedUser returns the user seeds are written as.
func (s *Server) seedUser(name string) (*user, error) {
	if name != "" {
		if u := s.st.user(name); u != nil {
			return u, nil
		}
		return nil, fmt.Errorf("netboxtest: no user %q", name)
	}
	var first *user
	s.st.users.all(func(_ int64, u *user) bool { first = u; return false })
	if first == nil {
		return nil, fmt.Errorf("netboxtest: no user to write as: add one")
	}
	return first, nil
}

// created says that each object is created, for write.
func created(*input) (int64, error) { return 0, nil }

// write writes objects to path in one transaction as the named user ("" for
// the first user); idOf says which object each updates (0: create it). The
// caller holds s.mu.
func (s *Server) write(userName, path string, idOf func(*input) (int64, error), objects []any) ([]int64, error) {
	u, err := s.seedUser(userName)
	if err != nil {
		return nil, err
	}
	k, ok := kinds[path]
	if !ok || k.write == nil {
		return nil, fmt.Errorf("netboxtest: no writable model at %s", path)
	}
	items := make([]json.RawMessage, len(objects))
	for i, o := range objects {
		if items[i], err = json.Marshal(o); err != nil {
			return nil, err
		}
	}
	t := s.st.begin(u)
	ids, errs := s.writeAll(t, k, items, idOf)
	for i, err := range errs {
		if err != nil {
			t.rollback()
			return nil, fmt.Errorf("netboxtest: %s: object %d: %w", path, i, err)
		}
	}
	return ids, nil
}

// Create writes objects to the model at path (an API path such as
// "/api/dcim/devices/") as the named user ("" for the first user), as one
// POST of a list would: the same checks, the same changelog records, one
// transaction (when one object is refused, none is written). It returns the
// new objects' IDs. It skips HTTP and JSON answers, so a test or a demo
// sets up a large NetBox quickly.
func (s *Server) Create(user, path string, objects ...any) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(user, path, created, objects)
}

// Update writes objects, each naming its object by "id", to the model at
// path as the named user, as one bulk PATCH would (see Create).
func (s *Server) Update(user, path string, objects ...any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := kinds[path]
	if !ok {
		return fmt.Errorf("netboxtest: no model at %s", path)
	}
	_, err := s.write(user, path, func(in *input) (int64, error) { return updateID(s.st, k, in) }, objects)
	return err
}

// find returns the ID of the first object of tab for which match holds.
func find[T any](tab *table[T], match func(*T) bool) int64 {
	var found int64
	tab.all(func(id int64, v *T) bool {
		if match(v) {
			found = id
			return false
		}
		return true
	})
	return found
}

// AddSite creates a site (its slug is its name, lower case, with spaces
// as hyphens) unless one by that name or slug exists, and returns its ID.
func (s *Server) AddSite(name string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addSite(name)
}

func slugify(name string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), " ", "-")
}

func (s *Server) addSite(name string) (int64, error) {
	slug := slugify(name)
	found := find(&s.st.sites, func(v *site) bool { return v.name == name || v.slug == slug })
	return s.ensure(found, pathSites, map[string]any{"name": name, "slug": slug})
}

// ensure returns found, or when it is 0 the ID of obj created at path. The
// caller holds s.mu.
func (s *Server) ensure(found int64, path string, obj any) (int64, error) {
	if found != 0 {
		return found, nil
	}
	ids, err := s.write("", path, created, []any{obj})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// Switch describes a switch for AddSwitch.
type Switch struct {
	Site  string // the site's name; created when missing
	Name  string // the switch's device name
	Ports int    // how many ports: interfaces numbered 1 to Ports
	// PortName formats a port's interface name from its number; "" means
	// "Port %d", as UniFi names ports.
	PortName string
}

// AddSwitch creates a switch device with its ports as interfaces (and the
// site, a "switch" role, and a Ubiquiti device type when missing), and
// returns the device's ID.
func (s *Server) AddSwitch(sw Switch) (int64, error) {
	if sw.Site == "" || sw.Name == "" || sw.Ports < 0 {
		return 0, fmt.Errorf("netboxtest: a switch needs a site, a name and a port count")
	}
	format := sw.PortName
	if format == "" {
		format = "Port %d"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	siteID, err := s.addSite(sw.Site)
	if err != nil {
		return 0, err
	}
	roleID, err := s.ensure(find(&s.st.roles, func(v *role) bool { return v.slug == "switch" }),
		pathRoles, map[string]any{"name": "Switch", "slug": "switch", "color": "2196f3"})
	if err != nil {
		return 0, err
	}
	mfrID, err := s.ensure(find(&s.st.manufacturers, func(v *manufacturer) bool { return v.slug == "ubiquiti" }),
		pathManufacturers, map[string]any{"name": "Ubiquiti", "slug": "ubiquiti"})
	if err != nil {
		return 0, err
	}
	dtID, err := s.ensure(find(&s.st.deviceTypes, func(v *deviceType) bool { return v.manufacturer == mfrID && v.slug == "usw-pro-48" }),
		pathDeviceTypes, map[string]any{"manufacturer": mfrID, "model": "USW Pro 48", "slug": "usw-pro-48"})
	if err != nil {
		return 0, err
	}
	devID, err := s.ensure(0, pathDevices, map[string]any{"name": sw.Name, "device_type": dtID, "role": roleID, "site": siteID, "status": "active"})
	if err != nil {
		return 0, err
	}
	ports := make([]any, sw.Ports)
	for i := range ports {
		ports[i] = map[string]any{"device": devID, "name": fmt.Sprintf(format, i+1), "type": "1000base-t"}
	}
	if _, err := s.write("", pathInterfaces, created, ports); err != nil {
		return 0, err
	}
	return devID, nil
}

// EditCustomField sets the custom field of a device as the named user, as
// an operator editing it in NetBox's UI would (value nil clears it). The
// change is recorded in the changelog under that user.
func (s *Server) EditCustomField(userName string, deviceID int64, field string, value any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.devices.get(deviceID) == nil {
		return fmt.Errorf("netboxtest: no device %d", deviceID)
	}
	if userName == "" {
		return fmt.Errorf("netboxtest: EditCustomField needs a user")
	}
	edit := func(*input) (int64, error) { return deviceID, nil }
	_, err := s.write(userName, pathDevices, edit, []any{map[string]any{"custom_fields": map[string]any{field: value}}})
	return err
}

// ForgetChanges deletes the changelog records of one object, as NetBox's
// changelog retention (CHANGELOG_RETENTION) does after its days, and
// returns how many it deleted. objectType is e.g. "dcim.device".
func (s *Server) ForgetChanges(objectType string, id int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	s.st.changes.all(func(cid int64, c *objectChange) bool {
		if c.objectType == objectType && c.objectID == id {
			delete(s.st.changes.byID, cid)
			n++
		}
		return true
	})
	s.st.changes.compact()
	return n
}

// Interfaces returns the IDs of a device's interfaces by name, e.g. a
// switch's ports after AddSwitch.
func (s *Server) Interfaces(deviceID int64) map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for _, id := range s.st.ifacesByDevice[deviceID] {
		if i := s.st.interfaces.get(id); i != nil {
			out[i.name] = id
		}
	}
	return out
}

// JournalEntry is one journal entry NetBox holds: its ID, the ID of the
// device it is assigned to, its kind ("info", "success", "warning",
// "danger") and its text.
type JournalEntry struct {
	ID, Device int64
	Kind, Text string
}

// Journal returns the journal entries of the device with ID deviceID, or
// of every device when deviceID is 0 (netboxtest journals on devices
// only), oldest first: what a client reads from GET
// /api/extras/journal-entries/, without the pages.
func (s *Server) Journal(deviceID int64) []JournalEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []JournalEntry
	s.st.journal.all(func(id int64, j *journalEntry) bool {
		if deviceID == 0 || j.objectID == deviceID {
			out = append(out, JournalEntry{ID: id, Device: j.objectID, Kind: j.kind, Text: j.comments})
		}
		return true
	})
	return out
}
