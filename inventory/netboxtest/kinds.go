package netboxtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The API paths netboxtest serves.
const (
	pathSites         = "/api/dcim/sites/"
	pathManufacturers = "/api/dcim/manufacturers/"
	pathDeviceTypes   = "/api/dcim/device-types/"
	pathRoles         = "/api/dcim/device-roles/"
	pathDevices       = "/api/dcim/devices/"
	pathInterfaces    = "/api/dcim/interfaces/"
	pathMACs          = "/api/dcim/mac-addresses/"
	pathIPs           = "/api/ipam/ip-addresses/"
	pathCables        = "/api/dcim/cables/"
	pathCustomFields  = "/api/extras/custom-fields/"
	pathJournal       = "/api/extras/journal-entries/"
	pathChanges       = "/api/core/object-changes/"
)

// A kind is one model of the API: its path, how to list, render, write,
// delete and snapshot it. A nil write or remove answers 405.
type kind struct {
	path       string
	objectType string
	rows       func(s *store) rows
	filters    map[string]filter
	// choices are the filters that name related objects by slug; NetBox
	// answers 400 when a value names no object.
	choices  map[string]func(s *store, v string) bool
	render   func(r *renderer, id int64) any
	write    func(t *tx, id int64, in *input) (int64, error) // id 0 creates
	remove   func(t *tx, id int64)
	snapshot func(s *store, id int64) map[string]any
	repr     func(s *store, id int64) string
	order    func(s *store, ids []int64, ordering string) error // nil: ID order only
}

// A filter says whether the object id matches one of vals (NetBox ORs the
// values of one parameter and ANDs the parameters).
type filter func(s *store, id int64, vals []string) (bool, error)

// rows is what a kind's table answers whatever its model.
type rows interface {
	each(fn func(id int64) bool) // every ID, in list order, until fn returns false
	has(id int64) bool
}

func (t *table[T]) each(fn func(id int64) bool) { t.all(func(id int64, _ *T) bool { return fn(id) }) }

func (t *table[T]) has(id int64) bool { return t.get(id) != nil }

// model is a kind told in terms of its objects, the T of one table; kindOf
// makes the kind. Every T embeds a meta, which base returns.
type model[T any] struct {
	path, objectType string
	tab              func(s *store) *table[T]
	filters          map[string]filterOf[T]
	choices          map[string]func(s *store, v string) bool
	render           func(r *renderer, v *T) any
	// def is a new object before a create's fields are read.
	def T
	// write reads in into v, a copy of the object id (0: def, to create),
	// adding what it refuses to in's errors. nil: the kind is read only.
	write func(t *tx, id int64, v *T, in *input)
	// saved keeps the indexes once v is stored under id in place of old
	// (nil when created).
	saved    func(t *tx, id int64, old, v *T)
	snapshot func(s *store, v *T) map[string]any // without the times
	repr     func(v *T) string
	order    func(s *store, ids []int64, ordering string) error
}

// A filterOf says whether the object v matches one of vals.
type filterOf[T any] func(s *store, v *T, vals []string) (bool, error)

// base returns the meta of the object that embeds it.
func (m *meta) base() *meta { return m }

// kindOf makes the kind of m; P is *T. Every kind has the filter id.
func kindOf[T any, P interface {
	*T
	base() *meta
}](m model[T]) *kind {
	k := &kind{
		path: m.path, objectType: m.objectType, choices: m.choices, order: m.order,
		rows:    func(s *store) rows { return m.tab(s) },
		filters: map[string]filter{},
		render:  func(r *renderer, id int64) any { return m.render(r, m.tab(r.s).get(id)) },
	}
	m.filters["id"] = idFilter(func(_ *store, v *T) int64 { return P(v).base().id })
	for name, f := range m.filters {
		k.filters[name] = func(s *store, id int64, vals []string) (bool, error) { return f(s, m.tab(s).get(id), vals) }
	}
	if m.write != nil {
		k.write = func(t *tx, id int64, in *input) (int64, error) {
			old := m.tab(t.s).get(id)
			v := *cmp.Or(old, &m.def)
			m.write(t, id, &v, in)
			if err := in.err(); err != nil {
				return 0, err
			}
			b := P(&v).base()
			stamp(t, b, id == 0)
			b.id = put(t, m.tab(t.s), id, &v)
			if m.saved != nil {
				m.saved(t, b.id, old, &v)
			}
			return b.id, nil
		}
	}
	if m.snapshot != nil {
		k.snapshot = func(s *store, id int64) map[string]any {
			v := m.tab(s).get(id)
			out := m.snapshot(s, v)
			out["created"], out["last_updated"] = timeString(P(v).base().created), timeString(P(v).base().updated)
			return out
		}
		k.repr = func(s *store, id int64) string { return m.repr(m.tab(s).get(id)) }
	}
	return k
}

// slugOf is the choice check of a filter naming an object of the kind at
// path by its slug.
func slugOf(path string) func(s *store, v string) bool {
	return func(s *store, v string) bool {
		ids, _ := matching(s, kinds[path], []queryFilter{{"slug", []string{v}, kinds[path].filters["slug"]}})
		return len(ids) > 0
	}
}

// deviceID is the choice check of a filter naming a device by ID.
func deviceID(s *store, v string) bool {
	id, err := strconv.ParseInt(v, 10, 64)
	return err == nil && s.devices.get(id) != nil
}

// Filters built from a field's value.

