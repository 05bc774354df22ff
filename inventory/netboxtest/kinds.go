package netboxtest

import (
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
	remove   func(t *tx, id int64) error
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

// Choice checks for filters naming related objects by slug.
func roleSlug(s *store, v string) bool {
	return find(s.roles, func(r *role) bool { return r.slug == v }) != 0
}

func siteSlug(s *store, v string) bool {
	return find(s.sites, func(x *site) bool { return x.slug == v }) != 0
}

func deviceID(s *store, v string) bool {
	id, err := strconv.ParseInt(v, 10, 64)
	return err == nil && s.devices.get(id) != nil
}

func manufacturerSlug(s *store, v string) bool {
	return find(s.manufacturers, func(m *manufacturer) bool { return m.slug == v }) != 0
}

// Filters built from a field's value.

func parseIDs(vals []string) ([]int64, error) {
	out := make([]int64, 0, len(vals))
	for _, v := range vals {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("enter a number: %q", v)
		}
		out = append(out, n)
	}
	return out, nil
}

func idFilter(get func(s *store, id int64) int64) filter {
	return func(s *store, id int64, vals []string) (bool, error) {
		ids, err := parseIDs(vals)
		if err != nil {
			return false, err
		}
		return slices.Contains(ids, get(s, id)), nil
	}
}

func strFilter(get func(s *store, id int64) string) filter {
	return func(s *store, id int64, vals []string) (bool, error) {
		v := get(s, id)
		return slices.Contains(vals, v), nil
	}
}

// iStrFilter matches in any case, as NetBox matches device serials and MAC
// addresses.
func iStrFilter(get func(s *store, id int64) string) filter {
	return func(s *store, id int64, vals []string) (bool, error) {
		v := get(s, id)
		return slices.ContainsFunc(vals, func(x string) bool { return strings.EqualFold(x, v) }), nil
	}
}

func boolFilter(get func(s *store, id int64) bool) filter {
	return func(s *store, id int64, vals []string) (bool, error) {
		for _, v := range vals {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return false, fmt.Errorf("%q is not true or false", v)
			}
			if get(s, id) == b {
				return true, nil
			}
		}
		return false, nil
	}
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

// current returns a copy of tab's object id to change, or def to create
// when there is none.
func current[T any](tab *table[T], id int64, def T) T {
	if old := tab.get(id); old != nil {
		return *old
	}
	return def
}

