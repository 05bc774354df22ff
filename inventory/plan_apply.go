package inventory

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	netbox "github.com/netbox-community/go-netbox/v4"
)

// Apply carries out p, which Plan made with this client, with bulk writes
// of BulkSize objects each, in an order where every write finds what it
// refers to: custom fields, the role, manufacturers, device types, devices
// (created planned, or updated), interfaces, cables to move, IP addresses,
// primary IPv4s, cables.
//
// Each request is one NetBox transaction. When Apply stops midway (NetBox
// down, a refusal), what it wrote stays, and nothing of it is half-made in
// a way a new Plan would not see: a device without its interface, an
// interface without its address, an address that is not yet primary, a
// port without its cable each show in the next Plan, whose Apply finishes
// the work. Apply returns the first error, wrapping ErrUnavailable or
// ErrRefusedToken when that is the cause.
func (nb *NetBox) Apply(ctx context.Context, p *Plan) error {
	if p == nil || p.work == nil {
		return errors.New("netbox: apply: the plan was not made by Plan")
	}
	w := p.work
	w.once.Lock()
	defer w.once.Unlock()
	if w.applied {
		return errors.New("netbox: apply: the plan was applied already; make a new one")
	}
	w.applied = true
	a := &applier{nb: nb, w: w}
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"custom fields", a.fields},
		{"device role", a.role},
		{"manufacturers", a.manufacturers},
		{"device types", a.deviceTypes},
		{"devices", a.devices},
		{"interfaces", a.interfaces},
		{"cables to move", a.uncable},
		{"addresses", a.addresses},
		{"primary addresses", a.primaries},
		{"cables", a.cables},
	}
	for _, s := range steps {
		if err := s.fn(ctx); err != nil {
			return fmt.Errorf("netbox: apply: %s: %w", s.name, err)
		}
	}
	return nil
}

type applier struct {
	nb *NetBox
	w  *planWork
}

// ref32 converts an ID for go-netbox's request models.
func ref32(id int64) (*int32, error) {
	i, err := id32(id)
	return &i, err
}

// bulk writes items to path, BulkSize a request (POST creates, PATCH
// updates), and calls each with the index and the answer of every item.
func bulk[T any](ctx context.Context, nb *NetBox, method, path string, items []any, each func(i int, v *T)) error {
	for start := 0; start < len(items); start += nb.cfg.BulkSize {
		chunk := items[start:min(start+nb.cfg.BulkSize, len(items))]
		var out []T
		if err := nb.do(ctx, method, path, nil, chunk, &out); err != nil {
			return err
		}
		if len(out) != len(chunk) {
			return fmt.Errorf("netbox: %s %s: %d objects answered for %d written", method, path, len(out), len(chunk))
		}
		for i := range out {
			if each != nil {
				each(start+i, &out[i])
			}
		}
		nb.log.Info("netbox apply", "method", method, "path", path, "objects", start+len(chunk), "of", len(items))
	}
	return nil
}

func (a *applier) fields(ctx context.Context) error {
	if len(a.w.fields) == 0 {
		return nil
	}
	items := make([]any, len(a.w.fields))
	for i, f := range a.w.fields {
		typ, err := netbox.NewPatchedWritableCustomFieldRequestTypeFromValue(f.typ)
		if err != nil {
			return err
		}
		req := netbox.WritableCustomFieldRequest{ObjectTypes: []string{typeDevice}, Name: f.name}
		req.SetType(*typ)
		req.SetLabel(f.label)
		req.SetGroupName(fieldGroup)
		if f.regex != "" {
			req.SetValidationRegex(f.regex)
		}
		items[i] = req
	}
	return bulk[nbCustomField](ctx, a.nb, http.MethodPost, "/api/extras/custom-fields/", items, nil)
}

func (a *applier) role(ctx context.Context) error {
	if !a.w.createRole {
		return nil
	}
	req := netbox.NewWritableDeviceRoleRequest(a.nb.cfg.Role, a.nb.cfg.Role)
	req.SetDescription("Kubernetes nodes fleet provisions")
	ctx, cancel := a.nb.withTimeout(ctx)
	defer cancel()
	role, rsp, err := a.nb.api.DcimAPI.DcimDeviceRolesCreate(ctx).WritableDeviceRoleRequest(*req).Execute()
	if err := apiError("POST /api/dcim/device-roles/", rsp, err); err != nil {
		return err
	}
	a.w.roleID = int64(role.Id)
	return nil
}

func (a *applier) manufacturers(ctx context.Context) error {
	items := make([]any, len(a.w.manufacturers))
	for i, name := range a.w.manufacturers {
		items[i] = netbox.NewManufacturerRequest(name, slugify(name))
	}
	return bulk(ctx, a.nb, http.MethodPost, "/api/dcim/manufacturers/", items, func(_ int, m *nbRef) {
		a.w.mfrIDs[strings.ToLower(m.Name)] = m.ID
	})
}