// parsed is a filter that reads each value with parse, refusing the
// request with bad (a format of the value) when one does not parse, and
// matches v when match holds for one of the values.
func parsed[T, V any](parse func(string) (V, error), bad string, match func(s *store, v *T, x V) bool) filterOf[T] {
	return func(s *store, v *T, vals []string) (bool, error) {
		xs := make([]V, len(vals))
		for i, val := range vals {
			x, err := parse(val)
			if err != nil {
				return false, fmt.Errorf(bad, val)
			}
			xs[i] = x
		}
		return slices.ContainsFunc(xs, func(x V) bool { return match(s, v, x) }), nil
	}
}

func parseID(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }

func idFilter[T any](get func(s *store, v *T) int64) filterOf[T] {
	return parsed(parseID, "enter a number: %q", func(s *store, v *T, id int64) bool { return get(s, v) == id })
}

func strFilter[T any](get func(s *store, v *T) string) filterOf[T] {
	return func(s *store, v *T, vals []string) (bool, error) { return slices.Contains(vals, get(s, v)), nil }
}

// iStrFilter matches in any case, as NetBox matches device serials and MAC
// addresses.
func iStrFilter[T any](get func(s *store, v *T) string) filterOf[T] {
	return func(s *store, v *T, vals []string) (bool, error) {
		x := get(s, v)
		return slices.ContainsFunc(vals, func(val string) bool { return strings.EqualFold(val, x) }), nil
	}
}

func boolFilter[T any](get func(s *store, v *T) bool) filterOf[T] {
	return parsed(strconv.ParseBool, "%q is not true or false", func(s *store, v *T, b bool) bool { return get(s, v) == b })
}

func required(in *input, create bool, fields ...string) {
	if !create {
		return
	}
	for _, f := range fields {
		if !in.has(f) {
			in.errs.add(f, "This field is required.")
		}
	}
}

// stamp sets the times of an object written now.
func stamp(t *tx, m *meta, create bool) {
	now := t.s.now()
	if create {
		m.created = now
	}
	m.updated = now
}

// kinds is every model netboxtest serves, by path.
var kinds = map[string]*kind{}

func register(k *kind) { kinds[k.path] = k }

func init() {
	register(siteKind())
	register(manufacturerKind())
	register(deviceTypeKind())
	register(roleKind())
	register(deviceKind())
	register(interfaceKind())
	register(macKind())
	register(ipKind())
	register(cableKind())
	register(customFieldKind())
	register(journalKind())
	register(changeKind())
}

// orNil is v, or nil (JSON null) when v is its type's zero.
func orNil[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}

// namedKind completes m, a kind of organizational objects (sites,
// manufacturers, device roles) whose named is what names returns: the name
// and slug filters and the repr; the write of name, slug (both required to
// create) and description, each unique in the kind (a name in any case; in
// noun's words), beside the fields m's write reads; and their snapshot.
func namedKind[T any, P interface {
	*T
	base() *meta
}](m model[T], noun string, names func(*T) *named, fields ...string) *kind {
	m.filters = map[string]filterOf[T]{
		"name": strFilter(func(_ *store, v *T) string { return names(v).name }),
		"slug": strFilter(func(_ *store, v *T) string { return names(v).slug }),
	}
	m.repr = func(v *T) string { return names(v).name }
	write, snapshot := m.write, m.snapshot
	m.write = func(t *tx, id int64, v *T, in *input) {
		n := names(v)
		in.known(slices.Concat([]string{"name", "slug", "description"}, fields)...)
		required(in, id == 0, "name", "slug")
		in.setStr("name", &n.name)
		in.setSlug(&n.slug)
		in.setStr("description", &n.description)
		if write != nil {
			write(t, id, v, in)
		}
		m.tab(t.s).all(func(oid int64, o *T) bool {
			if oid != id && strings.EqualFold(names(o).name, n.name) {
				in.errs.add("name", "%s with this name already exists.", noun)
			}
			if oid != id && names(o).slug == n.slug {
				in.errs.add("slug", "%s with this slug already exists.", noun)
			}
			return true
		})
	}
	m.snapshot = func(s *store, v *T) map[string]any {
		out := map[string]any{"name": names(v).name, "slug": names(v).slug, "description": names(v).description}
		if snapshot != nil {
			maps.Copy(out, snapshot(s, v))
		}
		return out
	}
	return kindOf[T, P](m)
}

// hexColor is the form of a role's color.
var hexColor = regexp.MustCompile(`^[0-9a-f]{6}$`)

func siteKind() *kind {
	return namedKind(model[site]{
		path: pathSites, objectType: "dcim.site", def: site{status: "active"},
		tab:    func(s *store) *table[site] { return &s.sites },
		render: (*renderer).site,
		write: func(_ *tx, _ int64, v *site, in *input) {
			in.setChoice("status", false, &v.status, "planned", "staging", "active", "decommissioning", "retired")
		},
		snapshot: func(_ *store, v *site) map[string]any { return map[string]any{"status": v.status} },
	}, "site", func(v *site) *named { return &v.named }, "status")
}

func manufacturerKind() *kind {
	return namedKind(model[manufacturer]{
		path: pathManufacturers, objectType: "dcim.manufacturer",
		tab:    func(s *store) *table[manufacturer] { return &s.manufacturers },
		render: (*renderer).manufacturer,
	}, "manufacturer", func(v *manufacturer) *named { return &v.named })
}