// save stores v, whose meta is m, under id in tab (0 creates it), stamped
// now, unless in holds errors; it returns v's ID.
func save[T any](t *tx, tab *table[T], id int64, v *T, m *meta, in *input) (int64, error) {
	if err := in.err(); err != nil {
		return 0, err
	}
	stamp(t, m, id == 0)
	m.id = put(t, tab, id, v)
	return m.id, nil
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

func metaSnapshot(m meta) map[string]any {
	return map[string]any{"created": timeString(m.created), "last_updated": timeString(m.updated)}
}

// namedFilters are the name and slug filters of an organizational kind.
func namedFilters(get func(s *store, id int64) *named) map[string]filter {
	return map[string]filter{
		"name": strFilter(func(s *store, id int64) string { return get(s, id).name }),
		"slug": strFilter(func(s *store, id int64) string { return get(s, id).slug }),
	}
}

// read takes name, slug and description from in; name and slug are
// required when the object is created.
func (v *named) read(in *input, create bool) {
	required(in, create, "name", "slug")
	in.setStr("name", &v.name)
	in.setSlug(&v.slug)
	in.setStr("description", &v.description)
}

// unique refuses a name or slug that another object of tab holds, in
// NetBox's words ("<noun> with this name already exists.").
func unique[T any](in *input, tab *table[T], id int64, v *named, noun string, get func(*T) *named) {
	tab.all(func(oid int64, o *T) bool {
		n := get(o)
		if oid != id && strings.EqualFold(n.name, v.name) {
			in.errs.add("name", "%s with this name already exists.", noun)
		}
		if oid != id && n.slug == v.slug {
			in.errs.add("slug", "%s with this slug already exists.", noun)
		}
		return true
	})
}

// snapshot puts v's fields in a changelog snapshot.
func (v named) snapshot(m map[string]any) map[string]any {
	m["name"], m["slug"], m["description"] = v.name, v.slug, v.description
	return m
}

// hexColor is the form of a role's color.
var hexColor = regexp.MustCompile(`^[0-9a-f]{6}$`)

func siteKind() *kind {
	return &kind{
		path: pathSites, objectType: "dcim.site",
		rows:    func(s *store) rows { return s.sites },
		filters: namedFilters(func(s *store, id int64) *named { return &s.sites.get(id).named }),
		render:  (*renderer).site,
		write: func(t *tx, id int64, in *input) (int64, error) {
			v := current(t.s.sites, id, site{status: "active"})
			in.known("name", "slug", "status", "description")
			v.read(in, id == 0)
			in.setChoice("status", false, &v.status, "planned", "staging", "active", "decommissioning", "retired")
			unique(in, t.s.sites, id, &v.named, "site", func(o *site) *named { return &o.named })
			return save(t, t.s.sites, id, &v, &v.meta, in)
		},
		snapshot: func(s *store, id int64) map[string]any {
			v := s.sites.get(id)
			m := v.named.snapshot(metaSnapshot(v.meta))
			m["status"] = v.status
			return m
		},
		repr: func(s *store, id int64) string { return s.sites.get(id).name },
	}
}

func manufacturerKind() *kind {
	return &kind{
		path: pathManufacturers, objectType: "dcim.manufacturer",
		rows:    func(s *store) rows { return s.manufacturers },
		filters: namedFilters(func(s *store, id int64) *named { return &s.manufacturers.get(id).named }),
		render:  (*renderer).manufacturer,
		write: func(t *tx, id int64, in *input) (int64, error) {
			v := current(t.s.manufacturers, id, manufacturer{})
			in.known("name", "slug", "description")
			v.read(in, id == 0)
			unique(in, t.s.manufacturers, id, &v.named, "manufacturer", func(o *manufacturer) *named { return &o.named })
			return save(t, t.s.manufacturers, id, &v, &v.meta, in)
		},
		snapshot: func(s *store, id int64) map[string]any {
			v := s.manufacturers.get(id)
			return v.named.snapshot(metaSnapshot(v.meta))
		},
		repr: func(s *store, id int64) string { return s.manufacturers.get(id).name },
	}
}

func deviceTypeKind() *kind {
	return &kind{
		path: pathDeviceTypes, objectType: "dcim.devicetype",
		rows: func(s *store) rows { return s.deviceTypes },
		filters: map[string]filter{
			"slug":            strFilter(func(s *store, id int64) string { return s.deviceTypes.get(id).slug }),
			"model":           strFilter(func(s *store, id int64) string { return s.deviceTypes.get(id).model }),
			"manufacturer_id": idFilter(func(s *store, id int64) int64 { return s.deviceTypes.get(id).manufacturer }),
			"manufacturer": strFilter(func(s *store, id int64) string {
				return s.manufacturers.get(s.deviceTypes.get(id).manufacturer).slug
			}),
		},
		choices: map[string]func(*store, string) bool{"manufacturer": manufacturerSlug},
		render:  (*renderer).deviceType,
		write: func(t *tx, id int64, in *input) (int64, error) {
			v := current(t.s.deviceTypes, id, deviceType{})
			in.known("manufacturer", "model", "slug", "part_number", "description", "u_height", "is_full_depth")
			required(in, id == 0, "manufacturer", "model", "slug")
			related(in, "manufacturer", t.s.manufacturers, &v.manufacturer)
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
			if find(t.s.deviceTypes, func(o *deviceType) bool {
				return o.id != id && o.manufacturer == v.manufacturer && strings.EqualFold(o.model, v.model)
			}) != 0 {
				in.errs.add("__all__", "Device type with this Manufacturer and Model already exists.")
			}
			if find(t.s.deviceTypes, func(o *deviceType) bool { return o.id != id && o.manufacturer == v.manufacturer && o.slug == v.slug }) != 0 {
				in.errs.add("__all__", "Device type with this Manufacturer and Slug already exists.")
			}
			return save(t, t.s.deviceTypes, id, &v, &v.meta, in)
		},
		snapshot: func(s *store, id int64) map[string]any {
			v := s.deviceTypes.get(id)
			m := metaSnapshot(v.meta)
			m["manufacturer"], m["model"], m["slug"], m["part_number"], m["description"] = v.manufacturer, v.model, v.slug, v.partNumber, v.description
			return m
		},
		repr: func(s *store, id int64) string { return s.deviceTypes.get(id).model },
	}
}

func roleKind() *kind {
	return &kind{
		path: pathRoles, objectType: "dcim.devicerole",
		rows:    func(s *store) rows { return s.roles },
		filters: namedFilters(func(s *store, id int64) *named { return &s.roles.get(id).named }),
		render:  (*renderer).role,
		write: func(t *tx, id int64, in *input) (int64, error) {
			v := current(t.s.roles, id, role{color: "9e9e9e"})
			in.known("name", "slug", "color", "description", "vm_role")
			v.read(in, id == 0)
			if s, ok := in.str("color", false); ok {
				if !hexColor.MatchString(s) {
					in.errs.add("color", "Enter a valid hexadecimal RGB color code.")
				}
				v.color = s
			}
			in.boolean("vm_role")
			unique(in, t.s.roles, id, &v.named, "device role", func(o *role) *named { return &o.named })
			return save(t, t.s.roles, id, &v, &v.meta, in)
		},
		snapshot: func(s *store, id int64) map[string]any {
			v := s.roles.get(id)
			m := v.named.snapshot(metaSnapshot(v.meta))
			m["color"] = v.color
			return m
		},
		repr: func(s *store, id int64) string { return s.roles.get(id).name },
	}
}

var deviceStatuses = []string{"offline", "active", "planned", "staged", "failed", "inventory", "decommissioning"}

func deviceKind() *kind {
	dev := func(s *store, id int64) *device { return s.devices.get(id) }
	return &kind{
		path: pathDevices, objectType: "dcim.device",
		rows: func(s *store) rows { return s.devices },
		filters: map[string]filter{
			"name":           strFilter(func(s *store, id int64) string { return dev(s, id).name }),
			"serial":         iStrFilter(func(s *store, id int64) string { return dev(s, id).serial }), // iexact, as in NetBox
			"status":         strFilter(func(s *store, id int64) string { return dev(s, id).status }),
			"role_id":        idFilter(func(s *store, id int64) int64 { return dev(s, id).role }),
			"role":           strFilter(func(s *store, id int64) string { return s.roles.get(dev(s, id).role).slug }),
			"site_id":        idFilter(func(s *store, id int64) int64 { return dev(s, id).site }),
			"site":           strFilter(func(s *store, id int64) string { return s.sites.get(dev(s, id).site).slug }),
			"device_type_id": idFilter(func(s *store, id int64) int64 { return dev(s, id).deviceType }),
		},
		choices: map[string]func(*store, string) bool{"role": roleSlug, "site": siteSlug},
		render:  (*renderer).device,
		write:   writeDevice,
		snapshot: func(s *store, id int64) map[string]any {
			v := s.devices.get(id)
			m := metaSnapshot(v.meta)
			m["name"], m["device_type"], m["role"], m["site"], m["serial"], m["status"] = orNil(v.name), v.deviceType, v.role, v.site, v.serial, v.status
			m["primary_ip4"], m["description"], m["comments"] = orNil(v.primaryIP4), v.description, v.comments
			m["custom_fields"] = (&renderer{s: s}).customFieldsOf("dcim.device", v.customFields)
			return m
		},
		repr: func(s *store, id int64) string { return deviceDisplay(s.devices.get(id)) },
	}
}

func writeDevice(t *tx, id int64, in *input) (int64, error) {
	s := t.s
	v := current(s.devices, id, device{status: "active"})
	in.known("name", "device_type", "role", "site", "serial", "status", "primary_ip4", "description", "comments", "custom_fields")
	required(in, id == 0, "device_type", "role", "site")
	if n, ok := in.str("name", true); ok {
		if len(n) > 64 {
			in.errs.add("name", "Ensure this field has no more than 64 characters.")
		}
		v.name = n
	}
	related(in, "device_type", s.deviceTypes, &v.deviceType)
	related(in, "role", s.roles, &v.role)
	related(in, "site", s.sites, &v.site)
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
	for _, oid := range s.devicesByName[nameKey(&v)] {
		if oid != id {
			in.errs.add("__all__", "Device name must be unique per site.")
			break
		}
	}
	var fromKey string
	if old := s.devices.get(id); old != nil {
		fromKey = nameKey(old)
	}
	nid, err := save(t, s.devices, id, &v, &v.meta, in)
	if err == nil {
		reindex(t, s.devicesByName, nid, fromKey, nameKey(&v))
	}
	return nid, err
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
// per site, in any case; unnamed devices are not indexed.
func nameKey(d *device) string {
	if d.name == "" {
		return ""
	}
	return strconv.FormatInt(d.site, 10) + "/" + strings.ToLower(d.name)
}

// customFieldValue checks the value of the custom field name of an object of
// objectType, and returns it as netboxtest stores it (nil: unset).
func (s *store) customFieldValue(objectType, name string, raw json.RawMessage) (any, error) {
	var cf *customField
	s.customFields.all(func(_ int64, c *customField) bool {
		if c.name == name && slices.Contains(c.objectTypes, objectType) {
			cf = c
			return false
		}
		return true
	})
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
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("Invalid value for custom field '%s': Date values must be in ISO 8601 format (YYYY-MM-DD HH:MM:SS).", name)
		}
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
	ifc := func(s *store, id int64) *iface { return s.interfaces.get(id) }
	return &kind{
		path: pathInterfaces, objectType: typeInterface,
		rows: func(s *store) rows { return s.interfaces },
		filters: map[string]filter{
			"name":        strFilter(func(s *store, id int64) string { return ifc(s, id).name }),
			"device_id":   idFilter(func(s *store, id int64) int64 { return ifc(s, id).device }),
			"device":      strFilter(func(s *store, id int64) string { return s.devices.get(ifc(s, id).device).name }),
			"site_id":     idFilter(func(s *store, id int64) int64 { return s.devices.get(ifc(s, id).device).site }),
			"device_role": strFilter(func(s *store, id int64) string { return s.roles.get(s.devices.get(ifc(s, id).device).role).slug }),
			"cabled":      boolFilter(func(s *store, id int64) bool { return ifc(s, id).cable != 0 }),
		},
		choices: map[string]func(*store, string) bool{"device_role": roleSlug, "device_id": deviceID},
		render:  (*renderer).iface,
		write: func(t *tx, id int64, in *input) (int64, error) {
			s := t.s
			v := current(s.interfaces, id, iface{enabled: true})
			in.known("device", "name", "type", "enabled", "mgmt_only", "description", "label", "primary_mac_address")
			required(in, id == 0, "device", "name", "type")
			was := v.device
			related(in, "device", s.devices, &v.device)
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
			key := strconv.FormatInt(v.device, 10) + "/" + v.name
			for _, oid := range s.ifacesByName[key] {
				if oid != id {
					in.errs.add("__all__", "Interface with this Device and Name already exists.")
				}
			}
			var fromKey string
			if old := s.interfaces.get(id); old != nil {
				fromKey = strconv.FormatInt(old.device, 10) + "/" + old.name
			}
			nid, err := save(t, s.interfaces, id, &v, &v.meta, in)
			if err != nil {
				return 0, err
			}
			if id == 0 {
				reindex(t, s.ifacesByDevice, nid, 0, v.device)
			}
			reindex(t, s.ifacesByName, nid, fromKey, key)
			return nid, nil
		},
		snapshot: func(s *store, id int64) map[string]any {
			v := s.interfaces.get(id)
			m := metaSnapshot(v.meta)
			m["device"], m["name"], m["type"], m["enabled"], m["primary_mac_address"], m["cable"] = v.device, v.name, v.typ, v.enabled, orNil(v.primaryMAC), orNil(v.cable)
			m["description"] = v.description
			return m
		},
		repr: func(s *store, id int64) string { return s.interfaces.get(id).name },
	}
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
	mac := func(s *store, id int64) *macAddress { return s.macs.get(id) }
	return &kind{
		path: pathMACs, objectType: "dcim.macaddress",
		rows: func(s *store) rows { return s.macs },
		filters: assignedFilters(func(s *store, id int64) int64 { return mac(s, id).iface }, map[string]filter{
			"mac_address": iStrFilter(func(s *store, id int64) string { return mac(s, id).mac }),
		}),
		render: (*renderer).macAddress,
		write: func(t *tx, id int64, in *input) (int64, error) {
			s := t.s
			old := s.macs.get(id)
			v := current(s.macs, id, macAddress{})
			from := v.iface
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
				if old != nil && old.iface != i {
					if oi := s.interfaces.get(old.iface); oi != nil && oi.primaryMAC == id {
						in.errs.add("assigned_object", "Cannot unassign MAC Address while it is designated as the primary MAC for an object")
					}
				}
				v.iface = i
			}
			in.setStr("description", &v.description)
			nid, err := save(t, s.macs, id, &v, &v.meta, in)
			if err == nil {
				reindex(t, s.macsByIface, nid, from, v.iface)
			}
			return nid, err
		},
		snapshot: func(s *store, id int64) map[string]any {
			v := s.macs.get(id)
			m := metaSnapshot(v.meta)
			m["mac_address"], m["description"] = v.mac, v.description
			m["assigned_object_type"], m["assigned_object_id"] = orNil(ifNonZero(v.iface, typeInterface)), orNil(v.iface)
			return m
		},
		repr: func(s *store, id int64) string { return s.macs.get(id).mac },
	}
}

