//go:build cgo

package attesttest

import (
	"crypto"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/fleetkit/fleet/attest"
	"github.com/google/go-tpm-tools/simulator"
	legacy "github.com/google/go-tpm/legacy/tpm2"
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

// StartSimulator is OpenSimulator that ends tb when the simulator does not
// start, and closes it when tb ends.
func StartSimulator(tb testing.TB, seed int64) *Simulator {
	tb.Helper()
	sim, err := OpenSimulator(seed)
	if err != nil {
		tb.Fatalf("attesttest: start the TPM simulator: %v", err)
	}
	tb.Cleanup(func() { _ = sim.Close() })
	return sim
}

// AllocateBanks makes banks (each one of Banks) the simulator's active
// PCR banks, PCRs 0-23 of each, as firmware does with TPM2_PCR_Allocate
// (OVMF allocates the banks it logs), and restarts the simulator, as a
// reboot does, for the allocation to take effect: every PCR is zero
// again. The simulator starts with the four banks of Banks active.
func (s *Simulator) AllocateBanks(banks ...crypto.Hash) error {
	banks, err := checkBanks(banks)
	if err != nil {
		return err
	}
	// go-tpm's direct API has no TPM2_PCR_Allocate: the legacy one. Every
	// bank is listed, the ones to leave unallocated with no PCR.
	var alloc []legacy.PCRSelection
	for _, h := range Banks() {
		sel := legacy.PCRSelection{Hash: legacy.Algorithm(tpmAlg(h))}
		if slices.Contains(banks, h) {
			for pcr := range 24 {
				sel.PCRs = append(sel.PCRs, pcr)
			}
		}
		alloc = append(alloc, sel)
	}
	auth := legacy.AuthCommand{Session: legacy.HandlePasswordSession, Attributes: legacy.AttrContinueSession}
	if err := legacy.PCRAllocate(s, legacy.HandlePlatform, auth, alloc); err != nil {
		return fmt.Errorf("attesttest: allocate the PCR banks: %w", err)
	}
	if err := s.sim.Reset(); err != nil {
		return fmt.Errorf("attesttest: restart the simulator: %w", err)
	}
	return nil
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
	return NewMeasuredSimulatorDevice(tb, seed, nil)
}

// NewMeasuredSimulatorDevice is NewSimulatorDevice with boot's PCR banks
// allocated (AllocateBanks) and its events extended into them first, as
// firmware allocates and extends them before the OS runs. A nil boot
// leaves the simulator as it starts.
func NewMeasuredSimulatorDevice(tb testing.TB, seed int64, boot *BootLog) *attest.Device {
	tb.Helper()
	sim := StartSimulator(tb, seed)
	if boot != nil {
		if err := sim.AllocateBanks(boot.Banks()...); err != nil {
			tb.Fatalf("attesttest: allocate the boot's PCR banks: %v", err)
		}
		if err := boot.ExtendInto(Channel(sim)); err != nil {
			tb.Fatalf("attesttest: measure the boot: %v", err)
		}
	}
	d := attest.OpenChannel(sim)
	tb.Cleanup(func() { _ = d.Close() })
	return d
}
