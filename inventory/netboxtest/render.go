package netboxtest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The representations NetBox 4.3 answers, field for field as its schema
// requires. null marks what NetBox answers null for the objects netboxtest
// holds.

type choice struct {
	Value any    `json:"value"`
	Label string `json:"label"`
}

// brief is what every brief form begins with.
type brief struct {
	ID      int64  `json:"id"`
	URL     string `json:"url"`
	Display string `json:"display"`
}

// briefNamed is the brief form of a site or a manufacturer, and a role's
// but for its depth.
type briefNamed struct {
	brief
	Name        string `json:"name"`
	Slug        string `json:"slug"`
	Description string `json:"description"`
}

type briefDeviceType struct {
	brief
	Manufacturer briefNamed `json:"manufacturer"`
	Model        string     `json:"model"`
	Slug         string     `json:"slug"`
	Description  string     `json:"description"`
}

type briefRole struct {
	briefNamed
	Depth int `json:"_depth"`
}

type briefIP struct {
	brief
	Family      choice `json:"family"`
	Address     string `json:"address"`
	Description string `json:"description"`
}

type briefDevice struct {
	brief
	Name        *string `json:"name"`
	Description string  `json:"description"`
}

type briefCable struct {
	brief
	Label       string `json:"label"`
	Description string `json:"description"`
}

type briefInterface struct {
	brief
	Device      briefDevice `json:"device"`
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Cable       *briefCable `json:"cable"`
	Occupied    bool        `json:"_occupied"`
}

type briefMAC struct {
	brief
	MACAddress  string `json:"mac_address"`
	Description string `json:"description"`
}

type briefUser struct {
	brief
	Username string `json:"username"`
}

type deviceJSON struct {
	ID                     int64           `json:"id"`
	URL                    string          `json:"url"`
	DisplayURL             string          `json:"display_url"`
	Display                string          `json:"display"`
	Name                   *string         `json:"name"`
	DeviceType             briefDeviceType `json:"device_type"`
	Role                   briefRole       `json:"role"`
	Tenant                 any             `json:"tenant"`
	Platform               any             `json:"platform"`
	Serial                 string          `json:"serial"`
	AssetTag               any             `json:"asset_tag"`
	Site                   briefNamed      `json:"site"`
	Location               any             `json:"location"`
	Rack                   any             `json:"rack"`
	Position               any             `json:"position"`
	Face                   any             `json:"face"`
	Latitude               any             `json:"latitude"`
	Longitude              any             `json:"longitude"`
	ParentDevice           any             `json:"parent_device"`
	Status                 choice          `json:"status"`
	Airflow                any             `json:"airflow"`
	PrimaryIP              *briefIP        `json:"primary_ip"`
	PrimaryIP4             *briefIP        `json:"primary_ip4"`
	PrimaryIP6             any             `json:"primary_ip6"`
	OOBIP                  any             `json:"oob_ip"`
	Cluster                any             `json:"cluster"`
	VirtualChassis         any             `json:"virtual_chassis"`
	VCPosition             any             `json:"vc_position"`
	VCPriority             any             `json:"vc_priority"`
	Description            string          `json:"description"`
	Comments               string          `json:"comments"`
	ConfigTemplate         any             `json:"config_template"`
	ConfigContext          map[string]any  `json:"config_context"`
	LocalContextData       any             `json:"local_context_data"`
	Tags                   []any           `json:"tags"`
	CustomFields           map[string]any  `json:"custom_fields"`
	Created                string          `json:"created"`
	LastUpdated            string          `json:"last_updated"`
	ConsolePortCount       int             `json:"console_port_count"`
	ConsoleServerPortCount int             `json:"console_server_port_count"`
	PowerPortCount         int             `json:"power_port_count"`
	PowerOutletCount       int             `json:"power_outlet_count"`
	InterfaceCount         int             `json:"interface_count"`
	FrontPortCount         int             `json:"front_port_count"`
	RearPortCount          int             `json:"rear_port_count"`
	DeviceBayCount         int             `json:"device_bay_count"`
	ModuleBayCount         int             `json:"module_bay_count"`
	InventoryItemCount     int             `json:"inventory_item_count"`
}

