package inventory

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
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
// interface's MAC and switch port: two requests, each of which concurrent
// calls share (a list of their serials, a list of their interfaces). No
// such device is ErrNotFound; more than one is a *DuplicateSerialError
// (errors.Is finds ErrDuplicateSerial) naming them all.
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

// deviceBySerial finds the device whose serial is exactly serial: one
// request, which concurrent calls share (readSerials). NetBox's serial
// filter ignores case; a serial differing in case is another machine's, so
// the answer is filtered again. More than one device with the serial is a
// *DuplicateSerialError naming them all.
func (nb *NetBox) deviceBySerial(ctx context.Context, serial string) (*nbDevice, error) {
	return nb.serials.do(ctx, serial)
}

// serialBatch bounds the serials that wait for one device read, and
// serialQuery the length of their share of each read's URL: a claim's
// serial may be 128 bytes, and NetBox behind gunicorn refuses a request
// line longer than 4,094. Serials that do not fit go in another read.
const (
	serialBatch = 100
	serialQuery = 2048
)

// readSerials reads the devices of serials in list requests
// (?serial=A&serial=B..., serialQuery bytes of serials each), and answers
// each serial as readSerial would alone. An empty serial, which NetBox's
// filter would ignore, is read alone; so is every serial of a list NetBox
// refused, so that only a caller whose serial it refuses gets that answer.
func (nb *NetBox) readSerials(ctx context.Context, serials []string) ([]*nbDevice, []error) {
	if len(serials) == 1 || slices.Contains(serials, "") {
		return each(ctx, serials, nb.readSerial)
	}
	var got []nbDevice
	for _, chunk := range serialChunks(serials, serialQuery) {
		part, err := list[nbDevice](ctx, nb, "/api/dcim/devices/", url.Values{"role": {nb.cfg.Role}, "serial": chunk})
		var refused *refusedError
		if errors.As(err, &refused) && !unknownChoice(err, "role") {
			return each(ctx, serials, nb.readSerial)
		}
		if err != nil {
			errs := make([]error, len(serials))
			for i, s := range serials {
				errs[i] = nb.serialError(s, err)
			}
			return make([]*nbDevice, len(serials)), errs
		}
		got = append(got, part...)
	}
	outs, errs := make([]*nbDevice, len(serials)), make([]error, len(serials))
	for i, s := range serials {
		outs[i], errs[i] = nb.oneSerial(s, got)
	}
	return outs, errs
}

// serialChunks splits the distinct serials into groups whose query
// encoding (serial=...&) takes at most max bytes each; a serial longer
// than max goes alone.
func serialChunks(serials []string, max int) [][]string {
	var chunks [][]string
	var chunk []string
	size := 0
	seen := make(map[string]bool, len(serials))
	for _, s := range serials {
		if seen[s] {
			continue
		}
		seen[s] = true
		n := len("serial=&") + len(url.QueryEscape(s))
		if len(chunk) > 0 && size+n > max {
			chunks, chunk, size = append(chunks, chunk), nil, 0
		}
		chunk, size = append(chunk, s), size+n
	}
	if len(chunk) > 0 {
		chunks = append(chunks, chunk)
	}
	return chunks
}

// readSerial reads the device of one serial: one request.
func (nb *NetBox) readSerial(ctx context.Context, serial string) (*nbDevice, error) {
	q := url.Values{"serial": {serial}, "role": {nb.cfg.Role}}
	var p page[nbDevice]
	if err := nb.do(ctx, http.MethodGet, "/api/dcim/devices/", q, nil, &p); err != nil {
		return nil, nb.serialError(serial, err)
	}
	return nb.oneSerial(serial, p.Results)
}

// serialError is the error of a read of serial's device that NetBox
// refused or did not answer.
func (nb *NetBox) serialError(serial string, err error) error {
	if unknownChoice(err, "role") {
		return fmt.Errorf("netbox: no device has serial %q: NetBox has no role %s: %w", serial, nb.cfg.Role, ErrNotFound)
	}
	return err
}