func deviceTypeKind() *kind {
	return kindOf(model[deviceType]{
		path: pathDeviceTypes, objectType: "dcim.devicetype",
		tab: func(s *store) *table[deviceType] { return &s.deviceTypes },
		filters: map[string]filterOf[deviceType]{
			"slug":            strFilter(func(_ *store, v *deviceType) string { return v.slug }),
			"model":           strFilter(func(_ *store, v *deviceType) string { return v.model }),
			"manufacturer_id": idFilter(func(_ *store, v *deviceType) int64 { return v.manufacturer }),
			"manufacturer":    strFilter(func(s *store, v *deviceType) string { return s.manufacturers.get(v.manufacturer).slug }),
		},
		choices: map[string]func(*store, string) bool{"manufacturer": slugOf(pathManufacturers)},
		render:  (*renderer).deviceType,
		write: func(t *tx, id int64, v *deviceType, in *input) {
			in.known("manufacturer", "model", "slug", "part_number", "description", "u_height", "is_full_depth")
			required(in, id == 0, "manufacturer", "model", "slug")
			related(in, "manufacturer", &t.s.manufacturers, &v.manufacturer)
			in.setStr("model", &v.model)
			in.setSlug(&v.slug)
			in.setStr("part_number", &v.partNumber)
			in.setStr("description", &v.description)
			if in.has("u_height") {
				var f float64
				if json.Unmarshal(in.raw["u_height"], &f) != nil || f != 1 {
					in.errs.add("u_height", "netboxtest holds device types of height 1 only.")
				}
			}
			in.boolean("is_full_depth")
			if find(&t.s.deviceTypes, func(o *deviceType) bool {
				return o.id != id && o.manufacturer == v.manufacturer && strings.EqualFold(o.model, v.model)
			}) != 0 {
				in.errs.add("__all__", "Device type with this Manufacturer and Model already exists.")
			}
			if find(&t.s.deviceTypes, func(o *deviceType) bool { return o.id != id && o.manufacturer == v.manufacturer && o.slug == v.slug }) != 0 {
				in.errs.add("__all__", "Device type with this Manufacturer and Slug already exists.")
			}
		},
		snapshot: func(_ *store, v *deviceType) map[string]any {
			return map[string]any{"manufacturer": v.manufacturer, "model": v.model, "slug": v.slug, "part_number": v.partNumber, "description": v.description}
		},
		repr: func(v *deviceType) string { return v.model },
	})
}

func roleKind() *kind {
	return namedKind(model[role]{
		path: pathRoles, objectType: "dcim.devicerole", def: role{color: "9e9e9e"},
		tab:    func(s *store) *table[role] { return &s.roles },
		render: (*renderer).role,
		write: func(_ *tx, _ int64, v *role, in *input) {
			if s, ok := in.str("color", false); ok {
				if !hexColor.MatchString(s) {
					in.errs.add("color", "Enter a valid hexadecimal RGB color code.")
				}
				v.color = s
			}
			in.boolean("vm_role")
		},
		snapshot: func(_ *store, v *role) map[string]any { return map[string]any{"color": v.color} },
	}, "device role", func(v *role) *named { return &v.named }, "color", "vm_role")
}

var deviceStatuses = []string{"offline", "active", "planned", "staged", "failed", "inventory", "decommissioning"}

func deviceKind() *kind {
	return kindOf(model[device]{
		path: pathDevices, objectType: "dcim.device", def: device{status: "active"},
		tab: func(s *store) *table[device] { return &s.devices },
		filters: map[string]filterOf[device]{
			"name":           strFilter(func(_ *store, v *device) string { return v.name }),
			"serial":         iStrFilter(func(_ *store, v *device) string { return v.serial }), // iexact, as in NetBox
			"status":         strFilter(func(_ *store, v *device) string { return v.status }),
			"role_id":        idFilter(func(_ *store, v *device) int64 { return v.role }),
			"role":           strFilter(func(s *store, v *device) string { return s.roles.get(v.role).slug }),
			"site_id":        idFilter(func(_ *store, v *device) int64 { return v.site }),
			"site":           strFilter(func(s *store, v *device) string { return s.sites.get(v.site).slug }),
			"device_type_id": idFilter(func(_ *store, v *device) int64 { return v.deviceType }),
		},
		choices: map[string]func(*store, string) bool{"role": slugOf(pathRoles), "site": slugOf(pathSites)},
		render:  (*renderer).device,
		write:   writeDevice,
		saved: func(t *tx, id int64, old, v *device) {
			reindex(t, t.s.devicesByName, id, nameKey(old), nameKey(v))
		},
		snapshot: func(s *store, v *device) map[string]any {
			return map[string]any{
				"name": orNil(v.name), "device_type": v.deviceType, "role": v.role, "site": v.site, "serial": v.serial, "status": v.status,
				"primary_ip4": orNil(v.primaryIP4), "description": v.description, "comments": v.comments,
				"custom_fields": (&renderer{s: s}).customFieldsOf("dcim.device", v.customFields),
			}
		},
		repr: deviceDisplay,
	})
}

func writeDevice(t *tx, id int64, v *device, in *input) {
	s := t.s
	in.known("name", "device_type", "role", "site", "serial", "status", "primary_ip4", "description", "comments", "custom_fields")
	required(in, id == 0, "device_type", "role", "site")
	if n, ok := in.str("name", true); ok {
		if len(n) > 64 {
			in.errs.add("name", "Ensure this field has no more than 64 characters.")
		}
		v.name = n
	}
	related(in, "device_type", &s.deviceTypes, &v.deviceType)
	related(in, "role", &s.roles, &v.role)
	related(in, "site", &s.sites, &v.site)
	if sn, ok := in.str("serial", false); ok {
		if len(sn) > 50 {
			in.errs.add("serial", "Ensure this field has no more than 50 characters.")
		}
		v.serial = sn
	}
	in.setChoice("status", false, &v.status, deviceStatuses...)
	if r, ok := in.ref("primary_ip4", true); ok {
		v.primaryIP4 = r
		checkPrimaryIP4(s, in, id, r)
	}
	in.setStr("description", &v.description)
	in.setStr("comments", &v.comments)
	if cf, ok := in.object("custom_fields"); ok {
		v.customFields = mergeCustomFields(s, in, "dcim.device", v.customFields, cf)
	}
	for _, oid := range s.devicesByName[nameKey(v)] {
		if oid != id {
			in.errs.add("__all__", "Device name must be unique per site.")
			break
		}
	}
}