type interfaceJSON struct {
	ID                          int64            `json:"id"`
	URL                         string           `json:"url"`
	DisplayURL                  string           `json:"display_url"`
	Display                     string           `json:"display"`
	Device                      briefDevice      `json:"device"`
	VDCs                        []any            `json:"vdcs"`
	Module                      any              `json:"module"`
	Name                        string           `json:"name"`
	Label                       string           `json:"label"`
	Type                        choice           `json:"type"`
	Enabled                     bool             `json:"enabled"`
	Parent                      any              `json:"parent"`
	Bridge                      any              `json:"bridge"`
	LAG                         any              `json:"lag"`
	MTU                         any              `json:"mtu"`
	MACAddress                  *string          `json:"mac_address"`
	PrimaryMACAddress           *briefMAC        `json:"primary_mac_address"`
	MACAddresses                []briefMAC       `json:"mac_addresses"`
	Speed                       any              `json:"speed"`
	Duplex                      any              `json:"duplex"`
	WWN                         any              `json:"wwn"`
	MgmtOnly                    bool             `json:"mgmt_only"`
	Description                 string           `json:"description"`
	Mode                        any              `json:"mode"`
	RFRole                      any              `json:"rf_role"`
	RFChannel                   any              `json:"rf_channel"`
	PoEMode                     any              `json:"poe_mode"`
	PoEType                     any              `json:"poe_type"`
	RFChannelFrequency          any              `json:"rf_channel_frequency"`
	RFChannelWidth              any              `json:"rf_channel_width"`
	TXPower                     any              `json:"tx_power"`
	UntaggedVLAN                any              `json:"untagged_vlan"`
	TaggedVLANs                 []any            `json:"tagged_vlans"`
	QinQSVLAN                   any              `json:"qinq_svlan"`
	VLANTranslationPolicy       any              `json:"vlan_translation_policy"`
	MarkConnected               bool             `json:"mark_connected"`
	Cable                       *briefCable      `json:"cable"`
	CableEnd                    string           `json:"cable_end"`
	WirelessLink                any              `json:"wireless_link"`
	LinkPeers                   []briefInterface `json:"link_peers"`
	LinkPeersType               *string          `json:"link_peers_type"`
	WirelessLANs                []any            `json:"wireless_lans"`
	VRF                         any              `json:"vrf"`
	L2VPNTermination            any              `json:"l2vpn_termination"`
	ConnectedEndpoints          []briefInterface `json:"connected_endpoints"`
	ConnectedEndpointsType      *string          `json:"connected_endpoints_type"`
	ConnectedEndpointsReachable bool             `json:"connected_endpoints_reachable"`
	Tags                        []any            `json:"tags"`
	CustomFields                map[string]any   `json:"custom_fields"`
	Created                     string           `json:"created"`
	LastUpdated                 string           `json:"last_updated"`
	CountIPAddresses            int              `json:"count_ipaddresses"`
	CountFHRPGroups             int              `json:"count_fhrp_groups"`
	Occupied                    bool             `json:"_occupied"`
}

// renderer turns objects into their representations, with URLs under base.
type renderer struct {
	s       *store
	base    string
	cfNames map[string][]string // custom fields by object type, found once
}

