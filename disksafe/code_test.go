package disksafe

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/disksafe/disksafetest"
)

func TestCodeSHA256(t *testing.T) {
	// FIPS 180-2's test vector for "abc".
	if got, want := CodeSHA256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("CodeSHA256(abc) = %s, want %s", got, want)
	}
	if s := CodeSHA256(testCode); len(s) != 64 || strings.Trim(s, "0123456789abcdef") != "" || strings.Contains(s, testCode) {
		t.Errorf("CodeSHA256 = %q, want 64 lowercase hex characters", s)
	}
}

// CheckCode judges the boot alone, as the install action needs it, and as
// Check judges it before any disk. The Workflow carries the code's SHA-256,
// not the code: the wipe or the install happens only when this boot's
// recorded code hashes to it.
func TestCheckCode(t *testing.T) {
	const (
		notAttested = "this boot did not pass attestation"
		mismatch    = "the Workflow's install code is not the one this boot received"
	)
	sum := CodeSHA256(testCode)
	for _, tt := range []struct {
		name      string
		sum, code string // the Target's CodeSHA256 and Code
		boot      Boot
		want      error // nil: the boot may go on
		cause     error
		text      string
	}{
		{name: "the record's code hashes to it", sum: sum, boot: goodBoot()},
		{name: "no digest: the record stands alone", boot: goodBoot()},
		{name: "another code's digest", sum: CodeSHA256("ic-someone-elses"), boot: goodBoot(), want: ErrInstallCodeMismatch, text: mismatch},
		{name: "the digest in upper case", sum: strings.ToUpper(sum), boot: goodBoot(), want: ErrInstallCodeMismatch, text: mismatch},
		{name: "the code itself in place of its digest", sum: testCode, boot: goodBoot(), want: ErrInstallCodeMismatch, text: mismatch},
		{name: "a digest with a code of another run", sum: sum, code: "ic-other", boot: goodBoot(), want: ErrInstallCodeMismatch, text: mismatch},
		{name: "a code of another run", code: "ic-someone-elses", boot: goodBoot(), want: ErrInstallCodeMismatch, text: mismatch},
		{name: "no record", sum: sum, boot: Boot{ID: disksafetest.BootID}, want: ErrNotAttested, cause: errNoRecord, text: notAttested},
		{name: "a zero boot", sum: sum, want: ErrNotAttested, cause: errNoRecord, text: notAttested},
		{name: "this boot's ID unknown", sum: sum, boot: Boot{Record: goodBoot().Record}, want: ErrNotAttested, cause: errNoBootID, text: notAttested},
		{name: "another boot's record", sum: sum, boot: bootWith(func(r *BootRecord) { r.BootID = "00000000-aaaa-bbbb-cccc-dddddddddddd" }),
			want: ErrNotAttested, cause: errOtherBoot, text: notAttested},
		{name: "a boot that did not pass", sum: sum, boot: bootWith(func(r *BootRecord) { r.Attested = false }),
			want: ErrNotAttested, cause: errNotAttested, text: notAttested},
		{name: "no code", sum: sum, boot: bootWith(func(r *BootRecord) { r.Code = "" }), want: ErrNoInstallCode, text: "no install code"},
		{name: "another code", sum: sum, boot: bootWith(func(r *BootRecord) { r.Code = "ic-someone-elses" }), want: ErrInstallCodeMismatch, text: mismatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckCode(Target{Disk: "/dev/sda", Serial: " S1 ", CodeSHA256: tt.sum, Code: tt.code}, tt.boot)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckCode = %v", err)
				}
				return
			}
			var r *Refusal
			if !errors.Is(err, tt.want) || !errors.As(err, &r) || r.Disk != "/dev/sda" || r.Serial != "S1" || err.Error() != tt.text {
				t.Fatalf("CheckCode = %#v, want a *Refusal of %v for /dev/sda S1: %s", err, tt.want, tt.text)
			}
			if tt.cause != nil && !errors.Is(err, tt.cause) {
				t.Errorf("CheckCode = %v, want the cause %v", err, tt.cause)
			}
			if s := fmt.Sprintf("%v %+v %#v", err, err, err); strings.Contains(s, testCode) || strings.Contains(s, "ic-someone-elses") {
				t.Errorf("the refusal holds the install code: %s", s)
			}
		})
	}
}