// checkPrimaryIP4 refuses the IP address r as the primary IPv4 of device
// id unless it is an IPv4 address on one of the device's interfaces. 0
// unsets the primary IPv4 and is always accepted.
func checkPrimaryIP4(s *store, in *input, id, r int64) {
	if r == 0 {
		return
	}
	ip := s.ips.get(r)
	switch {
	case ip == nil:
		in.errs.add("primary_ip4", "Related object not found using the provided numeric ID: %d", r)
	case !ip.address.Addr().Is4():
		in.errs.add("primary_ip4", "%s is not an IPv4 address.", ip.address)
	case ip.iface == 0 || s.interfaces.get(ip.iface).device != id || id == 0:
		in.errs.add("primary_ip4", "The specified IP address (%s) is not assigned to this device.", ip.address)
	}
}

// mergeCustomFields returns a copy of old with the custom fields in cf
// merged in, as NetBox merges them: a null value unsets the field. A value
// customFieldValue refuses is added to in's errors and leaves the field as
// it was.
func mergeCustomFields(s *store, in *input, objectType string, old map[string]any, cf map[string]json.RawMessage) map[string]any {
	merged := make(map[string]any, len(old))
	maps.Copy(merged, old)
	for k, raw := range cf {
		val, err := s.customFieldValue(objectType, k, raw)
		if err != nil {
			in.errs.add("custom_fields", "%v", err)
			continue
		}
		if val == nil {
			delete(merged, k)
		} else {
			merged[k] = val
		}
	}
	return merged
}

// nameKey is the devicesByName key of d: NetBox keeps device names unique
// per site, in any case; unnamed devices (and none) are not indexed.
func nameKey(d *device) string {
	if d == nil || d.name == "" {
		return ""
	}
	return strconv.FormatInt(d.site, 10) + "/" + strings.ToLower(d.name)
}

// customFieldValue checks the value of the custom field name of an object of
// objectType, and returns it as netboxtest stores it (nil: unset).
func (s *store) customFieldValue(objectType, name string, raw json.RawMessage) (any, error) {
	cf := s.customFields.get(find(&s.customFields, func(c *customField) bool {
		return c.name == name && slices.Contains(c.objectTypes, objectType)
	}))
	if cf == nil {
		return nil, fmt.Errorf("Unknown field name '%s' in custom field data.", name)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("Invalid value for custom field '%s'", name)
	}
	if v == nil {
		if cf.required {
			return nil, fmt.Errorf("Required field '%s' is missing.", name)
		}
		return nil, nil
	}
	switch cf.typ {
	case "text", "longtext", "url":
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("Invalid value for custom field '%s': Value must be a string.", name)
		}
		if str == "" {
			return nil, nil
		}
		if cf.regex != "" {
			re, err := regexp.Compile(cf.regex)
			if err == nil && !re.MatchString(str) {
				return nil, fmt.Errorf("Invalid value for custom field '%s': Values must match this regex: %s", name, cf.regex)
			}
		}
		return str, nil
	case "integer":
		f, ok := v.(float64)
		if !ok || f != float64(int64(f)) {
			return nil, fmt.Errorf("Invalid value for custom field '%s': Value must be an integer.", name)
		}
		return int64(f), nil
	case "boolean":
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("Invalid value for custom field '%s': Value must be true or false.", name)
		}
		return b, nil
	case "datetime":
		str, _ := v.(string) // not a string: "", which no layout parses
		tm, err := time.Parse(time.RFC3339Nano, str)
		if err != nil {
			tm, err = time.Parse("2006-01-02 15:04:05", str)
		}
		if err != nil {
			return nil, fmt.Errorf("Invalid value for custom field '%s': Date values must be in ISO 8601 format (YYYY-MM-DD HH:MM:SS).", name)
		}
		// Python's isoformat of an aware datetime.
		layout := "2006-01-02T15:04:05-07:00"
		if tm.Nanosecond() != 0 {
			layout = "2006-01-02T15:04:05.000000-07:00"
		}
		return tm.Format(layout), nil
	}
	return nil, fmt.Errorf("netboxtest does not implement custom fields of type %s", cf.typ)
}

var interfaceTypes = []string{"virtual", "other", "1000base-t", "2.5gbase-t", "10gbase-t", "10gbase-x-sfpp"}