// oneSerial picks, from the devices NetBox listed, the one whose serial is
// exactly serial: a copy of its own for each caller.
func (nb *NetBox) oneSerial(serial string, listed []nbDevice) (*nbDevice, error) {
	var found []*nbDevice
	for i := range listed {
		if listed[i].Serial == serial {
			found = append(found, &listed[i])
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("netbox: no device of role %s has serial %q: %w", nb.cfg.Role, serial, ErrNotFound)
	case 1:
		d := *found[0]
		return &d, nil
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
// none: one request, which concurrent calls share (readIfaces).
func (nb *NetBox) iface(ctx context.Context, device int64) (*nbInterface, error) {
	return nb.ifaces.do(ctx, device)
}

// ifaceBatch bounds the devices of one interface read, and so its URL.
const ifaceBatch = 100

// readIfaces reads the interfaces named Interface of devices in one list
// request (?device_id=A&device_id=B...). NetBox refuses the whole list when
// one device does not exist; each device is then read alone, so that only
// its caller gets ErrNotFound.
func (nb *NetBox) readIfaces(ctx context.Context, devices []int64) ([]*nbInterface, []error) {
	if len(devices) == 1 {
		return each(ctx, devices, nb.readIface)
	}
	q := url.Values{"name": {nb.cfg.Interface}}
	asked := make(map[int64]bool, len(devices))
	for _, id := range devices {
		if !asked[id] {
			asked[id] = true
			q.Add("device_id", strconv.FormatInt(id, 10))
		}
	}
	got, err := list[nbInterface](ctx, nb, "/api/dcim/interfaces/", q)
	if unknownChoice(err, "device_id") {
		return each(ctx, devices, nb.readIface)
	}
	outs := make([]*nbInterface, len(devices))
	if err != nil {
		return outs, all(len(devices), err)
	}
	byDevice := make(map[int64]*nbInterface, len(got))
	for i := range got {
		byDevice[got[i].Device.ID] = &got[i]
	}
	for i, id := range devices {
		outs[i] = byDevice[id]
	}
	return outs, make([]error, len(devices))
}

// readIface reads one device's interface named Interface.
func (nb *NetBox) readIface(ctx context.Context, device int64) (*nbInterface, error) {
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
	req := netbox.NewPatchedWritableDeviceWithConfigContextRequest()
	req.CustomFields = customFields(fields)
	return nb.patchDevice(ctx, id, req)
}

// customFields returns fields as a write sends them: a "" value is null,
// which clears its field.
func customFields(fields map[string]any) map[string]any {
	cf := make(map[string]any, len(fields))
	for k, v := range fields {
		if s, ok := v.(string); ok && s == "" {
			v = nil
		}
		cf[k] = v
	}
	return cf
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

// Update is one write of fleet's fields of a device, which UpdateDevice
// makes in one request. A nil field is left as it is.
type Update struct {
	// Attestation, when not nil, sets attested_ek_hash,
	// attested_ek_hash_ecc, attested_switch_port, attested_at,
	// attest_verdict, attested_secure_boot and attested_pcr7 from it. Its MAC is not written: RecordMAC writes it,
	// and must come first, so that a device whose verdict says attested
	// holds its MAC.
	Attestation *Attestation
	// LastRun, when not nil, sets last_run; "" clears it.
	LastRun *string
	// DesiredAction, when not nil, sets desired_action; "" clears it.
	DesiredAction *string
}

// UpdateDevice writes u to device id in one request (a PATCH of its custom
// fields, which leaves the others as they are); an Update that sets
// nothing sends nothing. Concurrent calls share requests: the Updates that
// wait while another is sent go together in one bulk update, BulkSize
// devices a request. A bulk update item must carry the device's device
// type, role and site, so a device goes in one only when this client read
// it in the last minute (DeviceBySerial, Device, Devices,
// DevicesWithDesiredAction, DeviceBinding), and carries what it read: a
// device moved to another device type, role or site in between is moved
// back. A device it has not read is written alone, with a PATCH of its
// own.
//
// When NetBox refuses a bulk update, each of its Updates is sent again
// alone, so that each caller gets NetBox's answer to its own; when NetBox
// does not answer, each caller gets ErrUnavailable. A device NetBox does
// not have is ErrNotFound. A caller whose ctx ends while it waits gets
// ctx's error, and its Update may still be written.
func (nb *NetBox) UpdateDevice(ctx context.Context, id int64, u Update) error {
	fields := map[string]any{}
	if a := u.Attestation; a != nil {
		fields[cfAttestedEKHash] = a.EKHash
		fields[cfAttestedEKHashECC] = a.EKHashECC
		fields[cfAttestedSwitchPort] = nil
		fields[cfAttestedAt] = nil
		fields[cfAttestVerdict] = a.Verdict
		fields[cfAttestedSecureBoot] = nil
		fields[cfAttestedPCR7] = nil
		if a.SecureBoot != "" {
			fields[cfAttestedSecureBoot] = a.SecureBoot
		}
		if a.PCR7 != "" {
			fields[cfAttestedPCR7] = a.PCR7
		}
		if a.SwitchPort > 0 {
			fields[cfAttestedSwitchPort] = a.SwitchPort
		}
		if !a.At.IsZero() {
			fields[cfAttestedAt] = a.At.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
		}
	}
	if u.LastRun != nil {
		fields[cfLastRun] = *u.LastRun
	}
	if u.DesiredAction != nil {
		fields[cfDesiredAction] = *u.DesiredAction
	}
	if len(fields) == 0 {
		return nil
	}
	_, err := nb.updates.do(ctx, deviceUpdate{device: id, fields: fields})
	return err
}

// JournalEntry is one line of a device's journal.
type JournalEntry struct {
	Device int64 // NetBox's device ID
	Kind   JournalKind
	Text   string // must not be empty
}

// Journal adds a journal entry of the given kind to device id. The text
// must not be empty. It costs one request, which concurrent calls share:
// entries that wait while another is sent go together in one bulk create
// (as JournalEntries), BulkSize a request.
func (nb *NetBox) Journal(ctx context.Context, id int64, kind JournalKind, text string) error {
	e := JournalEntry{Device: id, Kind: kind, Text: text}
	if _, err := journalRequest(e); err != nil {
		return err
	}
	_, err := nb.journals.do(ctx, e)
	return err
}

// JournalHas reports whether device id's journal holds an entry of kind
// whose text is exactly text: what a writer that may have written the
// entry before it was stopped asks before writing it again. It costs one
// request, NetBox's search (q) of the device's entries of that kind, and
// reads the first page (PageSize entries) of those whose text contains
// text.
func (nb *NetBox) JournalHas(ctx context.Context, id int64, kind JournalKind, text string) (bool, error) {
	if _, err := journalRequest(JournalEntry{Device: id, Kind: kind, Text: text}); err != nil {
		return false, err
	}
	q := url.Values{
		"assigned_object_type": {typeDevice},
		"assigned_object_id":   {strconv.FormatInt(id, 10)},
		"kind":                 {string(kind)},
		"q":                    {text},
		"limit":                {strconv.Itoa(nb.cfg.PageSize)},
	}
	var p page[struct {
		Comments string `json:"comments"`
	}]
	if err := nb.do(ctx, http.MethodGet, "/api/extras/journal-entries/", q, nil, &p); err != nil {
		return false, err
	}
	for _, e := range p.Results {
		if e.Comments == text {
			return true, nil
		}
	}
	return false, nil
}

// JournalEntries adds entries to their devices' journals, in their order,
// with NetBox's bulk create (POST /api/extras/journal-entries/ with a
// list): one request per BulkSize entries, each taken whole or not at all,
// and a lone entry as Journal sends it. It returns how many entries, from
// the first, NetBox holds; entries[written:] are not written. An entry
// without text or of an unknown kind is refused before any request.
func (nb *NetBox) JournalEntries(ctx context.Context, entries []JournalEntry) (written int, err error) {
	reqs := make([]any, len(entries))
	for i, e := range entries {
		r, err := journalRequest(e)
		if err != nil {
			return 0, fmt.Errorf("journal entry %d of %d: %w", i+1, len(entries), err)
		}
		reqs[i] = r
	}
	for start := 0; start < len(reqs); start += nb.cfg.BulkSize {
		chunk := reqs[start:min(start+nb.cfg.BulkSize, len(reqs))]
		if len(chunk) == 1 {
			if _, err := nb.journalOne(ctx, entries[start]); err != nil {
				return written, err
			}
			written++
			continue
		}
		const what = "POST /api/extras/journal-entries/"
		var out []struct {
			ID int64 `json:"id"`
		}
		if err := nb.do(ctx, http.MethodPost, "/api/extras/journal-entries/", nil, chunk, &out); err != nil {
			return written, err
		}
		if len(out) != len(chunk) {
			return written, fmt.Errorf("netbox: %s: %d entries answered for %d written", what, len(out), len(chunk))
		}
		written += len(chunk)
	}
	return written, nil
}

// journalRequest checks e and makes its request.
func journalRequest(e JournalEntry) (*netbox.WritableJournalEntryRequest, error) {
	k, err := netbox.NewJournalEntryKindValueFromValue(string(e.Kind))
	if err != nil {
		return nil, fmt.Errorf("netbox: %q is not a journal entry kind", e.Kind)
	}
	if strings.TrimSpace(e.Text) == "" {
		return nil, errors.New("netbox: a journal entry needs text")
	}
	req := netbox.NewWritableJournalEntryRequest(typeDevice, e.Device, e.Text)
	req.Kind = k
	return req, nil
}

// journalOne adds one journal entry (one request).
func (nb *NetBox) journalOne(ctx context.Context, e JournalEntry) (struct{}, error) {
	req, err := journalRequest(e)
	if err != nil {
		return struct{}{}, err
	}
	what := "POST /api/extras/journal-entries/"
	ctx, cancel := nb.withTimeout(ctx)
	defer cancel()
	_, rsp, err := nb.api.ExtrasAPI.ExtrasJournalEntriesCreate(ctx).WritableJournalEntryRequest(*req).Execute()
	return struct{}{}, apiError(what, rsp, err)
}

// journalBatch writes the entries of concurrent Journal calls in one bulk
// create. When NetBox refuses it (one entry names a device it does not
// have), each entry is sent alone, so that only its caller gets the
// refusal.
func (nb *NetBox) journalBatch(ctx context.Context, es []JournalEntry) ([]struct{}, []error) {
	if len(es) == 1 {
		return each(ctx, es, nb.journalOne)
	}
	_, err := nb.JournalEntries(ctx, es)
	var re *refusedError
	if errors.As(err, &re) {
		return each(ctx, es, nb.journalOne)
	}
	return make([]struct{}, len(es)), all(len(es), err)
}

// RecordAttestation records what an attestation of device id proved: the
// MAC as RecordMAC records it, then the attested_* fields and
// attest_verdict (UpdateDevice), in that order, so a device whose verdict
// says attested holds its MAC. Two to four requests; writing the same
// attestation again changes nothing but attested_at. A device without its
// interface is ErrNotFound: its nodes file entry has not been applied.
func (nb *NetBox) RecordAttestation(ctx context.Context, id int64, a Attestation) error {
	if len(a.MAC) > 0 {
		if err := nb.RecordMAC(ctx, id, a.MAC); err != nil {
			return err
		}
	}
	return nb.UpdateDevice(ctx, id, Update{Attestation: &a})
}

// RecordMAC makes mac the primary MAC of device id's interface: it reads
// the interface (one request), and unless mac already is its primary MAC,
// creates mac as a MAC address object assigned to it (unless it has one)
// and makes that its primary MAC: one to three requests, the last two only
// when the MAC is new to the device. Concurrent calls share requests: the
// interfaces of a batch are read in one request, their new MAC objects
// made in one bulk create, and their primary MACs set in one bulk update,
// BulkSize devices a batch. A device without its interface is ErrNotFound:
// its nodes file entry has not been applied.
func (nb *NetBox) RecordMAC(ctx context.Context, id int64, mac net.HardwareAddr) error {
	if len(mac) == 0 {
		return errors.New("netbox: no MAC to record")
	}
	_, err := nb.macs.do(ctx, macRecord{device: id, mac: mac.String()})
	return err
}

// RecordDeviceMAC records mac on device d.ID as RecordMAC does, in the
// same requests, and returns d with what its interface holds then: its MAC
// and SwitchPort. A nil mac records nothing: d's interface is only read
// (one request, which concurrent calls share too). A caller that read d
// without its interface (DeviceBinding) thus completes it.
func (nb *NetBox) RecordDeviceMAC(ctx context.Context, d Device, mac net.HardwareAddr) (Device, error) {
	r := macRecord{device: d.ID}
	if len(mac) > 0 {
		r.mac = mac.String()
	}
	i, err := nb.macs.do(ctx, r)
	if err != nil {
		return Device{}, err
	}
	nb.viewInterface(&d, i)
	return d, nil
}

// macRecord is one RecordMAC call; mac "" only reads the interface.
type macRecord struct {
	device int64
	mac    string
}

// noInterface is the error of a device without its interface.
func (nb *NetBox) noInterface(device int64) error {
	return fmt.Errorf("netbox: device %d has no interface %s to hold its MAC: apply its entry in the nodes file: %w", device, nb.cfg.Interface, ErrNotFound)
}

// macOf returns the ID of the interface's MAC object of mac, 0 when it
// has none, and whether mac already is the interface's primary MAC (or is
// "": none to record).
func macOf(i *nbInterface, mac string) (id int64, primary bool) {
	if mac == "" {
		return 0, true
	}
	if i.PrimaryMAC != nil && sameMAC(i.PrimaryMAC.MACAddress, mac) {
		return i.PrimaryMAC.ID, true
	}
	for _, m := range i.MACAddresses {
		if sameMAC(m.MACAddress, mac) {
			id = m.ID
		}
	}
	return id, false
}

// recordMACs records the MACs of concurrent RecordMAC calls: one read of
// their interfaces, one bulk create of the MAC objects they lack, one bulk
// update of their primary MACs. Each caller gets its interface as it is
// then. A write NetBox refuses as a whole is done again for each device
// alone, so that only the caller whose write NetBox refuses gets the
// refusal. A device asked for twice is recorded alone, after the others.
func (nb *NetBox) recordMACs(ctx context.Context, recs []macRecord) ([]*nbInterface, []error) {
	if len(recs) == 1 {
		return each(ctx, recs, nb.recordMAC)
	}
	// Read the interfaces of the batch's devices, each device once, and
	// see what each lacks.
	first, again := firstOfEach(recs, func(r macRecord) int64 { return r.device })
	devices := make([]int64, len(first))
	for k, i := range first {
		devices[k] = recs[i].device
	}
	ifaces, ierrs := nb.readIfaces(ctx, devices)
	outs, errs, pending := planMACs(recs, first, ifaces, ierrs, nb.noInterface)

	// Write what they lack in two bulk requests; when NetBox refuses one,
	// each device alone, and when it does not answer, each caller gets
	// that.
	err := nb.writeMACs(ctx, pending)
	for _, w := range pending {
		switch {
		case err == nil:
			outs[w.i] = withPrimary(w.iface, w.macID, w.mac)
		case errors.Is(err, ErrUnavailable):
			errs[w.i] = err
		default:
			outs[w.i], errs[w.i] = nb.recordMAC(ctx, recs[w.i])
		}
	}

	// A device asked for twice: alone, now that its first call is done.
	for _, i := range again {
		outs[i], errs[i] = nb.recordMAC(ctx, recs[i])
	}
	return outs, errs
}

// firstOfEach splits a batch into the index of each device's first call,
// in order, and the indexes of the calls that ask for a device again.
func firstOfEach[T any](calls []T, device func(T) int64) (first, again []int) {
	seen := make(map[int64]bool, len(calls))
	for i, c := range calls {
		if seen[device(c)] {
			again = append(again, i)
			continue
		}
		seen[device(c)] = true
		first = append(first, i)
	}
	return first, again
}

// macWork is a call of a batch whose MAC is not yet its interface's
// primary MAC.
type macWork struct {
	i     int          // the call's index in the batch
	iface *nbInterface // the interface as read
	mac   string
	macID int64 // the interface's MAC object of mac; 0 until it is made
}

// planMACs judges the calls first of batch recs by what one read of their
// interfaces answered (ifaces and ierrs, one each, in first's order). Each
// call gets its interface, or the read's error, or, when it has none and
// has a MAC to record, noIface's error; pending are the calls whose MAC is
// not their interface's primary MAC. It does no I/O.
func planMACs(recs []macRecord, first []int, ifaces []*nbInterface, ierrs []error, noIface func(device int64) error) (outs []*nbInterface, errs []error, pending []macWork) {
	outs, errs = make([]*nbInterface, len(recs)), make([]error, len(recs))
	for k, i := range first {
		switch {
		case ierrs[k] != nil:
			errs[i] = ierrs[k]
		case ifaces[k] == nil && recs[i].mac != "":
			errs[i] = noIface(recs[i].device)
		case ifaces[k] != nil:
			outs[i] = ifaces[k]
			if id, primary := macOf(ifaces[k], recs[i].mac); !primary {
				pending = append(pending, macWork{i: i, iface: ifaces[k], mac: recs[i].mac, macID: id})
			}
		}
	}
	return outs, errs, pending
}

// writeMACs makes the MAC objects that pending lacks in one bulk create,
// setting their macID, then each pending MAC its interface's primary MAC
// in one bulk update.
func (nb *NetBox) writeMACs(ctx context.Context, pending []macWork) error {
	if creates, made := macCreates(pending); len(creates) > 0 {
		var out []nbMAC
		err := nb.do(ctx, http.MethodPost, "/api/dcim/mac-addresses/", nil, creates, &out)
		if err == nil && len(out) != len(creates) {
			err = fmt.Errorf("netbox: POST /api/dcim/mac-addresses/: %d objects answered for %d written", len(out), len(creates))
		}
		if err != nil {
			return err
		}
		for k, w := range made {
			pending[w].macID = out[k].ID
		}
	}
	patches, err := primaryPatches(pending)
	if err != nil || len(patches) == 0 {
		return err
	}
	var out []struct {
		ID int64 `json:"id"`
	}
	return nb.do(ctx, http.MethodPatch, "/api/dcim/interfaces/", nil, patches, &out)
}

// macCreates returns the bulk create of the MAC objects that pending
// lacks (macID 0), each assigned to its interface, and the index in
// pending of each.
func macCreates(pending []macWork) (creates []any, made []int) {
	for k, w := range pending {
		if w.macID != 0 {
			continue
		}
		req := netbox.NewMACAddressRequest(w.mac)
		req.SetAssignedObjectType(typeInterface)
		req.SetAssignedObjectId(w.iface.ID)
		creates = append(creates, req)
		made = append(made, k)
	}
	return creates, made
}

// primaryPatches returns the bulk update that makes each pending MAC
// object its interface's primary MAC. NetBox's schema for a bulk update
// item requires device, name and type: each carries its interface's own.
func primaryPatches(pending []macWork) ([]any, error) {
	var patches []any
	for _, w := range pending {
		dev, err := ref32(w.iface.Device.ID)
		if err != nil {
			return nil, err
		}
		typ, err := netbox.NewInterfaceTypeValueFromValue(w.iface.Type.Value)
		if err != nil {
			return nil, fmt.Errorf("netbox: interface %d has type %q: %w", w.iface.ID, w.iface.Type.Value, err)
		}
		m32, err := ref32(w.macID)
		if err != nil {
			return nil, err
		}
		req := netbox.NewInterfaceRequest(netbox.Int32AsBriefInterfaceRequestDevice(dev), w.iface.Name, *typ)
		req.SetPrimaryMacAddress(netbox.Int32AsInterfaceRequestPrimaryMacAddress(m32))
		req.AdditionalProperties = map[string]any{"id": w.iface.ID}
		patches = append(patches, req)
	}
	return patches, nil
}

// withPrimary returns a copy of i whose primary MAC is the MAC object id
// of mac, as NetBox holds it after the write.
func withPrimary(i *nbInterface, id int64, mac string) *nbInterface {
	c := *i
	c.PrimaryMAC = &nbMAC{ID: id, MACAddress: mac}
	return &c
}

// recordMAC records one device's MAC, in one to three requests, and
// returns its interface as it is then (nil when it has none and mac is "").
func (nb *NetBox) recordMAC(ctx context.Context, r macRecord) (*nbInterface, error) {
	device, mac := r.device, r.mac
	i, err := nb.readIface(ctx, device)
	if err != nil {
		return nil, err
	}
	if i == nil {
		if mac == "" {
			return nil, nil
		}
		return nil, nb.noInterface(device)
	}
	macID, primary := macOf(i, mac)
	if primary {
		return i, nil
	}
	ifaceID, err := id32(i.ID)
	if err != nil {
		return nil, err
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
			return nil, err
		}
		macID = int64(created.Id)
	}
	m32, err := id32(macID)
	if err != nil {
		return nil, err
	}
	req := netbox.NewPatchedWritableInterfaceRequest()
	req.SetPrimaryMacAddress(netbox.Int32AsInterfaceRequestPrimaryMacAddress(&m32))
	what := fmt.Sprintf("PATCH /api/dcim/interfaces/%d/", i.ID)
	cctx, cancel := nb.withTimeout(ctx)
	defer cancel()
	_, rsp, err := nb.api.DcimAPI.DcimInterfacesPartialUpdate(cctx, ifaceID).PatchedWritableInterfaceRequest(*req).Execute()
	if err := apiError(what, rsp, err); err != nil {
		return nil, err
	}
	return withPrimary(i, macID, mac), nil
}

// sameMAC compares MACs in any notation NetBox or net.HardwareAddr writes.
func sameMAC(a, b string) bool {
	norm := func(s string) []byte {
		return []byte(strings.ToLower(strings.NewReplacer(":", "", "-", "", ".", "").Replace(s)))
	}
	return bytes.Equal(norm(a), norm(b))
}
