package inventory

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Plan is what NetBox lacks of the nodes file: the objects to create and
// the fields to update, as NetBox.Plan found them. Apply carries it out;
// String renders it as terraform plan does. A Plan is a value: it does not
// change, and Apply may carry it out once.
type Plan struct {
	// Changes lists each object to create or update, in the order Apply
	// writes them: custom fields, the device role, manufacturers, device
	// types, then devices in the nodes file's order.
	Changes []Change
	// Unlisted names fleet's devices in NetBox that no entry of the nodes
	// file names. Plan never deletes a device; it lists them.
	Unlisted []string

	work *planWork
}

// Change is one object a Plan creates or updates.
type Change struct {
	Action Action
	Kind   string // "custom field", "device role", "manufacturer", "device type" or "device"
	Name   string // e.g. the device's host name
	// Fields are the fields the change writes: every field of an object it
	// creates, the differing ones of an object it updates.
	Fields []FieldChange
}

// FieldChange is one field of a Change. "" stands for no value (null).
type FieldChange struct {
	Name     string // e.g. "serial", "approved_ek_hash", "cable"
	Old, New string
}

// Action is what a Change does. The zero value is invalid.
type Action int

// The actions of a Change. A Plan never deletes.
const (
	ActionCreate Action = iota + 1
	ActionUpdate
)

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Changes) == 0 }

// Counts returns how many objects the plan creates and updates.
func (p *Plan) Counts() (add, change int) {
	for _, c := range p.Changes {
		switch c.Action {
		case ActionCreate:
			add++
		case ActionUpdate:
			change++
		}
	}
	return add, change
}

// fieldDef is one custom field fleet keeps on devices.
type fieldDef struct {
	name, typ, label, regex string
}

const ekHashRegex = "^[0-9a-f]{64}$"

// deviceFields are the custom fields Plan creates on dcim.device when
// missing: what the nodes file declares, then what fleetd records.
var deviceFields = []fieldDef{
	{cfClass, "text", "Talos class", ""},
	{cfBMC, "text", "BMC type", ""},
	{cfInstallDisk, "text", "Install disk", ""},
	{cfInstallDiskSerial, "text", "Install disk serial", ""},
	{cfApprovedEKHash, "text", "Approved EK hash (RSA-2048)", ekHashRegex},
	{cfApprovedEKHashECC, "text", "Approved EK hash (ECC P-256)", ekHashRegex},
	{cfAttestedEKHash, "text", "Attested EK hash (RSA-2048)", ekHashRegex},
	{cfAttestedEKHashECC, "text", "Attested EK hash (ECC P-256)", ekHashRegex},
	{cfAttestedSwitchPort, "integer", "Attested switch port", ""},
	{cfAttestedAt, "datetime", "Attested at", ""},
	{cfAttestVerdict, "text", "Attestation verdict", ""},
	{cfAttestedSecureBoot, "text", "Attested Secure Boot", ""},
	{cfAttestedPCR7, "text", "Attested PCR 7", ekHashRegex},
	{cfDesiredAction, "text", "Desired action", ""},
	{cfLastRun, "text", "Last run", ""},
}

// fieldGroup is the custom fields' group_name in NetBox's UI.
const fieldGroup = "fleet"

// Lean views of what Plan reads.

type nbCustomField struct {
	ID          int64    `json:"id"`
	Name        string   `json:"name"`
	Type        nbChoice `json:"type"`
	ObjectTypes []string `json:"object_types"`
}

type nbDeviceType struct {
	ID           int64  `json:"id"`
	Model        string `json:"model"`
	Slug         string `json:"slug"`
	Manufacturer nbRef  `json:"manufacturer"`
}

type nbIP struct {
	ID                 int64   `json:"id"`
	Address            string  `json:"address"`
	AssignedObjectType *string `json:"assigned_object_type"`
	AssignedObjectID   *int64  `json:"assigned_object_id"`
	AssignedObject     *nbPeer `json:"assigned_object"`
}

// iface returns the interface the address is assigned to, 0 for none.
func (ip *nbIP) iface() int64 {
	if ip.AssignedObjectType == nil || *ip.AssignedObjectType != typeInterface || ip.AssignedObjectID == nil {
		return 0
	}
	return *ip.AssignedObjectID
}

