//go:build cgo

package attest_test

import (
	"testing"

	"github.com/fleetkit/fleet/attest/attesttest"
)

func simulatorMeasured(t *testing.T, boot *attesttest.BootLog) quoter {
	return attesttest.NewMeasuredSimulatorDevice(t, 1, boot)
}

// TestQuoteSimulator runs testQuote with the reference TPM simulator.
func TestQuoteSimulator(t *testing.T) { testQuote(t, simulatorMeasured) }
