package inventory

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetkit/fleet/inventory/netboxtest"
)

func TestBindingAuthorship(t *testing.T) {
	for _, c := range []struct {
		name     string
		serial   string
		cfg      *NetBoxConfig
		then     func(t *testing.T, tc *bindingCase)
		authored bool
	}{
		{name: "written by the author", serial: "MS01-0001", authored: true},
		{name: "one EK approved, written by the author", serial: "MS01-0002", authored: true},
		{name: "no EK approved, never written", serial: "G6NUC13-88121", authored: true},
		{name: "author unset", serial: "MS01-0001", cfg: &NetBoxConfig{}, authored: false},
		{name: "no EK approved, author unset", serial: "G6NUC13-88121", cfg: &NetBoxConfig{}, authored: false},
		{
			name: "both approvals cleared by another user", serial: "MS01-0001", authored: false,
			then: func(t *testing.T, tc *bindingCase) {
				aliceSets(cfApprovedEKHash, nil, cfApprovedEKHashECC, nil)(t, tc)
				tc.wantRSA, tc.wantECC, tc.checkValues = "", "", true
			},
		},
		{
			name: "both approvals cleared by the author", serial: "MS01-0001", authored: true,
			then: func(t *testing.T, tc *bindingCase) {
				applied(t, tc.terraform, parseNodes(t, withoutBinding(fleetNodes)))
				tc.wantRSA, tc.wantECC, tc.checkValues = "", "", true
			},
		},
		{
			name: "both approvals cleared by another user, then by the author", serial: "MS01-0001", authored: true,
			then: func(t *testing.T, tc *bindingCase) {
				aliceSets(cfApprovedEKHash, nil, cfApprovedEKHashECC, nil)(t, tc)
				// The nodes file still approves the EKs: the apply writes
				// them back, and the next apply clears them as the author.
				applied(t, tc.terraform, parseNodes(t, fleetNodes))
				applied(t, tc.terraform, parseNodes(t, withoutBinding(fleetNodes)))
				tc.wantRSA, tc.wantECC, tc.checkValues = "", "", true
			},
		},
		{
			name: "an EK approved by another user on a device planned without approvals, then cleared", serial: "G6NUC13-88121", authored: false,
			then: func(t *testing.T, tc *bindingCase) {
				aliceSets(cfApprovedEKHash, hashD, cfApprovedEKHash, nil)(t, tc)
				tc.checkValues = true
			},
		},
		{name: "another author configured", serial: "MS01-0001", cfg: &NetBoxConfig{BindingAuthor: userAlice}, authored: false},
		{name: "edited afterwards by another user", serial: "MS01-0001", authored: false, then: aliceSets(cfApprovedEKHash, hashC)},
		{name: "the other EK edited by another user", serial: "MS01-0001", authored: false, then: aliceSets(cfApprovedEKHashECC, hashC)},
		{name: "an approval cleared by another user", serial: "MS01-0001", authored: false, then: aliceSets(cfApprovedEKHashECC, nil)},
		{name: "an EK added by another user", serial: "MS01-0002", authored: false, then: aliceSets(cfApprovedEKHashECC, hashA)},
		{
			name: "edited by another user and changed back", serial: "MS01-0001", authored: false,
			then: aliceSets(cfApprovedEKHash, hashC, cfApprovedEKHash, hashA),
		},
		{
			name: "another user writes the same value: nothing changes", serial: "MS01-0001", authored: true,
			then: aliceSets(cfApprovedEKHash, hashA),
		},
		{
			name: "other fields edited by other users", serial: "MS01-0001", authored: true,
			then: func(t *testing.T, tc *bindingCase) {
				tc.edit(t, userAlice, cfDesiredAction, DesiredActionProvision)
				fleetd := client(t, tc.srv, userFleetd, nil)
				noErr(t, fleetd.RecordAttestation(t.Context(), tc.id, Attestation{EKHash: hashA, Verdict: "attested", At: time.Now()}))
				noErr(t, fleetd.SetStatus(t.Context(), tc.id, StatusActive))
			},
		},
		{
			name: "changelog record missing", serial: "MS01-0001", authored: false,
			then: func(t *testing.T, tc *bindingCase) {
				if n := tc.srv.ForgetChanges(typeDevice, tc.id); n == 0 {
					t.Fatal("no changelog records to forget")
				}
			},
		},
		{
			name: "the author's user deleted: NetBox keeps its name", serial: "MS01-0001", authored: true,
			then: func(t *testing.T, tc *bindingCase) { tc.srv.DeleteUser(userTerraform) },
		},
		{
			name: "restored from git after another user's edit", serial: "MS01-0001", authored: true,
			then: func(t *testing.T, tc *bindingCase) {
				tc.edit(t, userAlice, cfApprovedEKHash, hashC)
				// The runbook: remove the lines, apply, add them back and
				// apply, so that Terraform writes the binding again.
				applied(t, tc.terraform, parseNodes(t, withoutBinding(fleetNodes)))
				applied(t, tc.terraform, parseNodes(t, fleetNodes))
			},
		},
		{
			name: "re-approved by the author after a board swap", serial: "MS01-0001", authored: true,
			then: func(t *testing.T, tc *bindingCase) {
				swapped := strings.Replace(fleetNodes, "approved_ek_eccp256: "+hashB, "approved_ek_eccp256: "+hashD, 1)
				applied(t, tc.terraform, parseNodes(t, swapped))
				tc.wantECC = hashD
				tc.checkValues = true
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			tc := newBindingCase(t, c.serial)
			if c.then != nil {
				c.then(t, tc)
			}
			cfg := NetBoxConfig{BindingAuthor: userTerraform}
			if c.cfg != nil {
				cfg = *c.cfg
			}
			nb := client(t, tc.srv, userFleetd, &cfg)
			tc.srv.ResetRequests()
			b, err := nb.BindingBySerial(t.Context(), c.serial)
			noErr(t, err)
			// The device, then its changelog, even for an empty binding
			// (another user may have cleared it); the changelog only when
			// there is an author to look for.
			want := 2
			if cfg.BindingAuthor == "" {
				want = 1
			}
			if n := tc.srv.RequestCount(); n != want {
				t.Errorf("BindingBySerial made %d requests, want %d: %v", n, want, tc.srv.Requests())
			}
			if b.Authored != c.authored {
				t.Errorf("Authored = %v, want %v", b.Authored, c.authored)
			}
			if b.ID != tc.id || b.Name == "" || b.Status == "" {
				t.Errorf("binding %+v does not name device %d", b, tc.id)
			}
			if (c.then == nil || tc.checkValues) && (b.ApprovedEKHash != tc.wantRSA || b.ApprovedEKHashECC != tc.wantECC) {
				t.Errorf("binding %q/%q, want %q/%q", b.ApprovedEKHash, b.ApprovedEKHashECC, tc.wantRSA, tc.wantECC)
			}
			// BindingAuthored agrees, from a Device.
			d, err := nb.DeviceBySerial(t.Context(), c.serial)
			noErr(t, err)
			got, err := nb.BindingAuthored(t.Context(), d)
			noErr(t, err)
			if got != c.authored {
				t.Errorf("BindingAuthored = %v, want %v", got, c.authored)
			}
		})
	}
}

