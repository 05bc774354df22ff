package main

import (
	"testing"
	"testing/fstest"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
)

// -event-log names the log of the boot measured into the TPM: fleetd reads
// its Secure Boot state. Without it, a TPM that is no device sends none.
// A relative path is a usage error (TestUsage).
func TestEventLog(t *testing.T) {
	boot, err := attesttest.SecureBootLog(&attesttest.SecureBootConfig{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	tpm := attesttest.MakeSoftTPM(t, nil)
	tpm.Measure(boot)
	f := newFleetd(t).approve(t, tpm)
	a := newAgent(t, f)
	a.tpm = &closer{SoftTPM: tpm}
	a.m.root.(fstest.MapFS)["run/boot/eventlog"] = &fstest.MapFile{Data: boot.Bytes(), Mode: 0o444}

	a.env["FLEET_EVENT_LOG"] = "/run/boot/eventlog"
	a.runExits(t, exitAttested)
	if c := <-f.claims; c.Boot == nil || c.Boot.SecureBoot != attest.SecureBootOn {
		t.Errorf("boot %+v, want Secure Boot on", c.Boot)
	}

	delete(a.env, "FLEET_EVENT_LOG")
	a.runExits(t, exitAttested)
	if c := <-f.claims; c.Boot == nil || c.Boot.SecureBoot != attest.SecureBootUnknown || c.Boot.Unknown != "the machine sent no event log" {
		t.Errorf("boot %+v, want no event log", c.Boot)
	}
}