func (ip *nbIP) holder() string {
	if ip.AssignedObjectType != nil && *ip.AssignedObjectType != typeInterface {
		return *ip.AssignedObjectType
	}
	if p := ip.AssignedObject; p != nil {
		return fmt.Sprintf("interface %s of device %s", p.Name, derefName(p.Device.Name))
	}
	return fmt.Sprintf("interface %d", ip.iface())
}

func derefName(s *string) string {
	if s == nil {
		return "(unnamed)"
	}
	return *s
}

// planWork is what Apply needs: the objects to write and the IDs known.
type planWork struct {
	applyState
	fields        []fieldDef
	createRole    bool
	roleID        int64
	siteID        int64
	manufacturers []string         // names to create
	mfrIDs        map[string]int64 // by lower-case name
	deviceTypes   []Model          // to create
	typeIDs       map[string]int64 // by slug (model key)
	nodes         []*nodeWork
	ports         map[int]int64 // switch port -> interface ID, for the cables to make
}

// nodeWork is what Apply writes for one node.
type nodeWork struct {
	node Node

	devID    int64 // 0 until the device exists
	create   bool  // create the device
	typeID   int64 // the device's device type, role and site, for bulk updates
	roleID   int64
	siteID   int64
	update   bool            // update the device's fields
	name     *string         // name to set (case differs)
	serial   *string         // serial to set
	setType  bool            // device type to set
	fields   map[string]any  // custom fields to set ("": clear)
	ifaceID  int64           // 0 until the interface exists
	newIface bool            // create the interface
	address  netip.Prefix    // K8S_NODE_CIDR prefix of the node's address
	ipID     int64           // the IP address object, 0 until it exists
	ipCreate bool            // create the IP address object
	ipPatch  map[string]bool // fields of the IP address object to write: "address", "assign"
	primary  bool            // set the device's primary_ip4
	uncable  int64           // cable to delete first (the node moved port)
	cable    bool            // create the cable to the switch port
}

// Plan compares the nodes file with NetBox and returns what Apply must
// write so that NetBox holds every node as "Declare the node" says: a
// device of role Role in site Site with its name, serial, device type
// (model), status planned (when created), the custom fields the nodes file
// declares (class, bmc, install_disk, install_disk_serial,
// approved_ek_hash, approved_ek_hash_ecc; an undeclared one is cleared),
// its interface, its address as the interface's IP address and the
// device's primary IPv4, and a cable from the interface to its switch port;
// and no MAC. It creates the custom fields, the role, manufacturers and
// device types when missing.
//
// Plan never plans a deletion and never touches what fleetd owns: a
// device's status after creation, attested_*, attest_verdict,
// desired_action, last_run, and MACs. A node is matched to the device of
// its name.
//
// Plan reads NetBox with paginated lists (PageSize objects a request): 7
// requests, plus one a page of fleet's devices, of their interfaces and of
// the addresses in K8S_NODE_CIDR (37 for 10,000 nodes NetBox holds), plus
// the switch's ports when cables are to be made: one request for up to 100
// ports, else one a page of the switch's interfaces. It writes nothing. Conflicts it cannot resolve (a missing site or switch, a serial
// or address held by another device, a switch port cabled to something
// else, a custom field of another type) are returned together in an error
// that wraps ErrConflict.
func (nb *NetBox) Plan(ctx context.Context, inv *Inventory) (*Plan, error) {
	if inv == nil {
		return nil, errors.New("netbox: plan: no inventory")
	}
	if nb.cfg.Site == "" {
		return nil, errors.New("netbox: plan: no site: set the site new devices go in")
	}
	if nb.cfg.Switch == "" {
		return nil, errors.New("netbox: plan: no switch: set the switch device the nodes' switch ports belong to")
	}
	if !inv.Topology.NodeCIDR.IsValid() {
		return nil, errors.New("netbox: plan: the inventory has no K8S_NODE_CIDR")
	}
	pl := &planner{nb: nb, inv: inv, plan: &Plan{}, w: &planWork{mfrIDs: map[string]int64{}, typeIDs: map[string]int64{}}}
	if err := pl.read(ctx); err != nil {
		return nil, err
	}
	pl.fields()
	pl.role()
	pl.models()
	if err := pl.devices(ctx); err != nil {
		return nil, err
	}
	if len(pl.conflicts) > 0 {
		return nil, &ConflictError{Conflicts: pl.conflicts}
	}
	pl.plan.work = pl.w
	return pl.plan, nil
}