func (a *applier) deviceTypes(ctx context.Context) error {
	items := make([]any, len(a.w.deviceTypes))
	for i, m := range a.w.deviceTypes {
		mfr, err := ref32(a.w.mfrIDs[strings.ToLower(m.Manufacturer)])
		if err != nil {
			return fmt.Errorf("manufacturer %s: %w", m.Manufacturer, err)
		}
		items[i] = netbox.NewWritableDeviceTypeRequest(netbox.Int32AsBriefDeviceTypeRequestManufacturer(mfr), m.Name, m.Key)
	}
	return bulk(ctx, a.nb, http.MethodPost, "/api/dcim/device-types/", items, func(_ int, t *nbDeviceType) {
		a.w.typeIDs[t.Slug] = t.ID
	})
}

// customFields returns the custom_fields of a write: "" clears a field.
func (nw *nodeWork) customFields() map[string]any {
	if len(nw.fields) == 0 {
		return nil
	}
	out := make(map[string]any, len(nw.fields))
	for k, v := range nw.fields {
		if s, ok := v.(string); ok && s == "" {
			v = nil
		}
		out[k] = v
	}
	return out
}

func (a *applier) devices(ctx context.Context) error {
	var creates, updates []any
	var created, updated []*nodeWork
	for _, nw := range a.w.nodes {
		typeID, err := ref32(a.w.typeIDs[nw.node.Model])
		if err != nil && (nw.create || nw.update) {
			return fmt.Errorf("device type %s: %w", nw.node.Model, err)
		}
		switch {
		case nw.create:
			role, err := ref32(a.w.roleID)
			if err != nil {
				return fmt.Errorf("role %s: %w", a.nb.cfg.Role, err)
			}
			site, err := ref32(a.w.siteID)
			if err != nil {
				return fmt.Errorf("site %s: %w", a.nb.cfg.Site, err)
			}
			req := netbox.NewWritableDeviceWithConfigContextRequest(netbox.Int32AsDeviceBayTemplateRequestDeviceType(typeID),
				netbox.Int32AsDeviceWithConfigContextRequestRole(role), netbox.Int32AsDeviceWithConfigContextRequestSite(site))
			req.SetName(nw.node.Name)
			req.SetSerial(nw.node.Serial)
			req.SetStatus(netbox.DEVICESTATUSVALUE_PLANNED)
			req.CustomFields = nw.customFields()
			creates = append(creates, req)
			created = append(created, nw)
		case nw.update:
			req, err := a.bulkDevice(nw)
			if err != nil {
				return err
			}
			if nw.setType {
				req.SetDeviceType(netbox.Int32AsDeviceBayTemplateRequestDeviceType(typeID))
			}
			if nw.name != nil {
				req.SetName(*nw.name)
			}
			if nw.serial != nil {
				req.SetSerial(*nw.serial)
			}
			req.CustomFields = nw.customFields()
			updates = append(updates, req)
			updated = append(updated, nw)
		}
	}
	if err := bulk(ctx, a.nb, http.MethodPost, "/api/dcim/devices/", creates, func(i int, d *nbDevice) {
		nw := created[i]
		nw.devID, nw.typeID, nw.roleID, nw.siteID = d.ID, d.DeviceType.ID, d.Role.ID, d.Site.ID
	}); err != nil {
		return err
	}
	if err := bulk[nbDevice](ctx, a.nb, http.MethodPatch, "/api/dcim/devices/", updates, func(i int, d *nbDevice) {
		updated[i].typeID = d.DeviceType.ID
	}); err != nil {
		return err
	}
	if len(creates) > 0 {
		// A device type's interface templates, or another writer, may
		// have given the new devices their interface: learn which exist
		// before creating any (one request a page).
		ifaces, err := list[nbInterface](ctx, a.nb, "/api/dcim/interfaces/", url.Values{"device_role": {a.nb.cfg.Role}, "name": {a.nb.cfg.Interface}})
		if err != nil {
			return err
		}
		byDevice := map[int64]int64{}
		for _, i := range ifaces {
			byDevice[i.Device.ID] = i.ID
		}
		for _, nw := range created {
			if id := byDevice[nw.devID]; id != 0 {
				nw.ifaceID, nw.newIface = id, false
			}
		}
	}
	return nil
}

// bulkDevice starts a bulk update of nw's device. NetBox's schema for a
// bulk update item requires device_type, role and site: it carries the
// device's own.
func (a *applier) bulkDevice(nw *nodeWork) (*netbox.DeviceWithConfigContextRequest, error) {
	typeID, err := ref32(nw.typeID)
	if err != nil {
		return nil, fmt.Errorf("device %s: its device type: %w", nw.node.Name, err)
	}
	role, err := ref32(nw.roleID)
	if err != nil {
		return nil, fmt.Errorf("device %s: its role: %w", nw.node.Name, err)
	}
	site, err := ref32(nw.siteID)
	if err != nil {
		return nil, fmt.Errorf("device %s: its site: %w", nw.node.Name, err)
	}
	req := netbox.NewDeviceWithConfigContextRequest(netbox.Int32AsDeviceBayTemplateRequestDeviceType(typeID),
		netbox.Int32AsDeviceWithConfigContextRequestRole(role), netbox.Int32AsDeviceWithConfigContextRequestSite(site))
	req.AdditionalProperties = map[string]any{"id": nw.devID}
	return req, nil
}