func timeString(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

func (r *renderer) url(path string, id int64) string {
	return r.base + path + strconv.FormatInt(id, 10) + "/"
}

func (r *renderer) displayURL(path string, id int64) string {
	return r.base + strings.TrimPrefix(path, "/api") + strconv.FormatInt(id, 10) + "/"
}

var statusLabels = map[string]string{
	"offline": "Offline", "active": "Active", "planned": "Planned", "staged": "Staged",
	"failed": "Failed", "inventory": "Inventory", "decommissioning": "Decommissioning",
	"reserved": "Reserved", "deprecated": "Deprecated", "dhcp": "DHCP", "slaac": "SLAAC",
	"connected": "Connected", "staging": "Staging", "retired": "Retired",
}

func statusChoice(v string) choice { return choice{Value: v, Label: statusLabels[v]} }

func (r *renderer) brief(path string, id int64, display string) brief {
	return brief{ID: id, URL: r.url(path, id), Display: display}
}

func (r *renderer) briefNamed(path string, id int64, n named) briefNamed {
	return briefNamed{brief: r.brief(path, id, n.name), Name: n.name, Slug: n.slug, Description: n.description}
}

func (r *renderer) briefManufacturer(id int64) briefNamed {
	return r.briefNamed(pathManufacturers, id, r.s.manufacturers.get(id).named)
}

func (r *renderer) briefDeviceType(id int64) briefDeviceType {
	dt := r.s.deviceTypes.get(id)
	return briefDeviceType{brief: r.brief(pathDeviceTypes, id, dt.model), Manufacturer: r.briefManufacturer(dt.manufacturer), Model: dt.model, Slug: dt.slug, Description: dt.description}
}

func (r *renderer) briefIP(id int64) *briefIP {
	ip := r.s.ips.get(id)
	if ip == nil {
		return nil
	}
	return &briefIP{brief: r.brief(pathIPs, id, ip.address.String()), Family: family(ip), Address: ip.address.String(), Description: ip.description}
}

func family(ip *ipAddress) choice {
	if ip.address.Addr().Is4() {
		return choice{Value: 4, Label: "IPv4"}
	}
	return choice{Value: 6, Label: "IPv6"}
}

func deviceDisplay(d *device) string {
	if d.name == "" {
		return fmt.Sprintf("Unnamed device (%d)", d.id)
	}
	return d.name
}

func (r *renderer) briefDevice(id int64) briefDevice {
	d := r.s.devices.get(id)
	b := briefDevice{brief: r.brief(pathDevices, id, deviceDisplay(d)), Description: d.description}
	if d.name != "" {
		b.Name = &d.name
	}
	return b
}

func (r *renderer) briefCable(id int64) *briefCable {
	c := r.s.cables.get(id)
	if c == nil {
		return nil
	}
	return &briefCable{brief: r.brief(pathCables, id, cableDisplay(c)), Label: c.label, Description: c.description}
}

func cableDisplay(c *cable) string {
	if c.label != "" {
		return c.label
	}
	return fmt.Sprintf("#%d", c.id)
}

func (r *renderer) briefInterface(id int64) briefInterface {
	i := r.s.interfaces.get(id)
	return briefInterface{brief: r.brief(pathInterfaces, id, i.name), Device: r.briefDevice(i.device), Name: i.name, Description: i.description, Cable: r.briefCable(i.cable), Occupied: i.cable != 0}
}

func (r *renderer) briefMAC(id int64) briefMAC {
	m := r.s.macs.get(id)
	return briefMAC{brief: r.brief(pathMACs, id, m.mac), MACAddress: m.mac, Description: m.description}
}

func (r *renderer) briefUser(id int64) *briefUser {
	u := r.s.users.get(id)
	if u == nil {
		return nil
	}
	return &briefUser{brief: r.brief("/api/users/users/", id, u.name), Username: u.name}
}

// customFieldsOf returns every custom field defined on objectType, with the
// object's value or null.
func (r *renderer) customFieldsOf(objectType string, values map[string]any) map[string]any {
	names, ok := r.cfNames[objectType]
	if !ok {
		r.s.customFields.all(func(_ int64, cf *customField) bool {
			if slices.Contains(cf.objectTypes, objectType) {
				names = append(names, cf.name)
			}
			return true
		})
		if r.cfNames == nil {
			r.cfNames = map[string][]string{}
		}
		r.cfNames[objectType] = names
	}
	out := make(map[string]any, len(names))
	for _, n := range names {
		out[n] = values[n]
	}
	return out
}

func (r *renderer) device(d *device) any {
	out := &deviceJSON{
		ID: d.id, URL: r.url(pathDevices, d.id), DisplayURL: r.displayURL(pathDevices, d.id), Display: deviceDisplay(d),
		DeviceType: r.briefDeviceType(d.deviceType), Role: briefRole{briefNamed: r.briefNamed(pathRoles, d.role, r.s.roles.get(d.role).named)}, Serial: d.serial,
		Site: r.briefNamed(pathSites, d.site, r.s.sites.get(d.site).named), Status: statusChoice(d.status),
		PrimaryIP: r.briefIP(d.primaryIP4), PrimaryIP4: r.briefIP(d.primaryIP4),
		Description: d.description, Comments: d.comments, ConfigContext: map[string]any{}, Tags: []any{},
		CustomFields: r.customFieldsOf("dcim.device", d.customFields),
		Created:      timeString(d.created), LastUpdated: timeString(d.updated),
		InterfaceCount: len(r.s.ifacesByDevice[d.id]),
	}
	if d.name != "" {
		out.Name = &d.name
	}
	return out
}

var interfaceTypeLabels = map[string]string{
	"virtual": "Virtual", "other": "Other", "1000base-t": "1000BASE-T (1GE)",
	"2.5gbase-t": "2.5GBASE-T (2.5GE)", "10gbase-t": "10GBASE-T (10GE)",
	"10gbase-x-sfpp": "SFP+ (10GE)",
}

const typeInterface = "dcim.interface"

func (r *renderer) iface(i *iface) any {
	out := &interfaceJSON{
		ID: i.id, URL: r.url(pathInterfaces, i.id), DisplayURL: r.displayURL(pathInterfaces, i.id), Display: i.name,
		Device: r.briefDevice(i.device), VDCs: []any{}, Name: i.name, Label: i.label,
		Type: choice{Value: i.typ, Label: interfaceTypeLabels[i.typ]}, Enabled: i.enabled, MgmtOnly: i.mgmtOnly,
		MACAddresses: []briefMAC{}, Description: i.description, TaggedVLANs: []any{},
		Cable: r.briefCable(i.cable), CableEnd: i.cableEnd, LinkPeers: []briefInterface{}, WirelessLANs: []any{},
		Tags: []any{}, CustomFields: r.customFieldsOf(typeInterface, nil),
		Created: timeString(i.created), LastUpdated: timeString(i.updated), Occupied: i.cable != 0,
	}
	if i.primaryMAC != 0 {
		m := r.briefMAC(i.primaryMAC)
		out.PrimaryMACAddress = &m
		out.MACAddress = &m.MACAddress
	}
	for _, mid := range r.s.macsByIface[i.id] {
		out.MACAddresses = append(out.MACAddresses, r.briefMAC(mid))
	}
	if c := r.s.cables.get(i.cable); c != nil {
		peers := c.b
		if i.cableEnd == "B" {
			peers = c.a
		}
		for _, p := range peers {
			out.LinkPeers = append(out.LinkPeers, r.briefInterface(p))
		}
		t := typeInterface
		out.LinkPeersType = &t
		// A cable between two interfaces is the whole path: its far end is
		// the connected endpoint.
		out.ConnectedEndpoints = out.LinkPeers
		out.ConnectedEndpointsType = &t
		out.ConnectedEndpointsReachable = c.status == "connected"
	}
	// NetBox answers connected_endpoints_reachable null for an interface
	// with no path; its schema says boolean, and fleet does not read it, so
	// netboxtest answers false.
	out.CountIPAddresses = len(r.s.ipsByIface[i.id])
	return out
}

// object completes fields, the representation of an object of the kind at
// path whose meta is m, with what every such representation holds: its ID,
// URLs and display, no tags, its kind's custom fields (null: netboxtest
// holds custom-field values on devices only) and its times.
func (r *renderer) object(path string, m meta, display string, fields map[string]any) map[string]any {
	fields["id"], fields["url"], fields["display_url"], fields["display"] = m.id, r.url(path, m.id), r.displayURL(path, m.id), display
	fields["tags"], fields["custom_fields"] = []any{}, r.customFieldsOf(kinds[path].objectType, nil)
	fields["created"], fields["last_updated"] = timeString(m.created), timeString(m.updated)
	return fields
}

// assigned puts the interface iface (0: none) in out as its assigned
// object.
func (r *renderer) assigned(out map[string]any, iface int64) map[string]any {
	out["assigned_object_type"], out["assigned_object_id"], out["assigned_object"] = nil, nil, nil
	if iface != 0 {
		out["assigned_object_type"], out["assigned_object_id"], out["assigned_object"] = typeInterface, iface, r.briefInterface(iface)
	}
	return out
}

func (r *renderer) macAddress(m *macAddress) any {
	return r.assigned(r.object(pathMACs, m.meta, m.mac, map[string]any{
		"mac_address": m.mac, "description": m.description, "comments": "",
	}), m.iface)
}

func (r *renderer) ipAddress(ip *ipAddress) any {
	out := r.object(pathIPs, ip.meta, ip.address.String(), map[string]any{
		"family": family(ip), "address": ip.address.String(), "vrf": nil, "tenant": nil,
		"status": statusChoice(ip.status), "role": nil,
		"nat_inside": nil, "nat_outside": []any{}, "dns_name": ip.dnsName, "description": ip.description, "comments": "",
	})
	if ip.role != "" {
		out["role"] = choice{Value: ip.role, Label: strings.ToUpper(ip.role[:1]) + ip.role[1:]}
	}
	return r.assigned(out, ip.iface)
}

func (r *renderer) cable(c *cable) any {
	terms := func(ids []int64) []any {
		out := []any{}
		for _, i := range ids {
			out = append(out, map[string]any{"object_type": typeInterface, "object_id": i, "object": r.briefInterface(i)})
		}
		return out
	}
	return r.object(pathCables, c.meta, cableDisplay(c), map[string]any{
		"type": orNil(c.typ), "a_terminations": terms(c.a), "b_terminations": terms(c.b),
		"status": statusChoice(c.status), "tenant": nil, "label": c.label, "color": "", "length": nil, "length_unit": nil,
		"description": c.description, "comments": "",
	})
}

var customFieldTypeLabels = map[string]string{
	"text": "Text", "longtext": "Text (long)", "integer": "Integer", "decimal": "Decimal", "boolean": "Boolean (true/false)",
	"date": "Date", "datetime": "Date & time", "url": "URL", "json": "JSON", "select": "Selection",
	"multiselect": "Multiple selection", "object": "Object", "multiobject": "Multiple objects",
}

var customFieldDataTypes = map[string]string{
	"text": "string", "longtext": "string", "integer": "integer", "decimal": "decimal", "boolean": "boolean",
	"date": "string", "datetime": "string", "url": "string", "json": "object", "select": "string",
	"multiselect": "array", "object": "object", "multiobject": "array",
}

func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (r *renderer) customField(cf *customField) any {
	display := cf.label
	if display == "" {
		display = strings.ReplaceAll(title(cf.name), "_", " ")
	}
	return map[string]any{
		"id": cf.id, "url": r.url(pathCustomFields, cf.id), "display_url": r.displayURL(pathCustomFields, cf.id), "display": display,
		"object_types": cf.objectTypes, "type": choice{Value: cf.typ, Label: customFieldTypeLabels[cf.typ]},
		"related_object_type": nil, "data_type": customFieldDataTypes[cf.typ], "name": cf.name, "label": cf.label,
		"group_name": cf.groupName, "description": cf.description, "required": cf.required, "unique": false,
		"search_weight": cf.searchWeight, "filter_logic": choice{Value: cf.filterLogic, Label: title(cf.filterLogic)},
		"ui_visible": choice{Value: cf.uiVisible, Label: title(cf.uiVisible)}, "ui_editable": choice{Value: cf.uiEditable, Label: title(cf.uiEditable)},
		"is_cloneable": false, "default": cf.defaultValue, "related_object_filter": nil, "weight": cf.weight,
		"validation_minimum": nil, "validation_maximum": nil, "validation_regex": cf.regex, "choice_set": nil,
		"comments": "", "created": timeString(cf.created), "last_updated": timeString(cf.updated),
	}
}

func (r *renderer) journalEntry(j *journalEntry) any {
	var assigned any
	if j.objectType == "dcim.device" && r.s.devices.get(j.objectID) != nil {
		assigned = r.briefDevice(j.objectID)
	}
	return r.object(pathJournal, j.meta, j.created.UTC().Format("2006-01-02 15:04 (MST)"), map[string]any{
		"assigned_object_type": j.objectType, "assigned_object_id": j.objectID, "assigned_object": assigned,
		"created_by": orNil(j.createdBy), "kind": choice{Value: j.kind, Label: title(j.kind)}, "comments": j.comments,
	})
}

var actionLabels = map[string]string{"create": "Created", "update": "Updated", "delete": "Deleted"}

func (r *renderer) objectChange(c *objectChange) any {
	var changed any
	if c.objectType == "dcim.device" && r.s.devices.get(c.objectID) != nil {
		changed = r.briefDevice(c.objectID)
	}
	// A nil pre, post or user encodes as null.
	return map[string]any{
		"id": c.id, "url": r.url(pathChanges, c.id), "display_url": r.displayURL(pathChanges, c.id),
		"display":   fmt.Sprintf("%s %s %s by %s", c.objectType, c.repr, strings.ToLower(actionLabels[c.action]), c.userName),
		"time":      timeString(c.created),
		"user":      r.briefUser(c.user),
		"user_name": c.userName, "request_id": c.requestID,
		"action":              choice{Value: c.action, Label: actionLabels[c.action]},
		"changed_object_type": c.objectType, "changed_object_id": c.objectID, "changed_object": changed,
		"prechange_data": c.pre, "postchange_data": c.post,
	}
}

func (r *renderer) site(s *site) any {
	return r.object(pathSites, s.meta, s.name, map[string]any{
		"name": s.name, "slug": s.slug, "status": statusChoice(s.status), "region": nil, "group": nil, "tenant": nil,
		"facility": "", "time_zone": nil, "description": s.description, "physical_address": "", "shipping_address": "",
		"latitude": nil, "longitude": nil, "comments": "", "asns": []any{},
		"device_count": count(&r.s.devices, func(d *device) bool { return d.site == s.id }),
	})
}

// count returns how many objects of tab pred holds for.
func count[T any](tab *table[T], pred func(*T) bool) int {
	n := 0
	tab.all(func(_ int64, v *T) bool {
		if pred(v) {
			n++
		}
		return true
	})
	return n
}

func (r *renderer) manufacturer(m *manufacturer) any {
	return r.object(pathManufacturers, m.meta, m.name, map[string]any{
		"name": m.name, "slug": m.slug, "description": m.description,
		"devicetype_count":    count(&r.s.deviceTypes, func(dt *deviceType) bool { return dt.manufacturer == m.id }),
		"inventoryitem_count": 0, "platform_count": 0,
	})
}

func (r *renderer) deviceType(dt *deviceType) any {
	return r.object(pathDeviceTypes, dt.meta, dt.model, map[string]any{
		"manufacturer": r.briefManufacturer(dt.manufacturer), "default_platform": nil, "model": dt.model, "slug": dt.slug,
		"part_number": dt.partNumber, "u_height": 1.0, "exclude_from_utilization": false, "is_full_depth": true,
		"subdevice_role": nil, "airflow": nil, "weight": nil, "weight_unit": nil, "front_image": nil, "rear_image": nil,
		"description": dt.description, "comments": "",
		"device_count":                count(&r.s.devices, func(d *device) bool { return d.deviceType == dt.id }),
		"console_port_template_count": 0, "console_server_port_template_count": 0, "power_port_template_count": 0,
		"power_outlet_template_count": 0, "interface_template_count": 0, "front_port_template_count": 0,
		"rear_port_template_count": 0, "device_bay_template_count": 0, "module_bay_template_count": 0,
		"inventory_item_template_count": 0,
	})
}

func (r *renderer) role(ro *role) any {
	return r.object(pathRoles, ro.meta, ro.name, map[string]any{
		"name": ro.name, "slug": ro.slug, "color": ro.color, "vm_role": true, "config_template": nil, "parent": nil,
		"description": ro.description, "comments": "",
		"device_count": count(&r.s.devices, func(d *device) bool { return d.role == ro.id }), "virtualmachine_count": 0, "_depth": 0,
	})
}