// ConflictError lists what NetBox holds that the nodes file cannot have as
// it stands. errors.Is finds ErrConflict in it.
type ConflictError struct {
	Conflicts []string
}

func (e *ConflictError) Error() string {
	return "netbox conflicts with the nodes file:\n  " + strings.Join(e.Conflicts, "\n  ")
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// planner holds what Plan read and builds.
type planner struct {
	nb   *NetBox
	inv  *Inventory
	plan *Plan
	w    *planWork

	cfs       []nbCustomField
	site      []nbRef
	roles     []nbRef
	mfrs      []nbRef
	types     []nbDeviceType
	sw        []nbRef
	devs      []nbDevice
	ifaces    []nbInterface
	ips       []nbIP
	conflicts []string
}

func (pl *planner) conflict(format string, args ...any) {
	pl.conflicts = append(pl.conflicts, fmt.Sprintf(format, args...))
}

// read lists what Plan compares, a request or a page at a time.
func (pl *planner) read(ctx context.Context) error {
	nb := pl.nb
	names := make([]string, len(deviceFields))
	for i, f := range deviceFields {
		names[i] = f.name
	}
	keys := make([]string, 0, len(pl.inv.Models))
	models := make([]string, 0, len(pl.inv.Models))
	for k, m := range pl.inv.Models {
		keys = append(keys, k)
		models = append(models, m.Name)
	}
	slices.Sort(keys)
	slices.Sort(models)
	models = slices.Compact(models)
	var err error
	// NetBox answers 400 to a list filtered by a site or role slug it does
	// not have: those lists wait until the site and role are known.
	steps := []func() error{
		func() error {
			pl.cfs, err = list[nbCustomField](ctx, nb, "/api/extras/custom-fields/", url.Values{"name": names})
			return err
		},
		func() error {
			pl.site, err = list[nbRef](ctx, nb, "/api/dcim/sites/", url.Values{"slug": {nb.cfg.Site}})
			return err
		},
		func() error {
			pl.roles, err = list[nbRef](ctx, nb, "/api/dcim/device-roles/", url.Values{"slug": {nb.cfg.Role}})
			return err
		},
		func() error {
			pl.mfrs, err = list[nbRef](ctx, nb, "/api/dcim/manufacturers/", nil)
			return err
		},
		func() error {
			if len(keys) == 0 {
				return nil
			}
			bySlug, err := list[nbDeviceType](ctx, nb, "/api/dcim/device-types/", url.Values{"slug": keys})
			if err != nil {
				return err
			}
			byModel, err := list[nbDeviceType](ctx, nb, "/api/dcim/device-types/", url.Values{"model": models})
			pl.types = append(bySlug, byModel...)
			return err
		},
		func() error {
			if len(pl.site) == 0 {
				return nil
			}
			pl.sw, err = list[nbRef](ctx, nb, "/api/dcim/devices/", url.Values{"site": {nb.cfg.Site}, "name": {nb.cfg.Switch}})
			return err
		},
		func() error {
			if len(pl.roles) == 0 {
				return nil
			}
			pl.devs, err = list[nbDevice](ctx, nb, "/api/dcim/devices/", url.Values{"role": {nb.cfg.Role}})
			return err
		},
		func() error {
			if len(pl.roles) == 0 {
				return nil
			}
			pl.ifaces, err = list[nbInterface](ctx, nb, "/api/dcim/interfaces/", url.Values{"device_role": {nb.cfg.Role}, "name": {nb.cfg.Interface}})
			return err
		},
		func() error {
			pl.ips, err = list[nbIP](ctx, nb, "/api/ipam/ip-addresses/", url.Values{"parent": {pl.inv.Topology.NodeCIDR.String()}})
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	switch len(pl.site) {
	case 0:
		pl.conflict("site %s is not in NetBox: create it, or name the site new devices go in", nb.cfg.Site)
	default:
		pl.w.siteID = pl.site[0].ID
	}
	if len(pl.site) > 0 && len(pl.sw) == 0 {
		pl.conflict("switch %s is not a device of site %s in NetBox: create it with its ports, or name the switch", nb.cfg.Switch, nb.cfg.Site)
	}
	return nil
}

// fields plans the custom fields.
func (pl *planner) fields() {
	have := map[string]nbCustomField{}
	for _, cf := range pl.cfs {
		have[cf.Name] = cf
	}
	for _, f := range deviceFields {
		cf, ok := have[f.name]
		if !ok {
			pl.w.fields = append(pl.w.fields, f)
			ch := Change{Action: ActionCreate, Kind: "custom field", Name: f.name, Fields: []FieldChange{
				{Name: "type", New: f.typ}, {Name: "object_types", New: typeDevice},
			}}
			if f.regex != "" {
				ch.Fields = append(ch.Fields, FieldChange{Name: "validation_regex", New: f.regex})
			}
			pl.plan.Changes = append(pl.plan.Changes, ch)
			continue
		}
		if !slices.Contains(cf.ObjectTypes, typeDevice) {
			pl.conflict("custom field %s exists in NetBox for %s, not %s: add %s to its object types", f.name, strings.Join(cf.ObjectTypes, ", "), typeDevice, typeDevice)
		}
		if cf.Type.Value != f.typ {
			pl.conflict("custom field %s is of type %s in NetBox; fleet needs type %s", f.name, cf.Type.Value, f.typ)
		}
	}
}

// role plans the device role.
func (pl *planner) role() {
	if len(pl.roles) > 0 {
		pl.w.roleID = pl.roles[0].ID
		return
	}
	if !slugRE.MatchString(pl.nb.cfg.Role) {
		pl.conflict("role %q cannot be a NetBox slug", pl.nb.cfg.Role)
		return
	}
	pl.w.createRole = true
	pl.plan.Changes = append(pl.plan.Changes, Change{Action: ActionCreate, Kind: "device role", Name: pl.nb.cfg.Role,
		Fields: []FieldChange{{Name: "name", New: pl.nb.cfg.Role}}})
}

var slugRE = regexp.MustCompile(`^[-a-zA-Z0-9_]+$`)

// slugify makes a NetBox slug of a name, as NetBox's UI does.
func slugify(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// models plans manufacturers and device types: a device type's slug is its
// model key.
func (pl *planner) models() {
	for _, m := range pl.mfrs {
		pl.w.mfrIDs[strings.ToLower(m.Name)] = m.ID
	}
	bySlug := map[string]nbDeviceType{}
	for _, t := range pl.types {
		bySlug[t.Slug] = t
	}
	keys := make([]string, 0, len(pl.inv.Models))
	for k := range pl.inv.Models {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var newMfrs []string
	var typeChanges []Change
	for _, k := range keys {
		m := pl.inv.Models[k]
		if t, ok := bySlug[k]; ok {
			if !strings.EqualFold(t.Manufacturer.Name, m.Manufacturer) || t.Model != m.Name {
				pl.conflict("device type %s in NetBox is %s %s; the nodes file's model %s is %s %s", k, t.Manufacturer.Name, t.Model, k, m.Manufacturer, m.Name)
			}
			pl.w.typeIDs[k] = t.ID
			continue
		}
		if !slugRE.MatchString(k) {
			pl.conflict("model %q cannot be a NetBox device type slug: use letters, digits, - and _", k)
			continue
		}
		for _, t := range pl.types {
			if strings.EqualFold(t.Manufacturer.Name, m.Manufacturer) && strings.EqualFold(t.Model, m.Name) {
				pl.conflict("NetBox has %s %s as device type %s: rename model %s to %s in the nodes file", t.Manufacturer.Name, t.Model, t.Slug, k, t.Slug)
			}
		}
		lower := strings.ToLower(m.Manufacturer)
		if _, ok := pl.w.mfrIDs[lower]; !ok && !slices.Contains(newMfrs, lower) {
			for _, e := range pl.mfrs {
				if e.Slug == slugify(m.Manufacturer) {
					pl.conflict("manufacturer slug %s in NetBox is %s, not %s", e.Slug, e.Name, m.Manufacturer)
				}
			}
			newMfrs = append(newMfrs, lower)
			pl.w.manufacturers = append(pl.w.manufacturers, m.Manufacturer)
			pl.plan.Changes = append(pl.plan.Changes, Change{Action: ActionCreate, Kind: "manufacturer", Name: m.Manufacturer,
				Fields: []FieldChange{{Name: "slug", New: slugify(m.Manufacturer)}}})
		}
		pl.w.deviceTypes = append(pl.w.deviceTypes, m)
		typeChanges = append(typeChanges, Change{Action: ActionCreate, Kind: "device type", Name: k,
			Fields: []FieldChange{{Name: "manufacturer", New: m.Manufacturer}, {Name: "model", New: m.Name}}})
	}
	pl.plan.Changes = append(pl.plan.Changes, typeChanges...)
}

// declared returns the custom fields the nodes file declares for n, in
// order ("" for an undeclared one, which Plan clears).
func declared(n Node) [][2]string {
	return [][2]string{
		{cfClass, n.Class},
		{cfBMC, string(n.BMC)},
		{cfInstallDisk, n.Disk},
		{cfInstallDiskSerial, n.DiskSerial},
		{cfApprovedEKHash, n.ApprovedEKRSA2048},
		{cfApprovedEKHashECC, n.ApprovedEKECCP256},
	}
}

func (f *nbDeviceFields) get(name string) string {
	switch name {
	case cfClass:
		return string(f.Class)
	case cfBMC:
		return string(f.BMC)
	case cfInstallDisk:
		return string(f.InstallDisk)
	case cfInstallDiskSerial:
		return string(f.InstallDiskSerial)
	case cfApprovedEKHash:
		return string(f.ApprovedEKHash)
	case cfApprovedEKHashECC:
		return string(f.ApprovedEKHashECC)
	}
	return ""
}

// devices plans each node's device, interface, address and cable, in the
// nodes file's order, lists the devices no node names, and then finds the
// switch ports the new cables need.
func (pl *planner) devices(ctx context.Context) error {
	idx := newDeviceIndex(pl.devs, pl.ifaces, pl.ips)
	var cables cablePlan
	for _, n := range pl.inv.Nodes {
		nw, ch := pl.node(n, idx, &cables)
		pl.w.nodes = append(pl.w.nodes, nw)
		if len(ch.Fields) > 0 {
			pl.plan.Changes = append(pl.plan.Changes, ch)
		}
	}
	pl.plan.Unlisted = idx.unlisted(pl.inv.Nodes)
	if len(cables.ports) > 0 && len(pl.sw) > 0 {
		return pl.switchPorts(ctx, cables.ports, cables.moving)
	}
	return nil
}

// deviceIndex finds what Plan read of NetBox by the keys a node names,
// built once per plan.
type deviceIndex struct {
	devs     []nbDevice
	byName   map[string]*nbDevice   // by lower-case name
	bySerial map[string][]*nbDevice // devices with a serial, by serial
	ifaces   map[int64]*nbInterface // the node interface, by device ID
	ips      map[netip.Addr][]*nbIP // address objects, by host address
}

func newDeviceIndex(devs []nbDevice, ifaces []nbInterface, ips []nbIP) *deviceIndex {
	idx := &deviceIndex{
		devs:     devs,
		byName:   make(map[string]*nbDevice, len(devs)),
		bySerial: make(map[string][]*nbDevice, len(devs)),
		ifaces:   make(map[int64]*nbInterface, len(ifaces)),
		ips:      make(map[netip.Addr][]*nbIP, len(ips)),
	}
	for i := range devs {
		d := &devs[i]
		idx.byName[strings.ToLower(d.name())] = d
		if d.Serial != "" {
			idx.bySerial[d.Serial] = append(idx.bySerial[d.Serial], d)
		}
	}
	for i := range ifaces {
		idx.ifaces[ifaces[i].Device.ID] = &ifaces[i]
	}
	for i := range ips {
		p, err := netip.ParsePrefix(ips[i].Address)
		if err != nil {
			continue
		}
		idx.ips[p.Addr()] = append(idx.ips[p.Addr()], &ips[i])
	}
	return idx
}

// unlisted returns, sorted, the names of the devices no node names.
func (idx *deviceIndex) unlisted(nodes []Node) []string {
	listed := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		listed[strings.ToLower(n.Name)] = true
	}
	var names []string
	for i := range idx.devs {
		if name := idx.devs[i].name(); !listed[strings.ToLower(name)] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// cablePlan gathers, across nodes, what the cables to make need of the
// switch.
type cablePlan struct {
	ports  []int          // switch ports to cable
	moving map[int64]bool // node interfaces whose cable Apply deletes
}

// node diffs one node against the device of its name: the work Apply does
// for it, and the Change Plan shows (no fields: nothing to do).
func (pl *planner) node(n Node, idx *deviceIndex, cables *cablePlan) (*nodeWork, Change) {
	d := idx.byName[strings.ToLower(n.Name)]
	nw := &nodeWork{node: n, address: pl.inv.Prefix(n)}
	for _, other := range idx.bySerial[n.Serial] {
		if other != d {
			pl.conflict("node %s: serial %s is the serial of NetBox device %s (%d): rename that device to %s, or correct the serial", n.Name, n.Serial, other.name(), other.ID, n.Name)
		}
	}
	ch := Change{Kind: "device", Name: n.Name}
	var ifc *nbInterface
	if d == nil {
		pl.newDevice(nw, &ch)
	} else {
		pl.deviceFields(nw, d, &ch)
		ifc = idx.ifaces[d.ID]
	}
	if ifc == nil {
		nw.newIface = true
		ch.Fields = append(ch.Fields, FieldChange{Name: "interface", New: pl.nb.cfg.Interface})
	} else {
		nw.ifaceID = ifc.ID
	}
	pl.address(nw, d, ifc, idx.ips, &ch)
	pl.cable(nw, ifc, &ch, cables)
	return nw, ch
}

// newDevice plans the device of a node NetBox lacks: every field.
func (pl *planner) newDevice(nw *nodeWork, ch *Change) {
	n, cfg := nw.node, pl.nb.cfg
	nw.create = true
	ch.Action = ActionCreate
	ch.Fields = append(ch.Fields,
		FieldChange{Name: "device_type", New: n.Model},
		FieldChange{Name: "role", New: cfg.Role},
		FieldChange{Name: "site", New: cfg.Site},
		FieldChange{Name: "status", New: string(StatusPlanned)},
		FieldChange{Name: "serial", New: n.Serial})
	nw.fields = map[string]any{}
	for _, kv := range declared(n) {
		if kv[1] != "" {
			nw.fields[kv[0]] = kv[1]
			ch.Fields = append(ch.Fields, FieldChange{Name: kv[0], New: kv[1]})
		}
	}
}

// deviceFields plans the update of a node's device d: the fields that
// differ from the nodes file.
func (pl *planner) deviceFields(nw *nodeWork, d *nbDevice, ch *Change) {
	n := &nw.node
	nw.devID, nw.typeID, nw.roleID, nw.siteID = d.ID, d.DeviceType.ID, d.Role.ID, d.Site.ID
	ch.Action = ActionUpdate
	if d.name() != n.Name {
		nw.name = &n.Name
		ch.Fields = append(ch.Fields, FieldChange{Name: "name", Old: d.name(), New: n.Name})
	}
	if d.DeviceType.Slug != n.Model {
		nw.setType = true
		ch.Fields = append(ch.Fields, FieldChange{Name: "device_type", Old: d.DeviceType.Slug, New: n.Model})
	}
	if d.Serial != n.Serial {
		nw.serial = &n.Serial
		ch.Fields = append(ch.Fields, FieldChange{Name: "serial", Old: d.Serial, New: n.Serial})
	}
	for _, kv := range declared(*n) {
		if old := d.CustomFields.get(kv[0]); old != kv[1] {
			if nw.fields == nil {
				nw.fields = map[string]any{}
			}
			nw.fields[kv[0]] = kv[1]
			ch.Fields = append(ch.Fields, FieldChange{Name: kv[0], Old: old, New: kv[1]})
		}
	}
	nw.update = nw.name != nil || nw.setType || nw.serial != nil || len(nw.fields) > 0
}

// cable plans the cable from the node's interface ifc (nil: not yet made)
// to its switch port: kept when it runs there, else made, after the
// deletion of a cable that runs elsewhere.
func (pl *planner) cable(nw *nodeWork, ifc *nbInterface, ch *Change, cables *cablePlan) {
	nb, n := pl.nb, &nw.node
	port, ok := nb.peerPort(ifc)
	if ifc != nil && ifc.Cable != nil && ok && port == n.SwitchPort {
		return
	}
	want := nb.cfg.Switch + " " + nb.PortName(n.SwitchPort)
	switch {
	case ifc != nil && ifc.Cable != nil:
		nw.uncable = ifc.Cable.ID
		if cables.moving == nil {
			cables.moving = map[int64]bool{}
		}
		cables.moving[ifc.ID] = true
		ch.Fields = append(ch.Fields, FieldChange{Name: "cable", Old: pl.farEnd(ifc), New: want})
	default:
		ch.Fields = append(ch.Fields, FieldChange{Name: "cable", New: want})
	}
	nw.cable = true
	cables.ports = append(cables.ports, n.SwitchPort)
}

// farEnd describes where an interface's cable runs.
func (pl *planner) farEnd(i *nbInterface) string {
	if p, ok := i.peer(); ok {
		return derefName(p.Device.Name) + " " + p.Name
	}
	return fmt.Sprintf("cable %d", i.Cable.ID)
}

// address plans the node's IP address object and primary IPv4.
func (pl *planner) address(nw *nodeWork, d *nbDevice, ifc *nbInterface, ipsByHost map[netip.Addr][]*nbIP, ch *Change) {
	want := nw.address
	var oldPrimary string
	var primaryID int64
	if d != nil && d.PrimaryIP4 != nil {
		oldPrimary, primaryID = d.PrimaryIP4.Address, d.PrimaryIP4.ID
	}
	cands := ipsByHost[want.Addr()]
	if len(cands) > 1 {
		pl.conflict("node %s: address %s is in NetBox %d times: keep one", nw.node.Name, want.Addr(), len(cands))
		return
	}
	nw.ipPatch = map[string]bool{}
	if len(cands) == 0 {
		if primaryID != 0 {
			// The node's address changed: rewrite its address object.
			nw.ipID = primaryID
			nw.ipPatch["address"] = true
		} else {
			nw.ipCreate, nw.primary = true, true
		}
	} else {
		q := cands[0]
		if on := q.iface(); on != 0 && (ifc == nil || on != ifc.ID) || q.AssignedObjectType != nil && *q.AssignedObjectType != typeInterface {
			pl.conflict("node %s: address %s is assigned to %s in NetBox: unassign it, or correct the address", nw.node.Name, want.Addr(), q.holder())
			return
		}
		nw.ipID = q.ID
		if q.Address != want.String() {
			nw.ipPatch["address"] = true
		}
		if q.iface() == 0 {
			nw.ipPatch["assign"] = true
		}
		nw.primary = primaryID != q.ID
	}
	if oldPrimary != want.String() {
		ch.Fields = append(ch.Fields, FieldChange{Name: "primary_ip4", Old: oldPrimary, New: want.String()})
	}
}

// switchPorts finds the interfaces of the switch ports to cable, and
// refuses ports that are missing or cabled to something other than a node
// interface whose cable Apply deletes.
func (pl *planner) switchPorts(ctx context.Context, ports []int, moving map[int64]bool) error {
	nb := pl.nb
	q := url.Values{"device_id": {strconv.FormatInt(pl.sw[0].ID, 10)}}
	if len(ports) <= 100 {
		for _, p := range ports {
			q.Add("name", nb.PortName(p))
		}
	}
	all, err := list[nbInterface](ctx, nb, "/api/dcim/interfaces/", q)
	if err != nil {
		return err
	}
	byName := make(map[string]*nbInterface, len(all))
	for i := range all {
		byName[all[i].Name] = &all[i]
	}
	pl.w.ports = map[int]int64{}
	for _, nw := range pl.w.nodes {
		if !nw.cable {
			continue
		}
		name := nb.PortName(nw.node.SwitchPort)
		p, ok := byName[name]
		if !ok {
			pl.conflict("node %s: switch %s has no interface %q for switch_port %d", nw.node.Name, nb.cfg.Switch, name, nw.node.SwitchPort)
			continue
		}
		if p.Cable != nil {
			peer, ok := p.peer()
			if !ok || !moving[peer.ID] {
				pl.conflict("node %s: switch %s %s is cabled to %s in NetBox: remove that cable, or correct switch_port", nw.node.Name, nb.cfg.Switch, name, pl.farEnd(p))
				continue
			}
		}
		pl.w.ports[nw.node.SwitchPort] = p.ID
	}
	return nil
}