// assignedFilters adds to filters those of a kind assigned to an
// interface, whose ID iface returns (0: none).
func assignedFilters(iface func(s *store, id int64) int64, filters map[string]filter) map[string]filter {
	filters["assigned_object_type"] = strFilter(func(s *store, id int64) string { return ifNonZero(iface(s, id), typeInterface) })
	filters["assigned_object_id"] = idFilter(iface)
	filters["interface_id"] = idFilter(iface)
	filters["device_id"] = idFilter(func(s *store, id int64) int64 {
		if i := s.interfaces.get(iface(s, id)); i != nil {
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
	ip := func(s *store, id int64) *ipAddress { return s.ips.get(id) }
	return &kind{
		path: pathIPs, objectType: "ipam.ipaddress",
		rows: func(s *store) rows { return s.ips },
		filters: assignedFilters(func(s *store, id int64) int64 { return ip(s, id).iface }, map[string]filter{
			// NetBox matches address by host, ignoring the prefix length.
			"address": func(s *store, id int64, vals []string) (bool, error) {
				a := ip(s, id).address.Addr()
				for _, v := range vals {
					host, _, _ := strings.Cut(v, "/")
					h, err := netip.ParseAddr(host)
					if err != nil {
						return false, fmt.Errorf("invalid IP address %q", v)
					}
					if h == a {
						return true, nil
					}
				}
				return false, nil
			},
			"parent": func(s *store, id int64, vals []string) (bool, error) {
				a := ip(s, id).address.Addr()
				for _, v := range vals {
					p, err := netip.ParsePrefix(v)
					if err != nil {
						return false, fmt.Errorf("invalid prefix %q", v)
					}
					if p.Masked().Contains(a) {
						return true, nil
					}
				}
				return false, nil
			},
			"status": strFilter(func(s *store, id int64) string { return ip(s, id).status }),
		}),
		render: (*renderer).ipAddress,
		write:  writeIP,
		snapshot: func(s *store, id int64) map[string]any {
			v := s.ips.get(id)
			m := metaSnapshot(v.meta)
			m["address"], m["status"], m["role"] = v.address.String(), v.status, orNil(v.role)
			m["assigned_object_type"], m["assigned_object_id"] = orNil(ifNonZero(v.iface, typeInterface)), orNil(v.iface)
			m["dns_name"], m["description"] = v.dnsName, v.description
			return m
		},
		repr: func(s *store, id int64) string { return s.ips.get(id).address.String() },
	}
}

func writeIP(t *tx, id int64, in *input) (int64, error) {
	s := t.s
	old := s.ips.get(id)
	v := current(s.ips, id, ipAddress{status: "active"})
	from, fromHost := v.iface, v.address.Addr()
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
		if old != nil && old.iface != i && old.iface != 0 {
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
	nid, err := save(t, s.ips, id, &v, &v.meta, in)
	if err == nil {
		reindex(t, s.ipsByIface, nid, from, v.iface)
		reindex(t, s.ipsByHost, nid, fromHost, v.address.Addr())
	}
	return nid, err
}

func cableKind() *kind {
	// endFilter matches a cable with an end e for which of(e) is one of
	// the IDs asked for.
	endFilter := func(of func(s *store, e int64) int64) filter {
		return func(s *store, id int64, vals []string) (bool, error) {
			ids, err := parseIDs(vals)
			if err != nil {
				return false, err
			}
			c := s.cables.get(id)
			return slices.ContainsFunc(append(slices.Clone(c.a), c.b...), func(e int64) bool { return slices.Contains(ids, of(s, e)) }), nil
		}
	}
	return &kind{
		path: pathCables, objectType: "dcim.cable",
		rows: func(s *store) rows { return s.cables },
		filters: map[string]filter{
			"interface_id": endFilter(func(_ *store, e int64) int64 { return e }),
			"device_id":    endFilter(func(s *store, e int64) int64 { return s.interfaces.get(e).device }),
		},
		render: (*renderer).cable,
		write:  writeCable,
		remove: func(t *tx, id int64) error {
			c := t.s.cables.get(id)
			cableEnds(t, append(slices.Clone(c.a), c.b...), 0, "")
			remove(t, t.s.cables, id)
			return nil
		},
		snapshot: func(s *store, id int64) map[string]any {
			v := s.cables.get(id)
			m := metaSnapshot(v.meta)
			m["status"], m["label"], m["description"] = v.status, v.label, v.description
			m["a_terminations"], m["b_terminations"] = slices.Clone(v.a), slices.Clone(v.b)
			return m
		},
		repr: func(s *store, id int64) string { return cableDisplay(s.cables.get(id)) },
	}
}

func writeCable(t *tx, id int64, in *input) (int64, error) {
	s := t.s
	if id != 0 {
		return 0, fieldErrors{"detail": {"netboxtest does not change cables; delete the cable and create another."}}
	}
	v := cable{status: "connected"}
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
	nid, err := save(t, s.cables, 0, &v, &v.meta, in)
	if err != nil {
		return 0, err
	}
	for end, ids := range map[string][]int64{"A": v.a, "B": v.b} {
		cableEnds(t, ids, nid, end)
	}
	return nid, nil
}

// cableEnds sets the cable (0: none) and its end on the interfaces ids.
func cableEnds(t *tx, ids []int64, cable int64, end string) {
	for _, e := range ids {
		i := *t.s.interfaces.get(e)
		i.cable, i.cableEnd = cable, end
		stamp(t, &i.meta, false)
		put(t, t.s.interfaces, e, &i)
	}
}

var customFieldTypes = []string{"text", "longtext", "integer", "boolean", "datetime", "url"}

var cfNameRE = regexp.MustCompile(`^[a-z0-9_]+$`)

func customFieldKind() *kind {
	cf := func(s *store, id int64) *customField { return s.customFields.get(id) }
	return &kind{
		path: pathCustomFields, objectType: "extras.customfield",
		rows: func(s *store) rows { return s.customFields },
		filters: map[string]filter{
			"name": strFilter(func(s *store, id int64) string { return cf(s, id).name }),
			"type": strFilter(func(s *store, id int64) string { return cf(s, id).typ }),
			"object_type": func(s *store, id int64, vals []string) (bool, error) {
				return slices.ContainsFunc(vals, func(v string) bool { return slices.Contains(cf(s, id).objectTypes, v) }), nil
			},
		},
		render: (*renderer).customField,
		write: func(t *tx, id int64, in *input) (int64, error) {
			s := t.s
			v := current(s.customFields, id, customField{typ: "text", filterLogic: "loose", uiVisible: "always", uiEditable: "yes", weight: 100, searchWeight: 1000})
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
			if find(s.customFields, func(o *customField) bool { return o.id != id && o.name == v.name }) != 0 {
				in.errs.add("name", "custom field with this name already exists.")
			}
			return save(t, s.customFields, id, &v, &v.meta, in)
		},
		snapshot: func(s *store, id int64) map[string]any {
			v := s.customFields.get(id)
			m := metaSnapshot(v.meta)
			m["name"], m["type"], m["object_types"], m["label"], m["description"] = v.name, v.typ, slices.Clone(v.objectTypes), v.label, v.description
			m["required"], m["validation_regex"], m["filter_logic"] = v.required, v.regex, v.filterLogic
			return m
		},
		repr: func(s *store, id int64) string { return s.customFields.get(id).name },
	}
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
	j := func(s *store, id int64) *journalEntry { return s.journal.get(id) }
	return &kind{
		path: pathJournal, objectType: "extras.journalentry",
		rows: func(s *store) rows { return s.journal },
		filters: map[string]filter{
			"assigned_object_type": strFilter(func(s *store, id int64) string { return j(s, id).objectType }),
			"assigned_object_id":   idFilter(func(s *store, id int64) int64 { return j(s, id).objectID }),
			"kind":                 strFilter(func(s *store, id int64) string { return j(s, id).kind }),
			// NetBox's search of journal entries: comments__icontains.
			"q": func(s *store, id int64, vals []string) (bool, error) {
				c := strings.ToLower(j(s, id).comments)
				return slices.ContainsFunc(vals, func(x string) bool { return strings.Contains(c, strings.ToLower(x)) }), nil
			},
		},
		render: (*renderer).journalEntry,
		write: func(t *tx, id int64, in *input) (int64, error) {
			s := t.s
			v := current(s.journal, id, journalEntry{kind: "info", createdBy: t.user.id})
			in.known("assigned_object_type", "assigned_object_id", "kind", "comments")
			required(in, id == 0, "assigned_object_type", "assigned_object_id", "comments")
			if ot, ok := in.str("assigned_object_type", false); ok {
				if ot != "dcim.device" {
					in.errs.add("assigned_object_type", "netboxtest journals on dcim.device only, not %q.", ot)
				}
				v.objectType = ot
			}
			if oid, ok := in.integer("assigned_object_id", false); ok {
				if s.devices.get(oid) == nil {
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
			return save(t, s.journal, id, &v, &v.meta, in)
		},
		snapshot: func(s *store, id int64) map[string]any {
			v := s.journal.get(id)
			m := metaSnapshot(v.meta)
			m["assigned_object_type"], m["assigned_object_id"], m["kind"], m["comments"] = v.objectType, v.objectID, v.kind, v.comments
			return m
		},
		repr: func(s *store, id int64) string { return timeString(s.journal.get(id).created) },
	}
}

func changeKind() *kind {
	c := func(s *store, id int64) *objectChange { return s.changes.get(id) }
	timeFilter := func(after bool) filter {
		return func(s *store, id int64, vals []string) (bool, error) {
			for _, v := range vals {
				tm, err := time.Parse(time.RFC3339Nano, v)
				if err != nil {
					return false, fmt.Errorf("enter a valid date/time: %q", v)
				}
				ct := c(s, id).time
				if after && !ct.Before(tm) || !after && !ct.After(tm) {
					return true, nil
				}
			}
			return false, nil
		}
	}
	return &kind{
		path: pathChanges, objectType: "core.objectchange",
		rows: func(s *store) rows { return s.changes },
		filters: map[string]filter{
			"changed_object_type": strFilter(func(s *store, id int64) string { return c(s, id).objectType }),
			"changed_object_id":   idFilter(func(s *store, id int64) int64 { return c(s, id).objectID }),
			"user_name":           strFilter(func(s *store, id int64) string { return c(s, id).userName }),
			"user_id":             idFilter(func(s *store, id int64) int64 { return c(s, id).user }),
			"request_id":          strFilter(func(s *store, id int64) string { return c(s, id).requestID }),
			"action":              strFilter(func(s *store, id int64) string { return c(s, id).action }),
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
	}
}
