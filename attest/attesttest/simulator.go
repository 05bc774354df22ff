//go:build cgo

package attesttest

import (
	"errors"
	"sync"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/google/go-tpm-tools/simulator"
)

// simMu serializes the reference simulator: it is one global instance in
// C, so at most one Simulator is open at a time in a process.
var simMu sync.Mutex

// Simulator is the Microsoft reference TPM 2.0 (go-tpm-tools' simulator)
// as a TPM command channel. Its hierarchy seeds derive from a fixed seed,
// so a seed always gives the same EKs: seed 0 gives the RSA EK whose
// EKHash is RSASeed0Hash. Only one Simulator is open at a time: Open
// blocks until the previous one is closed. A Simulator is not safe for
// concurrent use; attest.Device serializes its commands.
type Simulator struct {
	sim    *simulator.Simulator
	once   sync.Once
	closed error
}

// RSASeed0Hash is the EKHash of the RSA EK of the simulator with seed 0
// (the test vector of the SPIRE TPM plugin).
const RSASeed0Hash = "1b5bbe2e96054f7bc34ebe7ba9a4a9eac5611c6879285ceff6094fa556af485c"

// OpenSimulator starts the reference simulator with hierarchy seeds derived
// from seed, manufactured anew (empty NV), and returns it. The caller
// closes it, once, to let the next one open.
func OpenSimulator(seed int64) (*Simulator, error) {
	simMu.Lock()
	sim, err := simulator.GetWithFixedSeedInsecure(seed)
	if err != nil {
		simMu.Unlock()
		return nil, err
	}
	return &Simulator{sim: sim}, nil
}

// Read reads a TPM response.
func (s *Simulator) Read(p []byte) (int, error) { return s.sim.Read(p) }

// Write sends a TPM command.
func (s *Simulator) Write(p []byte) (int, error) { return s.sim.Write(p) }

// Close shuts the simulator down and lets the next OpenSimulator go on. It
// is safe to call more than once.
func (s *Simulator) Close() error {
	s.once.Do(func() {
		s.closed = s.sim.Close()
		simMu.Unlock()
	})
	if errors.Is(s.closed, simulator.ErrUsingClosedSimulator) {
		return nil
	}
	return s.closed
}

// NewSimulatorDevice opens the reference simulator with seed and returns an
// attest.Device over it, closed when tb ends. It ends tb if the simulator
// does not start.
func NewSimulatorDevice(tb testing.TB, seed int64) *attest.Device {
	tb.Helper()
	sim, err := OpenSimulator(seed)
	if err != nil {
		tb.Fatalf("attesttest: start the TPM simulator: %v", err)
	}
	d := attest.OpenChannel(sim)
	tb.Cleanup(func() { _ = d.Close() })
	return d
}

// NewMeasuredSimulatorDevice is NewSimulatorDevice with boot's events
// extended into the simulator's PCRs first, as firmware extends them
// before the OS runs.
func NewMeasuredSimulatorDevice(tb testing.TB, seed int64, boot *BootLog) *attest.Device {
	tb.Helper()
	sim, err := OpenSimulator(seed)
	if err != nil {
		tb.Fatalf("attesttest: start the TPM simulator: %v", err)
	}
	if err := boot.ExtendInto(Channel(sim)); err != nil {
		sim.Close()
		tb.Fatalf("attesttest: measure the boot: %v", err)
	}
	d := attest.OpenChannel(sim)
	tb.Cleanup(func() { _ = d.Close() })
	return d
}
