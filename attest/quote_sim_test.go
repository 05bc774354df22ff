//go:build cgo

package attest_test

import (
	"testing"

	"github.com/fleetkit/fleet/attest/attesttest"
)

func simulatorMeasured(t *testing.T, boot *attesttest.BootLog) quoter {
	return attesttest.NewMeasuredSimulatorDevice(t, 1, boot)
}

// TestQuoteSimulator runs testQuote with the reference TPM simulator,
// its PCR banks allocated as each set of bankSets (the boot log's).
func TestQuoteSimulator(t *testing.T) {
	for _, banks := range bankSets {
		t.Run(bankList(banks), func(t *testing.T) { testQuote(t, banks, simulatorMeasured) })
	}
}