func interfaceKind() *kind {
	return kindOf(model[iface]{
		path: pathInterfaces, objectType: typeInterface, def: iface{enabled: true},
		tab: func(s *store) *table[iface] { return &s.interfaces },
		filters: map[string]filterOf[iface]{
			"name":        strFilter(func(_ *store, v *iface) string { return v.name }),
			"device_id":   idFilter(func(_ *store, v *iface) int64 { return v.device }),
			"device":      strFilter(func(s *store, v *iface) string { return s.devices.get(v.device).name }),
			"site_id":     idFilter(func(s *store, v *iface) int64 { return s.devices.get(v.device).site }),
			"device_role": strFilter(func(s *store, v *iface) string { return s.roles.get(s.devices.get(v.device).role).slug }),
			"cabled":      boolFilter(func(_ *store, v *iface) bool { return v.cable != 0 }),
		},
		choices: map[string]func(*store, string) bool{"device_role": slugOf(pathRoles), "device_id": deviceID},
		render:  (*renderer).iface,
		write: func(t *tx, id int64, v *iface, in *input) {
			s := t.s
			in.known("device", "name", "type", "enabled", "mgmt_only", "description", "label", "primary_mac_address")
			required(in, id == 0, "device", "name", "type")
			was := v.device
			related(in, "device", &s.devices, &v.device)
			if id != 0 && v.device != was {
				in.errs.add("device", "netboxtest does not move interfaces between devices.")
			}
			if n, ok := in.str("name", false); ok {
				if n == "" {
					in.errs.add("name", "This field may not be blank.")
				}
				v.name = n
			}
			in.setChoice("type", false, &v.typ, interfaceTypes...)
			in.setBool("enabled", &v.enabled)
			in.setBool("mgmt_only", &v.mgmtOnly)
			in.setStr("description", &v.description)
			in.setStr("label", &v.label)
			if m, ok := in.ref("primary_mac_address", true); ok {
				if m != 0 {
					mac := s.macs.get(m)
					if mac == nil {
						in.errs.add("primary_mac_address", "Related object not found using the provided numeric ID: %d", m)
					} else if mac.iface != id || id == 0 {
						in.errs.add("primary_mac_address", "MAC address %s is not assigned to this interface.", mac.mac)
					}
				}
				v.primaryMAC = m
			}
			for _, oid := range s.ifacesByName[ifaceKey(v)] {
				if oid != id {
					in.errs.add("__all__", "Interface with this Device and Name already exists.")
				}
			}
		},
		saved: func(t *tx, id int64, old, v *iface) {
			if old == nil {
				reindex(t, t.s.ifacesByDevice, id, 0, v.device)
			}
			reindex(t, t.s.ifacesByName, id, ifaceKey(old), ifaceKey(v))
		},
		snapshot: func(_ *store, v *iface) map[string]any {
			return map[string]any{
				"device": v.device, "name": v.name, "type": v.typ, "enabled": v.enabled, "primary_mac_address": orNil(v.primaryMAC), "cable": orNil(v.cable),
				"description": v.description,
			}
		},
		repr: func(v *iface) string { return v.name },
	})
}

// ifaceKey is the ifacesByName key of i (none: ""): NetBox keeps interface
// names unique per device.
func ifaceKey(i *iface) string {
	if i == nil {
		return ""
	}
	return strconv.FormatInt(i.device, 10) + "/" + i.name
}

// assigned reads assigned_object_type and assigned_object_id, which must
// name an interface or nothing. It returns the interface ID (0: none) and
// whether either field was given.
func assigned(s *store, in *input) (int64, bool) {
	typ, typOK := in.str("assigned_object_type", true)
	id, idOK := in.integer("assigned_object_id", true)
	if !typOK && !idOK {
		return 0, false
	}
	if typ == "" && id == 0 {
		return 0, true
	}
	if typ != typeInterface {
		in.errs.add("assigned_object_type", "netboxtest assigns to dcim.interface only, not %q.", typ)
		return 0, true
	}
	if s.interfaces.get(id) == nil {
		in.errs.add("assigned_object_id", "Related object not found using the provided numeric ID: %d", id)
	}
	return id, true
}

func macKind() *kind {
	return kindOf(model[macAddress]{
		path: pathMACs, objectType: "dcim.macaddress",
		tab: func(s *store) *table[macAddress] { return &s.macs },
		filters: assignedFilters(func(v *macAddress) int64 { return v.iface }, map[string]filterOf[macAddress]{
			"mac_address": iStrFilter(func(_ *store, v *macAddress) string { return v.mac }),
		}),
		render: (*renderer).macAddress,
		write: func(t *tx, id int64, v *macAddress, in *input) {
			s := t.s
			in.known("mac_address", "assigned_object_type", "assigned_object_id", "description")
			required(in, id == 0, "mac_address")
			if m, ok := in.str("mac_address", false); ok {
				hw, err := parseMAC(m)
				if err != nil {
					in.errs.add("mac_address", "Invalid MAC address format: %s", m)
				}
				v.mac = hw
			}
			if i, ok := assigned(s, in); ok {
				if old := s.macs.get(id); old != nil && old.iface != i {
					if oi := s.interfaces.get(old.iface); oi != nil && oi.primaryMAC == id {
						in.errs.add("assigned_object", "Cannot unassign MAC Address while it is designated as the primary MAC for an object")
					}
				}
				v.iface = i
			}
			in.setStr("description", &v.description)
		},
		saved: func(t *tx, id int64, old, v *macAddress) {
			reindex(t, t.s.macsByIface, id, cmp.Or(old, &macAddress{}).iface, v.iface)
		},
		snapshot: func(_ *store, v *macAddress) map[string]any {
			return map[string]any{
				"mac_address": v.mac, "description": v.description,
				"assigned_object_type": orNil(ifNonZero(v.iface, typeInterface)), "assigned_object_id": orNil(v.iface),
			}
		},
		repr: func(v *macAddress) string { return v.mac },
	})
}