func (a *applier) interfaces(ctx context.Context) error {
	typ, err := netbox.NewInterfaceTypeValueFromValue(a.nb.cfg.InterfaceType)
	if err != nil {
		return fmt.Errorf("interface type %q: %w", a.nb.cfg.InterfaceType, err)
	}
	var items []any
	var made []*nodeWork
	for _, nw := range a.w.nodes {
		if !nw.newIface {
			continue
		}
		dev, err := ref32(nw.devID)
		if err != nil {
			return fmt.Errorf("device %s: %w", nw.node.Name, err)
		}
		items = append(items, netbox.NewWritableInterfaceRequest(netbox.Int32AsBriefInterfaceRequestDevice(dev), a.nb.cfg.Interface, *typ))
		made = append(made, nw)
	}
	return bulk(ctx, a.nb, http.MethodPost, "/api/dcim/interfaces/", items, func(i int, ifc *nbInterface) {
		made[i].ifaceID = ifc.ID
	})
}

func (a *applier) uncable(ctx context.Context) error {
	for _, nw := range a.w.nodes {
		if nw.uncable == 0 {
			continue
		}
		err := a.nb.do(ctx, http.MethodDelete, "/api/dcim/cables/"+strconv.FormatInt(nw.uncable, 10)+"/", nil, nil, nil)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

func (a *applier) addresses(ctx context.Context) error {
	var creates, patches []any
	var created []*nodeWork
	for _, nw := range a.w.nodes {
		switch {
		case nw.ipCreate:
			req := netbox.NewWritableIPAddressRequest(nw.address.String())
			req.SetStatus(netbox.PATCHEDWRITABLEIPADDRESSREQUESTSTATUS_ACTIVE)
			req.SetAssignedObjectType(typeInterface)
			req.SetAssignedObjectId(nw.ifaceID)
			creates = append(creates, req)
			created = append(created, nw)
		case nw.ipPatch["address"] || nw.ipPatch["assign"]:
			// The bulk update schema requires address: it is always given.
			req := netbox.NewIPAddressRequest(nw.address.String())
			if nw.ipPatch["assign"] {
				req.SetAssignedObjectType(typeInterface)
				req.SetAssignedObjectId(nw.ifaceID)
			}
			req.AdditionalProperties = map[string]any{"id": nw.ipID}
			patches = append(patches, req)
		}
	}
	if err := bulk(ctx, a.nb, http.MethodPost, "/api/ipam/ip-addresses/", creates, func(i int, ip *nbIP) {
		created[i].ipID = ip.ID
	}); err != nil {
		return err
	}
	return bulk[nbIP](ctx, a.nb, http.MethodPatch, "/api/ipam/ip-addresses/", patches, nil)
}

func (a *applier) primaries(ctx context.Context) error {
	var items []any
	for _, nw := range a.w.nodes {
		if !nw.primary {
			continue
		}
		req, err := a.bulkDevice(nw)
		if err != nil {
			return err
		}
		ip, err := ref32(nw.ipID)
		if err != nil {
			return fmt.Errorf("device %s: its address: %w", nw.node.Name, err)
		}
		req.SetPrimaryIp4(netbox.Int32AsDeviceWithConfigContextRequestPrimaryIp4(ip))
		items = append(items, req)
	}
	return bulk[nbDevice](ctx, a.nb, http.MethodPatch, "/api/dcim/devices/", items, nil)
}

func (a *applier) cables(ctx context.Context) error {
	status, err := netbox.NewCableStatusValueFromValue("connected")
	if err != nil {
		return err
	}
	var items []any
	for _, nw := range a.w.nodes {
		if !nw.cable {
			continue
		}
		ifc, err := id32(nw.ifaceID)
		if err != nil {
			return fmt.Errorf("device %s: its interface: %w", nw.node.Name, err)
		}
		port, err := id32(a.w.ports[nw.node.SwitchPort])
		if err != nil {
			return fmt.Errorf("device %s: switch port %d: %w", nw.node.Name, nw.node.SwitchPort, err)
		}
		req := netbox.NewWritableCableRequest()
		req.SetATerminations([]netbox.GenericObjectRequest{*netbox.NewGenericObjectRequest(typeInterface, ifc)})
		req.SetBTerminations([]netbox.GenericObjectRequest{*netbox.NewGenericObjectRequest(typeInterface, port)})
		req.SetStatus(*status)
		items = append(items, req)
	}
	return bulk[struct {
		ID int64 `json:"id"`
	}](ctx, a.nb, http.MethodPost, "/api/dcim/cables/", items, nil)
}

// applyState is embedded in planWork: Apply runs a plan once.
type applyState struct {
	once    sync.Mutex
	applied bool
}
