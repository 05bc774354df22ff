package inventory

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// A refusal is journaled on its device at most once per Every for each
// kind and serial, in the caller's words; a duplicate serial on every
// device that holds it.
func TestRefusalJournal(t *testing.T) {
	srv, nb, devs := appliedFleet(t)
	q := NewJournalQueue(nb, nil)
	defer q.Close(t.Context())
	r := NewRefusalJournal(nb, q, &RefusalJournalConfig{Name: "fleetd"})
	now := time.Unix(1767225600, 0)
	w01, cp01 := devs["w-01"], devs["cp-01"]

	for _, at := range []time.Duration{0, time.Minute, DefaultRefusalEvery - time.Second, DefaultRefusalEvery} {
		r.Unauthored(w01.Serial, now.Add(at))
	}
	r.Unauthored(cp01.Serial, now) // another serial: its own throttle
	dup := &DuplicateSerialError{Serial: "MS01-0002", Devices: []DeviceRef{{cp01.ID, "cp-01"}, {w01.ID, "w-01"}}}
	r.DuplicateSerial(dup, now)
	r.DuplicateSerial(dup, now.Add(time.Minute))
	noErr(t, q.Flush(t.Context()))

	unauthored := "attest: FAILED ek-binding-unauthored: NetBox's changelog does not show bindingAuthor terraform writing the approved EK binding; another user edited it, or the changelog lost the record, and fleetd admitted nothing. Restore the binding from git: remove the lines, apply, add them back and apply"
	duplicate := fmt.Sprintf(`attest: FAILED: NetBox holds more than one device with serial "MS01-0002": cp-01 (id %d), w-01 (id %d); fleetd cannot tell which one's approved EK binding to judge, and admitted nothing. Correct the serial of each device whose machine does not report it (a device left from an earlier entry keeps its serial in NetBox), then power-cycle the machine`, cp01.ID, w01.ID)
	for _, tc := range []struct {
		dev  Device
		want []string
	}{
		{w01, []string{unauthored, unauthored, duplicate}},
		{cp01, []string{unauthored, duplicate}},
	} {
		got := journalOf(srv, tc.dev.ID, "attest: ")
		slices.Sort(got) // compared in any order
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s's journal:\n%q\nwant\n%q", tc.dev.Name, got, tc.want)
		}
	}

	if got := unauthoredLine(DefaultRefusalName, ""); got != "attest: FAILED ek-binding-unauthored: NetBox's changelog does not show the binding author (bindingAuthor is unset) writing the approved EK binding; another user edited it, or the changelog lost the record, and the attestation server admitted nothing. Restore the binding from git: remove the lines, apply, add them back and apply" {
		t.Errorf("the line without a binding author: %q", got)
	}
}
