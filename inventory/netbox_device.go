package inventory

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	netbox "github.com/netbox-community/go-netbox/v4"
)

// DeviceBySerial returns fleet's device (of role Role) whose serial is
// serial, exactly (a serial in another case is another machine's), with its
// interface's MAC and switch port: two requests. No such device is
// ErrNotFound; more than one is a *DuplicateSerialError (errors.Is finds
// ErrDuplicateSerial) naming them all.
func (nb *NetBox) DeviceBySerial(ctx context.Context, serial string) (Device, error) {
	if serial == "" {
		return Device{}, fmt.Errorf("netbox: no serial: %w", ErrNotFound)
	}
	d, err := nb.deviceBySerial(ctx, serial)
	if err != nil {
		return Device{}, err
	}
	i, err := nb.iface(ctx, d.ID)
	if err != nil {
		return Device{}, err
	}
	return nb.view(d, i), nil
}

// deviceBySerial finds the device whose serial is exactly serial. NetBox's
// serial filter ignores case; a serial differing in case is another
// machine's, so the answer is filtered again. More than one device with the
// serial is a *DuplicateSerialError naming them all.
func (nb *NetBox) deviceBySerial(ctx context.Context, serial string) (*nbDevice, error) {
	q := url.Values{"serial": {serial}, "role": {nb.cfg.Role}}
	var p page[nbDevice]
	if err := nb.do(ctx, http.MethodGet, "/api/dcim/devices/", q, nil, &p); err != nil {
		if unknownChoice(err, "role") {
			return nil, fmt.Errorf("netbox: no device has serial %q: NetBox has no role %s: %w", serial, nb.cfg.Role, ErrNotFound)
		}
		return nil, err
	}
	var found []*nbDevice
	for i := range p.Results {
		if p.Results[i].Serial == serial {
			found = append(found, &p.Results[i])
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("netbox: no device of role %s has serial %q: %w", nb.cfg.Role, serial, ErrNotFound)
	case 1:
		return found[0], nil
	}
	e := &DuplicateSerialError{Serial: serial, Devices: make([]DeviceRef, len(found))}
	for i, d := range found {
		e.Devices[i] = DeviceRef{ID: d.ID, Name: d.name()}
	}
	slices.SortFunc(e.Devices, func(a, b DeviceRef) int { return cmp.Compare(a.ID, b.ID) })
	return nil, e
}

// Device returns the device with NetBox ID id, of any role, with its
// interface's MAC and switch port: two requests. ErrNotFound when there is
// none.
func (nb *NetBox) Device(ctx context.Context, id int64) (Device, error) {
	var d nbDevice
	if err := nb.do(ctx, http.MethodGet, "/api/dcim/devices/"+strconv.FormatInt(id, 10)+"/", nil, nil, &d); err != nil {
		return Device{}, err
	}
	i, err := nb.iface(ctx, id)
	if err != nil {
		return Device{}, err
	}
	return nb.view(&d, i), nil
}

// iface returns the device's interface named Interface, nil when it has
// none.
func (nb *NetBox) iface(ctx context.Context, device int64) (*nbInterface, error) {
	q := url.Values{"device_id": {strconv.FormatInt(device, 10)}, "name": {nb.cfg.Interface}}
	var p page[nbInterface]
	if err := nb.do(ctx, http.MethodGet, "/api/dcim/interfaces/", q, nil, &p); err != nil {
		if unknownChoice(err, "device_id") {
			return nil, fmt.Errorf("netbox: no device %d: %w", device, ErrNotFound)
		}
		return nil, err
	}
	if len(p.Results) == 0 {
		return nil, nil
	}
	return &p.Results[0], nil
}

// Devices returns every device fleet manages (of role Role), ordered by
// NetBox ID, each with its interface's MAC and switch port. It reads the
// devices and their interfaces with paginated lists, PageSize objects per
// request: 2 requests per 1,000 devices.
func (nb *NetBox) Devices(ctx context.Context) ([]Device, error) {
	devs, err := list[nbDevice](ctx, nb, "/api/dcim/devices/", url.Values{"role": {nb.cfg.Role}})
	if unknownChoice(err, "role") {
		return nil, nil // NetBox has no role Role yet, so no device of it
	}
	if err != nil {
		return nil, err
	}
	ifaces, err := list[nbInterface](ctx, nb, "/api/dcim/interfaces/", url.Values{"device_role": {nb.cfg.Role}, "name": {nb.cfg.Interface}})
	if err != nil {
		return nil, err
	}
	return nb.join(devs, ifaces), nil
}

// join pairs devices with their interfaces, keeping the devices' order
// and dropping a device listed twice (a device created between two pages).
func (nb *NetBox) join(devs []nbDevice, ifaces []nbInterface) []Device {
	byDevice := make(map[int64]*nbInterface, len(ifaces))
	for i := range ifaces {
		byDevice[ifaces[i].Device.ID] = &ifaces[i]
	}
	out := make([]Device, 0, len(devs))
	seen := make(map[int64]bool, len(devs))
	for i := range devs {
		d := &devs[i]
		if seen[d.ID] {
			continue
		}
		seen[d.ID] = true
		out = append(out, nb.view(d, byDevice[d.ID]))
	}
	return out
}

// DevicesWithDesiredAction returns fleet's devices whose desired_action is
// set, with their interfaces: a filtered list (cf_desired_action__empty),
// and one interface request per 100 devices found.
func (nb *NetBox) DevicesWithDesiredAction(ctx context.Context) ([]Device, error) {
	listed, err := list[nbDevice](ctx, nb, "/api/dcim/devices/", url.Values{"role": {nb.cfg.Role}, "cf_" + cfDesiredAction + "__empty": {"false"}})
	if unknownChoice(err, "role") {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// NetBox ignores a filter of a custom field it does not have, and would
	// then list every device: keep only those that ask for an action.
	devs := listed[:0]
	for _, d := range listed {
		if d.CustomFields.DesiredAction != "" {
			devs = append(devs, d)
		}
	}
	var ifaces []nbInterface
	for start := 0; start < len(devs); start += 100 {
		q := url.Values{"name": {nb.cfg.Interface}}
		for _, d := range devs[start:min(start+100, len(devs))] {
			q.Add("device_id", strconv.FormatInt(d.ID, 10))
		}
		more, err := list[nbInterface](ctx, nb, "/api/dcim/interfaces/", q)
		if err != nil {
			return nil, err
		}
		ifaces = append(ifaces, more...)
	}
	return nb.join(devs, ifaces), nil
}

// id32 converts a NetBox ID for go-netbox, whose IDs are int32.
func id32(id int64) (int32, error) {
	if id <= 0 || id > math.MaxInt32 {
		return 0, fmt.Errorf("netbox: %d is not a NetBox ID: %w", id, ErrNotFound)
	}
	return int32(id), nil
}

// patchDevice writes fields of device id with go-netbox.
func (nb *NetBox) patchDevice(ctx context.Context, id int64, req *netbox.PatchedWritableDeviceWithConfigContextRequest) error {
	what := fmt.Sprintf("PATCH /api/dcim/devices/%d/", id)
	i, err := id32(id)
	if err != nil {
		return fmt.Errorf("netbox: %s: %w", what, err)
	}
	ctx, cancel := nb.withTimeout(ctx)
	defer cancel()
	_, rsp, err := nb.api.DcimAPI.DcimDevicesPartialUpdate(ctx, i).PatchedWritableDeviceWithConfigContextRequest(*req).Execute()
	return apiError(what, rsp, err)
}

// setFields writes custom fields of device id; a "" value clears its field.
func (nb *NetBox) setFields(ctx context.Context, id int64, fields map[string]any) error {
	cf := make(map[string]any, len(fields))
	for k, v := range fields {
		if s, ok := v.(string); ok && s == "" {
			v = nil
		}
		cf[k] = v
	}
	req := netbox.NewPatchedWritableDeviceWithConfigContextRequest()
	req.CustomFields = cf
	return nb.patchDevice(ctx, id, req)
}

// SetStatus sets the status of device id (one request). A status NetBox
// does not know is refused before any request.
func (nb *NetBox) SetStatus(ctx context.Context, id int64, s Status) error {
	v, err := netbox.NewDeviceStatusValueFromValue(string(s))
	if err != nil {
		return fmt.Errorf("netbox: %q is not a NetBox device status", s)
	}
	req := netbox.NewPatchedWritableDeviceWithConfigContextRequest()
	req.Status = v
	return nb.patchDevice(ctx, id, req)
}

// SetDesiredAction sets desired_action of device id; "" clears it (one
// request).
func (nb *NetBox) SetDesiredAction(ctx context.Context, id int64, action string) error {
	return nb.setFields(ctx, id, map[string]any{cfDesiredAction: action})
}

// SetLastRun sets last_run of device id, the name of its last Workflow; ""
// clears it (one request).
func (nb *NetBox) SetLastRun(ctx context.Context, id int64, run string) error {
	return nb.setFields(ctx, id, map[string]any{cfLastRun: run})
}

// Journal adds a journal entry of the given kind to device id (one
// request). The text must not be empty.
func (nb *NetBox) Journal(ctx context.Context, id int64, kind JournalKind, text string) error {
	k, err := netbox.NewJournalEntryKindValueFromValue(string(kind))
	if err != nil {
		return fmt.Errorf("netbox: %q is not a journal entry kind", kind)
	}
	if strings.TrimSpace(text) == "" {
		return errors.New("netbox: a journal entry needs text")
	}
	req := netbox.NewWritableJournalEntryRequest(typeDevice, id, text)
	req.Kind = k
	what := "POST /api/extras/journal-entries/"
	ctx, cancel := nb.withTimeout(ctx)
	defer cancel()
	_, rsp, err := nb.api.ExtrasAPI.ExtrasJournalEntriesCreate(ctx).WritableJournalEntryRequest(*req).Execute()
	return apiError(what, rsp, err)
}

// RecordAttestation records what an attestation of device id proved: the
// MAC as a MAC address object on the device's interface, made its primary
// MAC (unless it already is), then the attested_* fields and
// attest_verdict, in that order, so a device whose verdict says attested
// holds its MAC. Two to four requests; writing the same attestation again
// changes nothing but attested_at. A device without its interface is
// ErrNotFound: its nodes file entry has not been applied.
func (nb *NetBox) RecordAttestation(ctx context.Context, id int64, a Attestation) error {
	if len(a.MAC) > 0 {
		if err := nb.recordMAC(ctx, id, a.MAC.String()); err != nil {
			return err
		}
	}
	fields := map[string]any{
		cfAttestedEKHash:     a.EKHash,
		cfAttestedEKHashECC:  a.EKHashECC,
		cfAttestedSwitchPort: nil,
		cfAttestedAt:         nil,
		cfAttestVerdict:      a.Verdict,
	}
	if a.SwitchPort > 0 {
		fields[cfAttestedSwitchPort] = a.SwitchPort
	}
	if !a.At.IsZero() {
		fields[cfAttestedAt] = a.At.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
	}
	return nb.setFields(ctx, id, fields)
}

func (nb *NetBox) recordMAC(ctx context.Context, device int64, mac string) error {
	i, err := nb.iface(ctx, device)
	if err != nil {
		return err
	}
	if i == nil {
		return fmt.Errorf("netbox: device %d has no interface %s to hold its MAC: apply its entry in the nodes file: %w", device, nb.cfg.Interface, ErrNotFound)
	}
	if i.PrimaryMAC != nil && sameMAC(i.PrimaryMAC.MACAddress, mac) {
		return nil
	}
	var macID int64
	for _, m := range i.MACAddresses {
		if sameMAC(m.MACAddress, mac) {
			macID = m.ID
		}
	}
	ifaceID, err := id32(i.ID)
	if err != nil {
		return err
	}
	if macID == 0 {
		req := netbox.NewMACAddressRequest(mac)
		req.SetAssignedObjectType(typeInterface)
		req.SetAssignedObjectId(i.ID)
		what := "POST /api/dcim/mac-addresses/"
		cctx, cancel := nb.withTimeout(ctx)
		created, rsp, err := nb.api.DcimAPI.DcimMacAddressesCreate(cctx).MACAddressRequest(*req).Execute()
		cancel()
		if err := apiError(what, rsp, err); err != nil {
			return err
		}
		macID = int64(created.Id)
	}
	m32, err := id32(macID)
	if err != nil {
		return err
	}
	req := netbox.NewPatchedWritableInterfaceRequest()
	req.SetPrimaryMacAddress(netbox.Int32AsInterfaceRequestPrimaryMacAddress(&m32))
	what := fmt.Sprintf("PATCH /api/dcim/interfaces/%d/", i.ID)
	cctx, cancel := nb.withTimeout(ctx)
	defer cancel()
	_, rsp, err := nb.api.DcimAPI.DcimInterfacesPartialUpdate(cctx, ifaceID).PatchedWritableInterfaceRequest(*req).Execute()
	return apiError(what, rsp, err)
}

// sameMAC compares MACs in any notation NetBox or net.HardwareAddr writes.
func sameMAC(a, b string) bool {
	norm := func(s string) []byte {
		return []byte(strings.ToLower(strings.NewReplacer(":", "", "-", "", ".", "").Replace(s)))
	}
	return bytes.Equal(norm(a), norm(b))
}