// assignedFilters adds to filters those of a kind assigned to an
// interface, whose ID iface returns (0: none).
func assignedFilters[T any](iface func(v *T) int64, filters map[string]filterOf[T]) map[string]filterOf[T] {
	filters["assigned_object_type"] = strFilter(func(_ *store, v *T) string { return ifNonZero(iface(v), typeInterface) })
	filters["assigned_object_id"] = idFilter(func(_ *store, v *T) int64 { return iface(v) })
	filters["interface_id"] = filters["assigned_object_id"]
	filters["device_id"] = idFilter(func(s *store, v *T) int64 {
		if i := s.interfaces.get(iface(v)); i != nil {
			return i.device
		}
		return 0
	})
	return filters
}

func ifNonZero(id int64, s string) string {
	if id == 0 {
		return ""
	}
	return s
}

// parseMAC accepts a 48-bit MAC in the usual notations and formats it as
// NetBox answers: upper case, colon separated.
func parseMAC(s string) (string, error) {
	hex := strings.NewReplacer(":", "", "-", "", ".", "").Replace(s)
	if len(hex) != 12 {
		return "", fmt.Errorf("not a MAC")
	}
	var b strings.Builder
	for i := 0; i < 12; i += 2 {
		if _, err := strconv.ParseUint(hex[i:i+2], 16, 8); err != nil {
			return "", fmt.Errorf("not a MAC")
		}
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strings.ToUpper(hex[i : i+2]))
	}
	return b.String(), nil
}

func ipKind() *kind {
	return kindOf(model[ipAddress]{
		path: pathIPs, objectType: "ipam.ipaddress", def: ipAddress{status: "active"},
		tab: func(s *store) *table[ipAddress] { return &s.ips },
		filters: assignedFilters(func(v *ipAddress) int64 { return v.iface }, map[string]filterOf[ipAddress]{
			// NetBox matches address by host, ignoring the prefix length.
			"address": parsed(func(v string) (netip.Addr, error) {
				host, _, _ := strings.Cut(v, "/")
				return netip.ParseAddr(host)
			}, "invalid IP address %q", func(_ *store, v *ipAddress, h netip.Addr) bool { return h == v.address.Addr() }),
			"parent": parsed(netip.ParsePrefix, "invalid prefix %q", func(_ *store, v *ipAddress, p netip.Prefix) bool {
				return p.Masked().Contains(v.address.Addr())
			}),
			"status": strFilter(func(_ *store, v *ipAddress) string { return v.status }),
		}),
		render: (*renderer).ipAddress,
		write:  writeIP,
		saved: func(t *tx, id int64, old, v *ipAddress) {
			old = cmp.Or(old, &ipAddress{})
			reindex(t, t.s.ipsByIface, id, old.iface, v.iface)
			reindex(t, t.s.ipsByHost, id, old.address.Addr(), v.address.Addr())
		},
		snapshot: func(_ *store, v *ipAddress) map[string]any {
			return map[string]any{
				"address": v.address.String(), "status": v.status, "role": orNil(v.role),
				"assigned_object_type": orNil(ifNonZero(v.iface, typeInterface)), "assigned_object_id": orNil(v.iface),
				"dns_name": v.dnsName, "description": v.description,
			}
		},
		repr: func(v *ipAddress) string { return v.address.String() },
	})
}

func writeIP(t *tx, id int64, v *ipAddress, in *input) {
	s := t.s
	in.known("address", "status", "role", "assigned_object_type", "assigned_object_id", "dns_name", "description")
	required(in, id == 0, "address")
	if a, ok := in.str("address", false); ok {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			in.errs.add("address", "Invalid IP address format: %s", a)
		}
		v.address = p
	}
	in.setChoice("status", false, &v.status, "active", "reserved", "deprecated", "dhcp", "slaac")
	in.setChoice("role", true, &v.role, "loopback", "secondary", "anycast", "vip", "vrrp", "hsrp", "glbp", "carp")
	if i, ok := assigned(s, in); ok {
		if old := s.ips.get(id); old != nil && old.iface != i && old.iface != 0 {
			if d := s.devices.get(s.interfaces.get(old.iface).device); d != nil && d.primaryIP4 == id {
				in.errs.add("interface", "Cannot reassign IP address while it is designated as the primary IP for the parent object")
			}
		}
		v.iface = i
	}
	in.setStr("dns_name", &v.dnsName)
	in.setStr("description", &v.description)
	// ENFORCE_GLOBAL_UNIQUE, on by default: one address per host in
	// the global table.
	if v.address.IsValid() {
		for _, oid := range s.ipsByHost[v.address.Addr()] {
			if oid != id {
				in.errs.add("address", "Duplicate IP address found in global table: %s", s.ips.get(oid).address)
				break
			}
		}
	}
}

func cableKind() *kind {
	// endFilter matches a cable with an end e for which of(e) is one of
	// the IDs asked for.
	endFilter := func(of func(s *store, e int64) int64) filterOf[cable] {
		return parsed(parseID, "enter a number: %q", func(s *store, c *cable, id int64) bool {
			return slices.ContainsFunc(append(slices.Clone(c.a), c.b...), func(e int64) bool { return of(s, e) == id })
		})
	}
	k := kindOf(model[cable]{
		path: pathCables, objectType: "dcim.cable", def: cable{status: "connected"},
		tab: func(s *store) *table[cable] { return &s.cables },
		filters: map[string]filterOf[cable]{
			"interface_id": endFilter(func(_ *store, e int64) int64 { return e }),
			"device_id":    endFilter(func(s *store, e int64) int64 { return s.interfaces.get(e).device }),
		},
		render: (*renderer).cable,
		write:  writeCable,
		saved: func(t *tx, id int64, _, v *cable) {
			for end, ids := range map[string][]int64{"A": v.a, "B": v.b} {
				cableEnds(t, ids, id, end)
			}
		},
		snapshot: func(_ *store, v *cable) map[string]any {
			return map[string]any{
				"status": v.status, "label": v.label, "description": v.description,
				"a_terminations": slices.Clone(v.a), "b_terminations": slices.Clone(v.b),
			}
		},
		repr: cableDisplay,
	})
	k.remove = func(t *tx, id int64) {
		c := t.s.cables.get(id)
		cableEnds(t, append(slices.Clone(c.a), c.b...), 0, "")
		remove(t, &t.s.cables, id)
	}
	return k
}