type bindingCase struct {
	srv              *netboxtest.Server
	terraform        *NetBox
	id               int64
	wantRSA, wantECC string
	checkValues      bool // compare the binding's values after then
}

// withoutBinding is the nodes file nodes with cp-01's approved EK lines
// removed.
func withoutBinding(nodes string) string {
	return strings.Replace(strings.Replace(nodes, "    approved_ek_rsa2048: "+hashA+"\n", "", 1), "    approved_ek_eccp256: "+hashB+"\n", "", 1)
}

// hashD is an EK hash no node of fleetNodes approves.
const hashD = "c27b93035afbcb6bdfd2d95501d1ffc89ded34b8e343ec6f90ae4c2cd7533434"

func (tc *bindingCase) edit(t *testing.T, user, field string, value any) {
	t.Helper()
	noErr(t, tc.srv.EditCustomField(user, tc.id, field, value))
}

// aliceSets is a case's then: alice sets each field to its value, in
// turn (fieldValues holds field, value, field, value...).
func aliceSets(fieldValues ...any) func(*testing.T, *bindingCase) {
	return func(t *testing.T, tc *bindingCase) {
		t.Helper()
		for i := 0; i+1 < len(fieldValues); i += 2 {
			tc.edit(t, userAlice, fieldValues[i].(string), fieldValues[i+1])
		}
	}
}

