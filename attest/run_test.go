package attest

import (
	"errors"
	"net"
	"strings"
	"testing"
)

func TestCheckRun(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	var tpm TPM = &Device{}
	tests := []struct {
		name   string
		url    string
		tpm    TPM
		m      Machine
		target error
		reason string
	}{
		{name: "good", url: "https://fleetd:8443/attest", tpm: tpm, m: Machine{Serial: "S1", MAC: mac}},
		{name: "good, with LLDP", url: "https://fleetd/attest/", tpm: tpm, m: Machine{Serial: "S1", MAC: mac, LLDP: &LLDP{PortID: "Ethernet5"}}},
		{name: "http", url: "http://fleetd/attest", tpm: tpm, m: Machine{Serial: "S1", MAC: mac}, target: ErrBadURL, reason: `the server URL "http://fleetd/attest" is not an https URL`},
		{name: "no host", url: "https:///attest", tpm: tpm, m: Machine{Serial: "S1", MAC: mac}, target: ErrBadURL},
		{name: "no scheme", url: "fleetd/attest", tpm: tpm, m: Machine{Serial: "S1", MAC: mac}, target: ErrBadURL},
		{name: "not a URL", url: "https://[::1", tpm: tpm, m: Machine{Serial: "S1", MAC: mac}, target: ErrBadURL},
		{name: "a colon pair", url: "::", tpm: tpm, m: Machine{Serial: "S1", MAC: mac}, target: ErrBadURL},
		{name: "no TPM", url: "https://fleetd", m: Machine{Serial: "S1", MAC: mac}, target: ErrBadMachine, reason: "no TPM"},
		{name: "no serial", url: "https://fleetd", tpm: tpm, m: Machine{MAC: mac}, target: ErrBadMachine, reason: "no serial"},
		{name: "a serial with a NUL", url: "https://fleetd", tpm: tpm, m: Machine{Serial: "S1\x00", MAC: mac}, target: ErrBadMachine, reason: "a byte 0x00 that is not printable ASCII"},
		{name: "a serial with spaces", url: "https://fleetd", tpm: tpm, m: Machine{Serial: " S1", MAC: mac}, target: ErrBadMachine, reason: "surrounding spaces"},
		{name: "an EUI-64", url: "https://fleetd", tpm: tpm, m: Machine{Serial: "S1", MAC: append(mac, 0, 0)}, target: ErrBadMachine, reason: "is not an EUI-48"},
		{name: "no MAC", url: "https://fleetd", tpm: tpm, m: Machine{Serial: "S1"}, target: ErrBadMachine, reason: `the MAC "" is not an EUI-48`},
		{name: "LLDP with a control character", url: "https://fleetd", tpm: tpm, m: Machine{Serial: "S1", MAC: mac, LLDP: &LLDP{PortID: "a\x01"}}, target: ErrBadMachine, reason: "control character"},
		{name: "LLDP with an escape", url: "https://fleetd", tpm: tpm, m: Machine{Serial: "S1", MAC: mac, LLDP: &LLDP{SystemName: "\x1b]0;x"}}, target: ErrBadMachine, reason: "control character"},
	}
	for _, tt := range tests {
		err := checkRun(tt.url, tt.tpm, tt.m)
		if !errors.Is(err, tt.target) || (tt.target == nil) != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("%s: checkRun = %v; want %v, %q", tt.name, err, tt.target, tt.reason)
		}
	}
}

func TestPrintVerdict(t *testing.T) {
	tests := []struct {
		res  Result
		want string
	}{
		{Result{Verdict: Attested, Reason: "install code issued", InstallCode: "secret-code"}, "attest: PASSED\n"},
		{Result{Verdict: Attested, Reason: "no provision: auto-provision is off"}, "attest: PASSED\nattest: no provision: auto-provision is off\n"},
		{Result{Verdict: PendingApproval, Reason: "no entry names the serial"}, "attest: FAILED pending-approval\nattest: no entry names the serial\n"},
		{Result{Verdict: EKMissing, Reason: "two\nlines"}, "attest: FAILED ek-missing\nattest: two lines\n"},
	}
	for _, tt := range tests {
		var b strings.Builder
		printVerdict(&b, tt.res)
		if b.String() != tt.want {
			t.Errorf("printVerdict(%+v) = %q, want %q", tt.res, b.String(), tt.want)
		}
	}
}
