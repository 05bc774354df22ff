package inventory

import (
	"context"
	"errors"
	"net/http"
	"time"

	netbox "github.com/netbox-community/go-netbox/v4"
)

// deviceUpdate is one UpdateDevice call: the custom fields it writes to
// device.
type deviceUpdate struct {
	device int64
	fields map[string]any
}

// devicePlace is what NetBox's schema requires of a device in a bulk
// update: its device type, role and site IDs, and when the client read
// them.
type devicePlace struct {
	deviceType, role, site int64
	read                   time.Time
}

// placeMaxAge is how long the client trusts a device's place after it read
// it. A bulk update item writes the place back, so a device moved to
// another device type, role or site since would be moved back: the age
// bounds that window to what follows a read. fleetd's admission reads the
// device (its binding lookup) moments before it writes its fields.
const placeMaxAge = time.Minute

// learn keeps the place of a device the client read.
func (nb *NetBox) learn(d *nbDevice) {
	p := devicePlace{deviceType: d.DeviceType.ID, role: d.Role.ID, site: d.Site.ID, read: time.Now()}
	if d.ID <= 0 || p.deviceType <= 0 || p.role <= 0 || p.site <= 0 {
		return
	}
	nb.placesMu.Lock()
	nb.places[d.ID] = p
	nb.placesMu.Unlock()
}

// place returns the place of device id as the client last read it; false
// when it has not read it in the last placeMaxAge.
func (nb *NetBox) place(id int64) (devicePlace, bool) {
	nb.placesMu.Lock()
	p, ok := nb.places[id]
	nb.placesMu.Unlock()
	return p, ok && time.Since(p.read) < placeMaxAge
}

// forget drops the place of a device NetBox no longer has.
func (nb *NetBox) forget(id int64) {
	nb.placesMu.Lock()
	delete(nb.places, id)
	nb.placesMu.Unlock()
}

// updateOne writes one Update with a PATCH of its device (one request).
func (nb *NetBox) updateOne(ctx context.Context, u deviceUpdate) (struct{}, error) {
	err := nb.setFields(ctx, u.device, u.fields)
	if errors.Is(err, ErrNotFound) {
		nb.forget(u.device)
	}
	return struct{}{}, err
}

// updateDevices writes the Updates of concurrent UpdateDevice calls: those
// of devices whose place the client knows in one bulk update, the others
// alone. When NetBox refuses the bulk update, or answers it without a
// device (NetBox skips an ID it does not have), those Updates are sent
// again alone, so that each caller gets NetBox's answer to its own; when
// NetBox does not answer, each caller of the bulk update gets that. A
// device asked for twice is written alone, after the others, as NetBox
// keeps only the last item of an ID in a bulk update.
func (nb *NetBox) updateDevices(ctx context.Context, ups []deviceUpdate) ([]struct{}, []error) {
	if len(ups) == 1 {
		return each(ctx, ups, nb.updateOne)
	}
	first, again := firstOfEach(ups, func(u deviceUpdate) int64 { return u.device })
	bulk, items, alone := nb.bulkItems(ups, first)
	errs := make([]error, len(ups))
	if len(bulk) == 1 { // a bulk update of one costs what its own PATCH does
		alone, bulk = append(bulk, alone...), nil
	}
	if len(bulk) > 0 {
		written, err := nb.patchDevices(ctx, items)
		for _, i := range bulk {
			switch {
			case err == nil && written[ups[i].device]:
			case errors.Is(err, ErrUnavailable):
				errs[i] = err
			default:
				alone = append(alone, i)
			}
		}
	}
	for _, i := range append(alone, again...) {
		_, errs[i] = nb.updateOne(ctx, ups[i])
	}
	return make([]struct{}, len(ups)), errs
}

// bulkItems makes the bulk update items of the calls first of ups whose
// device's place the client knows: bulk are their indexes in ups, items
// the items, one each; alone are the other calls.
func (nb *NetBox) bulkItems(ups []deviceUpdate, first []int) (bulk []int, items []any, alone []int) {
	for _, i := range first {
		p, ok := nb.place(ups[i].device)
		if !ok {
			alone = append(alone, i)
			continue
		}
		req, err := bulkItem(ups[i], p)
		if err != nil {
			alone = append(alone, i)
			continue
		}
		bulk, items = append(bulk, i), append(items, req)
	}
	return bulk, items, alone
}

// patchDevices sends items in one bulk update of devices (one request),
// and returns the IDs of the devices NetBox answered written.
func (nb *NetBox) patchDevices(ctx context.Context, items []any) (map[int64]bool, error) {
	var out []struct {
		ID int64 `json:"id"`
	}
	if err := nb.do(ctx, http.MethodPatch, "/api/dcim/devices/", nil, items, &out); err != nil {
		return nil, err
	}
	written := make(map[int64]bool, len(out))
	for _, d := range out {
		written[d.ID] = true
	}
	return written, nil
}

// bulkItem returns u as an item of a bulk update of devices: its device's
// place p, as NetBox's schema requires, and fleet's custom fields, as
// setFields writes them.
func bulkItem(u deviceUpdate, p devicePlace) (*netbox.DeviceWithConfigContextRequest, error) {
	typeID, err := ref32(p.deviceType)
	if err != nil {
		return nil, err
	}
	role, err := ref32(p.role)
	if err != nil {
		return nil, err
	}
	site, err := ref32(p.site)
	if err != nil {
		return nil, err
	}
	if _, err := id32(u.device); err != nil {
		return nil, err
	}
	req := netbox.NewDeviceWithConfigContextRequest(netbox.Int32AsDeviceBayTemplateRequestDeviceType(typeID),
		netbox.Int32AsDeviceWithConfigContextRequestRole(role), netbox.Int32AsDeviceWithConfigContextRequestSite(site))
	req.CustomFields = customFields(u.fields)
	req.AdditionalProperties = map[string]any{"id": u.device}
	return req, nil
}