func newBindingCase(t *testing.T, serial string) *bindingCase {
	srv, terraform := terraformFleet(t)
	d, err := terraform.DeviceBySerial(t.Context(), serial)
	noErr(t, err)
	return &bindingCase{srv: srv, terraform: terraform, id: d.ID, wantRSA: d.ApprovedEKHash, wantECC: d.ApprovedEKHashECC}
}

// A device that changed more often than a page of its changelog since its
// binding was written is judged from the pages that follow.
func TestBindingAuthoredReadsOlderPages(t *testing.T) {
	tc := newBindingCase(t, "MS01-0001")
	fleetd := client(t, tc.srv, userFleetd, &NetBoxConfig{BindingAuthor: userTerraform, PageSize: 3})
	for i := range 7 {
		noErr(t, fleetd.SetLastRun(t.Context(), tc.id, "provision-cp-01-"+string(rune('a'+i))))
	}
	b, err := fleetd.BindingBySerial(t.Context(), "MS01-0001")
	noErr(t, err)
	if !b.Authored {
		t.Error("a binding written before 7 other changes is not authored")
	}
	tc.edit(t, userAlice, cfApprovedEKHash, hashC)
	for i := range 7 {
		noErr(t, fleetd.SetLastRun(t.Context(), tc.id, "provision-cp-01-x"+string(rune('a'+i))))
	}
	if b, err = fleetd.BindingBySerial(t.Context(), "MS01-0001"); err != nil || b.Authored {
		t.Errorf("another user's edit 7 changes back: Authored %v, %v", b.Authored, err)
	}
}

// A serial that more than one of fleet's devices holds names no binding:
// the error names the serial and every device, and no changelog is read.
func TestBindingBySerialDuplicateSerial(t *testing.T) {
	srv, fleetd, devs := appliedFleet(t)
	// An operator gives w-02 the serial of w-01.
	noErr(t, srv.Update(userAlice, "/api/dcim/devices/", map[string]any{"id": devs["w-02"].ID, "serial": "MS01-0002"}))
	srv.ResetRequests()
	_, err := fleetd.BindingBySerial(t.Context(), "MS01-0002")
	want := &DuplicateSerialError{Serial: "MS01-0002", Devices: []DeviceRef{{devs["w-01"].ID, "w-01"}, {devs["w-02"].ID, "w-02"}}}
	var got *DuplicateSerialError
	if !errors.As(err, &got) || !errors.Is(err, ErrDuplicateSerial) || errors.Is(err, ErrNotFound) {
		t.Fatalf("BindingBySerial of a serial two devices hold: %v, want a *DuplicateSerialError", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BindingBySerial's error (-want +got):\n%s", diff)
	}
	wantText := fmt.Sprintf(`netbox: devices w-01 (id %d) and w-02 (id %d) both have serial "MS01-0002"`, devs["w-01"].ID, devs["w-02"].ID)
	if err.Error() != wantText {
		t.Errorf("error text %q, want %q", err, wantText)
	}
	if n := srv.RequestCount(); n != 1 {
		t.Errorf("BindingBySerial made %d requests, want 1 (no changelog): %v", n, srv.Requests())
	}
	if _, err := fleetd.DeviceBySerial(t.Context(), "MS01-0002"); !errors.As(err, &got) || errors.Is(err, ErrNotFound) || cmp.Diff(want, got) != "" {
		t.Errorf("DeviceBySerial of a serial two devices hold: %v", err)
	}

	// A third device: every one is named.
	noErr(t, srv.Update(userAlice, "/api/dcim/devices/", map[string]any{"id": devs["cp-01"].ID, "serial": "MS01-0002"}))
	_, err = fleetd.BindingBySerial(t.Context(), "MS01-0002")
	wantText = fmt.Sprintf(`netbox: devices cp-01 (id %d), w-01 (id %d) and w-02 (id %d) all have serial "MS01-0002"`, devs["cp-01"].ID, devs["w-01"].ID, devs["w-02"].ID)
	if !errors.Is(err, ErrDuplicateSerial) || err.Error() != wantText {
		t.Errorf("three devices with one serial: %v, want %q", err, wantText)
	}
}
