package disksafe

import (
	"errors"
	"fmt"
	"strings"
	"testing"
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

// The Workflow carries the code's SHA-256, not the code: the wipe happens
// only when this boot's recorded code hashes to it.
func TestCheckCodeSHA256(t *testing.T) {
	tr := newTree().add(sataDisk("sda", "8:0", "S1"))
	tests := []struct {
		name string
		tg   Target
		boot Boot
		want error
	}{
		{"the record's code hashes to it", Target{Disk: "/dev/sda", Serial: "S1", CodeSHA256: CodeSHA256(testCode)}, goodBoot(), nil},
		{"no digest: the record stands alone", Target{Disk: "/dev/sda", Serial: "S1"}, goodBoot(), nil},
		{"another code's digest", Target{Disk: "/dev/sda", Serial: "S1", CodeSHA256: CodeSHA256("ic-someone-elses")}, goodBoot(), ErrInstallCodeMismatch},
		{"the digest in upper case", Target{Disk: "/dev/sda", Serial: "S1", CodeSHA256: strings.ToUpper(CodeSHA256(testCode))}, goodBoot(), ErrInstallCodeMismatch},
		{"the code itself in place of its digest", Target{Disk: "/dev/sda", Serial: "S1", CodeSHA256: testCode}, goodBoot(), ErrInstallCodeMismatch},
		{"a digest with a code of another run", Target{Disk: "/dev/sda", Serial: "S1", CodeSHA256: CodeSHA256(testCode), Code: "ic-other"}, goodBoot(), ErrInstallCodeMismatch},
		{"a digest and no record", Target{Disk: "/dev/sda", Serial: "S1", CodeSHA256: CodeSHA256(testCode)}, Boot{ID: testBootID}, ErrNotAttested},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := judge(t, tr, tt.tg, tt.boot)
			checkVerdict(t, d, err, "sda", tt.want, nil, map[error]string{
				ErrInstallCodeMismatch: "the Workflow's install code is not the one this boot received",
				ErrNotAttested:         "this boot did not pass attestation",
			}[tt.want])
			if s := fmt.Sprintf("%v %+v %#v", err, err, err); strings.Contains(s, testCode) {
				t.Errorf("the refusal holds the install code: %s", s)
			}
		})
	}
}

// CheckCode judges the boot alone, as the install action needs it.
func TestCheckCode(t *testing.T) {
	sum := CodeSHA256(testCode)
	tg := Target{Disk: "/dev/sda", Serial: " S1 ", CodeSHA256: sum}
	if err := CheckCode(tg, goodBoot()); err != nil {
		t.Fatalf("CheckCode = %v", err)
	}
	for _, tt := range []struct {
		name  string
		boot  Boot
		want  error
		cause error
	}{
		{"no record", Boot{ID: testBootID}, ErrNotAttested, errNoRecord},
		{"another boot's record", bootWith(func(r *BootRecord) { r.BootID = "00000000-aaaa-bbbb-cccc-dddddddddddd" }), ErrNotAttested, errOtherBoot},
		{"a boot that did not pass", bootWith(func(r *BootRecord) { r.Attested = false }), ErrNotAttested, errNotAttested},
		{"no code", bootWith(func(r *BootRecord) { r.Code = "" }), ErrNoInstallCode, nil},
		{"another code", bootWith(func(r *BootRecord) { r.Code = "ic-someone-elses" }), ErrInstallCodeMismatch, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckCode(tg, tt.boot)
			var r *Refusal
			if !errors.Is(err, tt.want) || !errors.As(err, &r) || r.Disk != "/dev/sda" || r.Serial != "S1" {
				t.Fatalf("CheckCode = %#v, want a *Refusal of %v for /dev/sda S1", err, tt.want)
			}
			if tt.cause != nil && !errors.Is(err, tt.cause) {
				t.Errorf("CheckCode = %v, want the cause %v", err, tt.cause)
			}
			if strings.Contains(fmt.Sprintf("%v %+v %#v", err, err, err), "ic-someone-elses") {
				t.Error("the refusal holds the install code")
			}
		})
	}
}