func writeCable(t *tx, id int64, v *cable, in *input) {
	s := t.s
	if id != 0 {
		in.errs.add("detail", "netboxtest does not change cables; delete the cable and create another.")
		return
	}
	in.known("a_terminations", "b_terminations", "status", "type", "label", "description")
	required(in, true, "a_terminations", "b_terminations")
	terms := func(k string) []int64 {
		raw, ok := in.raw[k]
		if !ok {
			return nil
		}
		var list []struct {
			ObjectType string `json:"object_type"`
			ObjectID   int64  `json:"object_id"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			in.errs.add(k, "Expected a list of {object_type, object_id}.")
			return nil
		}
		if len(list) == 0 {
			in.errs.add(k, "Must define A and B terminations when creating a new cable.")
		}
		var ids []int64
		for _, e := range list {
			if e.ObjectType != typeInterface {
				in.errs.add(k, "netboxtest terminates cables on dcim.interface only, not %q.", e.ObjectType)
				continue
			}
			i := s.interfaces.get(e.ObjectID)
			switch {
			case i == nil:
				in.errs.add(k, "Related object not found using the provided numeric ID: %d", e.ObjectID)
			case i.cable != 0:
				in.errs.add(k, "Duplicate termination found for dcim.interface:%d: cable %d", e.ObjectID, i.cable)
			default:
				ids = append(ids, e.ObjectID)
			}
		}
		return ids
	}
	v.a, v.b = terms("a_terminations"), terms("b_terminations")
	for _, a := range v.a {
		if slices.Contains(v.b, a) {
			in.errs.add("b_terminations", "A and B terminations cannot be the same object.")
		}
	}
	in.setChoice("status", false, &v.status, "connected", "planned", "decommissioning")
	in.setChoice("type", true, &v.typ, "cat3", "cat5", "cat5e", "cat6", "cat6a", "cat7", "cat7a", "cat8", "dac-active", "dac-passive", "mrj21-trunk", "coaxial")
	in.setStr("label", &v.label)
	in.setStr("description", &v.description)
}

// cableEnds sets the cable (0: none) and its end on the interfaces ids.
func cableEnds(t *tx, ids []int64, cable int64, end string) {
	for _, e := range ids {
		i := *t.s.interfaces.get(e)
		i.cable, i.cableEnd = cable, end
		stamp(t, &i.meta, false)
		put(t, &t.s.interfaces, e, &i)
	}
}

var customFieldTypes = []string{"text", "longtext", "integer", "boolean", "datetime", "url"}

var cfNameRE = regexp.MustCompile(`^[a-z0-9_]+$`)

func customFieldKind() *kind {
	return kindOf(model[customField]{
		path: pathCustomFields, objectType: "extras.customfield",
		def: customField{typ: "text", filterLogic: "loose", uiVisible: "always", uiEditable: "yes", weight: 100, searchWeight: 1000},
		tab: func(s *store) *table[customField] { return &s.customFields },
		filters: map[string]filterOf[customField]{
			"name": strFilter(func(_ *store, v *customField) string { return v.name }),
			"type": strFilter(func(_ *store, v *customField) string { return v.typ }),
			"object_type": func(_ *store, v *customField, vals []string) (bool, error) {
				return slices.ContainsFunc(vals, func(x string) bool { return slices.Contains(v.objectTypes, x) }), nil
			},
		},
		render: (*renderer).customField,
		write: func(t *tx, id int64, v *customField, in *input) {
			in.known("name", "type", "object_types", "label", "description", "group_name", "required", "validation_regex",
				"filter_logic", "ui_visible", "ui_editable", "weight", "search_weight")
			required(in, id == 0, "name", "object_types")
			if n, ok := in.str("name", false); ok {
				if !cfNameRE.MatchString(n) {
					in.errs.add("name", "Only alphanumeric characters and underscores are allowed.")
				}
				v.name = n
			}
			if ty, ok := in.choice("type", false, "text", "longtext", "integer", "decimal", "boolean", "date", "datetime", "url", "json", "select", "multiselect", "object", "multiobject"); ok {
				if ty != "" && !slices.Contains(customFieldTypes, ty) {
					in.errs.add("type", "netboxtest does not implement custom fields of type %s.", ty)
				}
				v.typ = ty
			}
			if raw, ok := in.raw["object_types"]; ok {
				var ots []string
				if err := json.Unmarshal(raw, &ots); err != nil || len(ots) == 0 {
					in.errs.add("object_types", "This list may not be empty.")
				}
				for _, ot := range ots {
					if _, ok := objectTypes[ot]; !ok {
						in.errs.add("object_types", "Invalid object type: %s", ot)
					}
				}
				v.objectTypes = ots
			}
			for k, dst := range map[string]*string{"label": &v.label, "description": &v.description, "group_name": &v.groupName} {
				in.setStr(k, dst)
			}
			in.setBool("required", &v.required)
			if r, ok := in.str("validation_regex", false); ok {
				if _, err := regexp.Compile(r); err != nil {
					in.errs.add("validation_regex", "Invalid regular expression.")
				}
				v.regex = r
			}
			in.setChoice("filter_logic", false, &v.filterLogic, "disabled", "loose", "exact")
			in.setChoice("ui_visible", false, &v.uiVisible, "always", "if-set", "hidden")
			in.setChoice("ui_editable", false, &v.uiEditable, "yes", "no", "hidden")
			if w, ok := in.integer("weight", false); ok {
				v.weight = w
			}
			if w, ok := in.integer("search_weight", false); ok {
				v.searchWeight = w
			}
			if find(&t.s.customFields, func(o *customField) bool { return o.id != id && o.name == v.name }) != 0 {
				in.errs.add("name", "custom field with this name already exists.")
			}
		},
		snapshot: func(_ *store, v *customField) map[string]any {
			return map[string]any{
				"name": v.name, "type": v.typ, "object_types": slices.Clone(v.objectTypes), "label": v.label, "description": v.description,
				"required": v.required, "validation_regex": v.regex, "filter_logic": v.filterLogic,
			}
		},
		repr: func(v *customField) string { return v.name },
	})
}

// objectTypes are the object types netboxtest knows, for custom fields and
// journal entries.
var objectTypes = map[string]bool{
	"dcim.device": true, "dcim.interface": true, "dcim.site": true, "dcim.devicetype": true,
	"dcim.manufacturer": true, "dcim.devicerole": true, "dcim.macaddress": true, "dcim.cable": true,
	"ipam.ipaddress": true,
}

var journalKinds = []string{"info", "success", "warning", "danger"}

func journalKind() *kind {
	return kindOf(model[journalEntry]{
		path: pathJournal, objectType: "extras.journalentry",
		tab: func(s *store) *table[journalEntry] { return &s.journal },
		filters: map[string]filterOf[journalEntry]{
			"assigned_object_type": strFilter(func(_ *store, v *journalEntry) string { return v.objectType }),
			"assigned_object_id":   idFilter(func(_ *store, v *journalEntry) int64 { return v.objectID }),
			"kind":                 strFilter(func(_ *store, v *journalEntry) string { return v.kind }),
			// NetBox's search of journal entries: comments__icontains.
			"q": func(_ *store, v *journalEntry, vals []string) (bool, error) {
				c := strings.ToLower(v.comments)
				return slices.ContainsFunc(vals, func(x string) bool { return strings.Contains(c, strings.ToLower(x)) }), nil
			},
		},
		render: (*renderer).journalEntry,
		write: func(t *tx, id int64, v *journalEntry, in *input) {
			if id == 0 {
				v.kind, v.createdBy = "info", t.user.id
			}
			in.known("assigned_object_type", "assigned_object_id", "kind", "comments")
			required(in, id == 0, "assigned_object_type", "assigned_object_id", "comments")
			if ot, ok := in.str("assigned_object_type", false); ok {
				if ot != "dcim.device" {
					in.errs.add("assigned_object_type", "netboxtest journals on dcim.device only, not %q.", ot)
				}
				v.objectType = ot
			}
			if oid, ok := in.integer("assigned_object_id", false); ok {
				if t.s.devices.get(oid) == nil {
					in.errs.add("assigned_object_id", "Related object not found using the provided numeric ID: %d", oid)
				}
				v.objectID = oid
			}
			in.setChoice("kind", false, &v.kind, journalKinds...)
			if c, ok := in.str("comments", false); ok {
				if strings.TrimSpace(c) == "" {
					in.errs.add("comments", "This field may not be blank.")
				}
				v.comments = c
			}
		},
		snapshot: func(_ *store, v *journalEntry) map[string]any {
			return map[string]any{"assigned_object_type": v.objectType, "assigned_object_id": v.objectID, "kind": v.kind, "comments": v.comments}
		},
		repr: func(v *journalEntry) string { return timeString(v.created) },
	})
}

func changeKind() *kind {
	timeFilter := func(after bool) filterOf[objectChange] {
		parse := func(v string) (time.Time, error) { return time.Parse(time.RFC3339Nano, v) }
		return parsed(parse, "enter a valid date/time: %q", func(_ *store, c *objectChange, tm time.Time) bool {
			return after && !c.created.Before(tm) || !after && !c.created.After(tm)
		})
	}
	return kindOf(model[objectChange]{
		path: pathChanges, objectType: "core.objectchange",
		tab: func(s *store) *table[objectChange] { return &s.changes },
		filters: map[string]filterOf[objectChange]{
			"changed_object_type": strFilter(func(_ *store, c *objectChange) string { return c.objectType }),
			"changed_object_id":   idFilter(func(_ *store, c *objectChange) int64 { return c.objectID }),
			"user_name":           strFilter(func(_ *store, c *objectChange) string { return c.userName }),
			"user_id":             idFilter(func(_ *store, c *objectChange) int64 { return c.user }),
			"request_id":          strFilter(func(_ *store, c *objectChange) string { return c.requestID }),
			"action":              strFilter(func(_ *store, c *objectChange) string { return c.action }),
			"time_after":          timeFilter(true),
			"time_before":         timeFilter(false),
		},
		render: (*renderer).objectChange,
		order: func(s *store, ids []int64, ordering string) error {
			switch ordering {
			case "", "-time", "-id":
				slices.Reverse(ids) // IDs and times rise together
			case "time", "id":
			default:
				return fmt.Errorf("netboxtest orders object changes by time or id, not %q", ordering)
			}
			return nil
		},
	})
}
