package inventory

import (
	"errors"
	"strings"
	"testing"
	"time"

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
		{name: "no EK approved: nothing to author", serial: "G6NUC13-88121", authored: false},
		{name: "author unset", serial: "MS01-0001", cfg: &NetBoxConfig{}, authored: false},
		{name: "another author configured", serial: "MS01-0001", cfg: &NetBoxConfig{BindingAuthor: userAlice}, authored: false},
		{
			name: "edited afterwards by another user", serial: "MS01-0001", authored: false,
			then: func(t *testing.T, tc *bindingCase) { tc.edit(t, userAlice, cfApprovedEKHash, hashC) },
		},
		{
			name: "the other EK edited by another user", serial: "MS01-0001", authored: false,
			then: func(t *testing.T, tc *bindingCase) { tc.edit(t, userAlice, cfApprovedEKHashECC, hashC) },
		},
		{
			name: "an approval cleared by another user", serial: "MS01-0001", authored: false,
			then: func(t *testing.T, tc *bindingCase) { tc.edit(t, userAlice, cfApprovedEKHashECC, nil) },
		},
		{
			name: "an EK added by another user", serial: "MS01-0002", authored: false,
			then: func(t *testing.T, tc *bindingCase) { tc.edit(t, userAlice, cfApprovedEKHashECC, hashA) },
		},
		{
			name: "edited by another user and changed back", serial: "MS01-0001", authored: false,
			then: func(t *testing.T, tc *bindingCase) {
				tc.edit(t, userAlice, cfApprovedEKHash, hashC)
				tc.edit(t, userAlice, cfApprovedEKHash, hashA)
			},
		},
		{
			name: "another user writes the same value: nothing changes", serial: "MS01-0001", authored: true,
			then: func(t *testing.T, tc *bindingCase) { tc.edit(t, userAlice, cfApprovedEKHash, hashA) },
		},
		{
			name: "other fields edited by other users", serial: "MS01-0001", authored: true,
			then: func(t *testing.T, tc *bindingCase) {
				tc.edit(t, userAlice, cfDesiredAction, DesiredActionProvision)
				fleetd := client(t, tc.srv, userFleetd, nil)
				if err := fleetd.RecordAttestation(t.Context(), tc.id, Attestation{EKHash: hashA, Verdict: "attested", At: time.Now()}); err != nil {
					t.Fatal(err)
				}
				if err := fleetd.SetStatus(t.Context(), tc.id, StatusActive); err != nil {
					t.Fatal(err)
				}
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
				without := strings.Replace(strings.Replace(fleetNodes, "    approved_ek_rsa2048: "+hashA+"\n", "", 1), "    approved_ek_eccp256: "+hashB+"\n", "", 1)
				applied(t, tc.terraform, parseNodes(t, without))
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
			if err != nil {
				t.Fatal(err)
			}
			// The device, then its changelog; the changelog only when there
			// is a binding and an author to look for.
			want := 2
			if cfg.BindingAuthor == "" || tc.wantRSA == "" && tc.wantECC == "" {
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
			if err != nil {
				t.Fatal(err)
			}
			got, err := nb.BindingAuthored(t.Context(), d)
			if err != nil {
				t.Fatal(err)
			}
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

// hashD is an EK hash no node of fleetNodes approves.
const hashD = "c27b93035afbcb6bdfd2d95501d1ffc89ded34b8e343ec6f90ae4c2cd7533434"

func (tc *bindingCase) edit(t *testing.T, user, field string, value any) {
	t.Helper()
	if err := tc.srv.EditCustomField(user, tc.id, field, value); err != nil {
		t.Fatal(err)
	}
}

func newBindingCase(t *testing.T, serial string) *bindingCase {
	srv := fleetNetBox(t, true)
	terraform := client(t, srv, userTerraform, nil)
	inv := parseNodes(t, fleetNodes)
	applied(t, terraform, inv)
	d, err := terraform.DeviceBySerial(t.Context(), serial)
	if err != nil {
		t.Fatal(err)
	}
	return &bindingCase{srv: srv, terraform: terraform, id: d.ID, wantRSA: d.ApprovedEKHash, wantECC: d.ApprovedEKHashECC}
}

// A device that changed more often than a page of its changelog since its
// binding was written is judged from the pages that follow.
func TestBindingAuthoredReadsOlderPages(t *testing.T) {
	tc := newBindingCase(t, "MS01-0001")
	fleetd := client(t, tc.srv, userFleetd, &NetBoxConfig{BindingAuthor: userTerraform, PageSize: 3})
	for i := range 7 {
		if err := fleetd.SetLastRun(t.Context(), tc.id, "provision-cp-01-"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	b, err := fleetd.BindingBySerial(t.Context(), "MS01-0001")
	if err != nil {
		t.Fatal(err)
	}
	if !b.Authored {
		t.Error("a binding written before 7 other changes is not authored")
	}
	tc.edit(t, userAlice, cfApprovedEKHash, hashC)
	for i := range 7 {
		if err := fleetd.SetLastRun(t.Context(), tc.id, "provision-cp-01-x"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if b, err = fleetd.BindingBySerial(t.Context(), "MS01-0001"); err != nil || b.Authored {
		t.Errorf("another user's edit 7 changes back: Authored %v, %v", b.Authored, err)
	}
}

func TestBindingBySerialUnknown(t *testing.T) {
	tc := newBindingCase(t, "MS01-0001")
	_, err := tc.terraform.BindingBySerial(t.Context(), "NOPE")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("BindingBySerial of an unknown serial: %v, want ErrNotFound", err)
	}
}
