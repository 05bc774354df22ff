package lldpwait

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// wantError compares err with want (errors.Is, through EquateErrors)
// and, when text is set, its text with text: the journal line.
func wantError(t *testing.T, err, want error, text string) {
	t.Helper()
	if diff := cmp.Diff(want, err, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if text != "" && (err == nil || err.Error() != text) {
		t.Errorf("error text %q, want the journal line %q", err, text)
	}
}

// TestCheck checks what Check and CheckRecorded return for the ports a
// neighbour names (or the one recorded) and the declared one.
func TestCheck(t *testing.T) {
	lldpd := mustParse(t, lldpdFrame) // names port 5
	for _, tt := range []struct {
		name string
		err  error
		want error
		text string // the journal line, when the runbook gives one
	}{
		{"on its port", Check(lldpd, 5, nil), nil, ""},
		{"UniFi on its port", Check(nb(PortLocal, "Port 12", "Port 12"), 12, nil), nil, ""},
		{"on another port", Check(lldpd, 7, nil), &PortError{Port: 5, Expected: 7}, "on port 5, expected 7"},
		{"lldpd's port ID interface name, on its port", Check(mustParse(t, lldpdFrameWith(lldpdPortIfname)), 5, nil), nil, ""},
		{"lldpd's port ID locally assigned, on another port", Check(mustParse(t, lldpdFrameWith(lldpdPortLocal7)), 5, nil), &PortError{Port: 7, Expected: 5}, "on port 7, expected 5"},
		{"UniFi on another port", Check(nb(PortLocal, "Port 3", ""), 4, nil), &PortError{Port: 3, Expected: 4}, "on port 3, expected 4"},
		{"no frame, so no port attested", Check(nil, 5, nil), ErrNoAttestedPort, "attested no switch port"},
		{"port not named", Check(nb(PortMACAddress, "74:83:c2:01:02:03", ""), 5, nil), ErrPortUnnamed, ""},
		{"no declared port", Check(lldpd, 0, nil), ErrNoDeclaredPort, "no switch port is declared"},
		{"negative declared port", Check(lldpd, -2, nil), ErrNoDeclaredPort, ""},
		{"no declared port and no frame", Check(nil, 0, nil), ErrNoDeclaredPort, ""},
		{"recorded its port", CheckRecorded(5, 5), nil, ""},
		{"recorded another port", CheckRecorded(9, 5), &PortError{Port: 9, Expected: 5}, "on port 9, expected 5"},
		{"recorded none", CheckRecorded(0, 5), ErrNoRecordedPort, "recorded no attested switch port"},
		{"recorded a negative port", CheckRecorded(-1, 5), ErrNoRecordedPort, ""},
		{"declared none", CheckRecorded(5, 0), ErrNoDeclaredPort, "no switch port is declared"},
		{"declared and recorded none", CheckRecorded(0, 0), ErrNoDeclaredPort, ""},
	} {
		t.Run(tt.name, func(t *testing.T) { wantError(t, tt.err, tt.want, tt.text) })
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

// TestRunbookNoLLDPFrame reproduces the runbook's row "The journal says
// `recorded no attested switch port` or `attested no switch port`: the
// switch sent no LLDP frame within 35 seconds of the attestation".
func TestRunbookNoLLDPFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The machine's side: a switch that sends no LLDP (other traffic
		// only) for the default wait.
		c, l := fakeListener(t, 0, nil)
		go func() {
			for range 10 {
				time.Sleep(3 * time.Second)
				c.push(cat(dstBcast, switchMAC, []byte{0x08, 0x06}, make([]byte, 46)))
			}
		}()
		start := time.Now()
		n, err := l.Wait(t.Context())
		if !errors.Is(err, ErrTimeout) || err.Error() != "eth0: no LLDP frame arrived in time (waited 35s)" || time.Since(start) != 35*time.Second {
			t.Fatalf("Wait = %+v, %v after %v; want ErrTimeout, waited 35s", n, err, time.Since(start))
		}
		// The claim carries no neighbour; fleetd checks it.
		wantError(t, Check(n, 5, nil), ErrNoAttestedPort, "attested no switch port")
		// fleetd recorded no attested port, and checks again later.
		wantError(t, CheckRecorded(0, 5), ErrNoRecordedPort, "recorded no attested switch port")
	})
}

// TestRunbookWrongPort reproduces the runbook's row "The journal says `on
// port N, expected M`: a switch port the device does not expect".
func TestRunbookWrongPort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, l := fakeListener(t, 0, nil)
		c.push(unifiFrame("Port 7")) // the machine is on port 7
		n, err := l.Wait(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		const declared = 5 // switch_port in the nodes file
		wrong := &PortError{Port: 7, Expected: declared}
		wantError(t, Check(n, declared, nil), wrong, "on port 7, expected 5")
		port, err := Port(n, nil) // what fleetd records as attested_switch_port
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, CheckRecorded(port, declared), wrong, "on port 7, expected 5")
	})
}
