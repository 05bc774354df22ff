package lldpwait

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestCheck(t *testing.T) {
	lldpd, err := Parse(lldpdFrame) // names port 5
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		n        *Neighbor
		declared int
		want     error
		text     string // the journal line, when the runbook gives one
	}{
		{"on its port", lldpd, 5, nil, ""},
		{"UniFi on its port", nb(PortLocal, "Port 12", "Port 12"), 12, nil, ""},
		{"on another port", lldpd, 7, &PortError{Port: 5, Expected: 7}, "on port 5, expected 7"},
		{"UniFi on another port", nb(PortLocal, "Port 3", ""), 4, &PortError{Port: 3, Expected: 4}, "on port 3, expected 4"},
		{"no frame, so no port attested", nil, 5, ErrNoAttestedPort, "attested no switch port"},
		{"port not named", nb(PortMACAddress, "74:83:c2:01:02:03", ""), 5, ErrPortUnnamed, ""},
		{"no declared port", lldpd, 0, ErrNoDeclaredPort, "no switch port is declared"},
		{"negative declared port", lldpd, -2, ErrNoDeclaredPort, ""},
		{"no declared port and no frame", nil, 0, ErrNoDeclaredPort, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.n, tt.declared, nil)
			if diff := cmp.Diff(tt.want, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
			if tt.text != "" && (err == nil || err.Error() != tt.text) {
				t.Errorf("Check error text %q, want %q", err, tt.text)
			}
		})
	}
}

func TestCheckRecorded(t *testing.T) {
	tests := []struct {
		name               string
		recorded, declared int
		want               error
		text               string
	}{
		{"recorded its port", 5, 5, nil, ""},
		{"recorded another port", 9, 5, &PortError{Port: 9, Expected: 5}, "on port 9, expected 5"},
		{"recorded none", 0, 5, ErrNoRecordedPort, "recorded no attested switch port"},
		{"recorded a negative port", -1, 5, ErrNoRecordedPort, ""},
		{"declared none", 5, 0, ErrNoDeclaredPort, "no switch port is declared"},
		{"declared and recorded none", 0, 0, ErrNoDeclaredPort, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRecorded(tt.recorded, tt.declared)
			if diff := cmp.Diff(tt.want, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("CheckRecorded (-want +got):\n%s", diff)
			}
			if tt.text != "" && (err == nil || err.Error() != tt.text) {
				t.Errorf("CheckRecorded error text %q, want %q", err, tt.text)
			}
		})
	}
}

func TestPortErrorMatching(t *testing.T) {
	err := Check(nb(PortLocal, "Port 3", ""), 4, nil)
	if !errors.Is(err, ErrWrongPort) {
		t.Errorf("errors.Is(%v, ErrWrongPort) = false", err)
	}
	if !errors.Is(err, &PortError{Port: 3, Expected: 4}) || errors.Is(err, &PortError{Port: 3, Expected: 5}) {
		t.Errorf("errors.Is by numbers is wrong for %v", err)
	}
	var pe *PortError
	if !errors.As(err, &pe) || pe.Port != 3 || pe.Expected != 4 {
		t.Errorf("errors.As gave %+v", pe)
	}
	for _, other := range []error{ErrNoAttestedPort, ErrNoRecordedPort, ErrNoDeclaredPort, ErrPortUnnamed} {
		if errors.Is(err, other) {
			t.Errorf("a PortError matches %v", other)
		}
		if errors.Is(other, ErrWrongPort) {
			t.Errorf("%v matches ErrWrongPort", other)
		}
	}
	if errors.Is(ErrNoAttestedPort, ErrNoRecordedPort) || errors.Is(ErrNoRecordedPort, ErrNoAttestedPort) {
		t.Error("the two no-port errors match each other")
	}
}
