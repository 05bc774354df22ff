package inventory

import (
	"context"
	"net/url"
	"strconv"
)

// Binding is what the attestation server needs of one serial's device: the
// approved EK binding and whether the binding author wrote it.
// BindingBySerial reads it in two requests.
type Binding struct {
	ID     int64  // NetBox's device ID
	Name   string // host name
	Status Status

	ApprovedEKHash    string // approved_ek_hash; "" when unset
	ApprovedEKHashECC string // approved_ek_hash_ecc; "" when unset

	// Authored reports that NetBox's changelog shows the configured binding
	// author (NetBoxConfig.BindingAuthor) making the last write of each
	// approved_ek_* field that holds a value, and no other user's write of
	// either field since. It holds for an empty binding too: one never
	// written (a device planned without approvals) or one the author
	// cleared is authored. It fails closed: false when the author is unset
	// (even for an empty binding), when another user wrote either field last
	// (even to clear it, so that a binding another user cleared is not
	// authored), and when no record of a current value remains (the
	// changelog lost it, e.g. to CHANGELOG_RETENTION).
	Authored bool
}

// BindingBySerial returns the binding of fleet's device (of role Role)
// whose serial is serial: the device list filtered by serial, then the
// device's changelog (core/object-changes filtered by the device), newest
// first, PageSize records per request. That is two requests, unless more
// than PageSize changes of the device came after its binding was last
// written, when the changelog is read on until the binding's writes are
// found (an empty binding never written is read to the changelog's end).
// Concurrent calls share the device list: their serials go in one request
// (?serial=A&serial=B...), as many as come while another is sent.
// No such device is ErrNotFound; more than one is a *DuplicateSerialError
// (errors.Is finds ErrDuplicateSerial) naming them all, and no changelog
// is read.
func (nb *NetBox) BindingBySerial(ctx context.Context, serial string) (Binding, error) {
	_, b, err := nb.DeviceBinding(ctx, serial)
	return b, err
}

// DeviceBinding returns the binding of serial's device as BindingBySerial
// does, in its requests, and the device as it read it: the Device that
// DeviceBySerial returns, but without what the device's interface holds
// (MAC and SwitchPort are zero; WithInterface reads them). A caller that
// admits the machine after judging its binding need not read the device
// again.
func (nb *NetBox) DeviceBinding(ctx context.Context, serial string) (Device, Binding, error) {
	d, err := nb.deviceBySerial(ctx, serial)
	if err != nil {
		return Device{}, Binding{}, err
	}
	b := Binding{
		ID:                d.ID,
		Name:              d.name(),
		Status:            Status(d.Status.Value),
		ApprovedEKHash:    string(d.CustomFields.ApprovedEKHash),
		ApprovedEKHashECC: string(d.CustomFields.ApprovedEKHashECC),
	}
	b.Authored, err = nb.authored(ctx, b.ID, b.ApprovedEKHash, b.ApprovedEKHashECC)
	if err != nil {
		return Device{}, b, err
	}
	return nb.view(d, nil), b, nil
}

// BindingAuthored reports whether NetBox's changelog shows the configured
// binding author writing d's current approved_ek_hash and
// approved_ek_hash_ecc, as Binding.Authored defines it (failing closed). It
// reads the device's changelog: one request, unless the device changed
// more than PageSize times since its binding was written.
func (nb *NetBox) BindingAuthored(ctx context.Context, d Device) (bool, error) {
	return nb.authored(ctx, d.ID, d.ApprovedEKHash, d.ApprovedEKHashECC)
}

// authored walks the device's changelog, newest first, to the last write
// of each binding field, and judges the binding against the current values
// rsa and ecc. An empty binding is judged too: its author may have cleared
// it, or another user.
func (nb *NetBox) authored(ctx context.Context, id int64, rsa, ecc string) (bool, error) {
	if nb.cfg.BindingAuthor == "" {
		return false, nil
	}
	j := bindingJudge{author: nb.cfg.BindingAuthor, current: map[string]string{cfApprovedEKHash: rsa, cfApprovedEKHashECC: ecc}}
	q := url.Values{
		"changed_object_type": {typeDevice},
		"changed_object_id":   {strconv.FormatInt(id, 10)},
		"ordering":            {"-time"},
		"limit":               {strconv.Itoa(nb.cfg.PageSize)},
	}
	for offset := 0; ; {
		if offset > 0 {
			q.Set("offset", strconv.Itoa(offset))
		}
		var p page[nbChange]
		if err := nb.do(ctx, "GET", "/api/core/object-changes/", q, nil, &p); err != nil {
			return false, err
		}
		for i := range p.Results {
			if j.see(&p.Results[i]) {
				return j.verdict(), nil
			}
		}
		offset += len(p.Results)
		if p.Next == nil || len(p.Results) == 0 || offset >= p.Count {
			return j.verdict(), nil
		}
	}
}

// bindingJudge finds, in a device's changelog read newest first, the last
// write of each binding field.
type bindingJudge struct {
	author  string
	current map[string]string // field -> current value
	found   map[string]bool
	bad     bool // a last write was another user's, or left another value
}

// see takes the next older change; it reports true when the verdict is
// known.
func (j *bindingJudge) see(c *nbChange) bool {
	if j.found == nil {
		j.found = map[string]bool{}
	}
	if c.Post == nil { // a deletion
		return false
	}
	for f, cur := range j.current {
		if j.found[f] {
			continue
		}
		post := string(c.Post.CustomFields[f])
		pre := ""
		if c.Pre != nil {
			pre = string(c.Pre.CustomFields[f])
		}
		if post == pre {
			continue // this change did not write f
		}
		j.found[f] = true
		if c.UserName != j.author || post != cur {
			j.bad = true
			return true
		}
	}
	return len(j.found) == len(j.current)
}

// verdict judges after the changelog is read as far as needed: a field
// never written must be empty.
func (j *bindingJudge) verdict() bool {
	if j.bad {
		return false
	}
	for f, cur := range j.current {
		if !j.found[f] && cur != "" {
			return false
		}
	}
	return true
}
