// Package attesttest gives tests of package attest real and fast TPMs.
//
// OpenSimulator and NewSimulatorDevice start the Microsoft reference TPM 2.0
// through github.com/google/go-tpm-tools/simulator; they need cgo (and
// libssl-dev) and are left out of builds without it. Its seeds derive
// from a fixed number, so a seed always gives the same EKs; it is one global
// instance, so only one is open at a time (the next waits for Close), and
// it holds about three transient objects, which attest.Device respects.
//
// The simulator has the four PCR banks of Banks active (SHA-1, SHA-256,
// SHA-384, SHA-512).
//
// SoftTPM is a TPM in pure Go that performs the same credential-activation
// math, for load tests: a thousand of them attest at once where the
// simulator runs one. Its PCR banks are configurable (SoftConfig.Banks,
// default the four), it quotes as a TPM does (the four banks requested,
// the selection narrowed to the active ones), and ExtendBank extends one
// bank alone, as an OS that extends a bank itself would. Its tests
// cross-check it against the simulator.
//
// BootLog builds a synthetic UEFI event log in the crypto-agile format
// with a digest per PCR bank (default the four, as OVMF logs them;
// NewBootLog and SecureBootConfig.Banks choose others), such as
// SecureBootLog's (Secure Boot on or off, with PK, KEK, db, dbx and the
// boot loader's authority), and extends it into a TPM's PCRs, every bank
// of it in one TPM2_PCR_Extend per event (ExtendInto, which refuses a TPM
// whose active banks are not the log's, NewMeasuredSimulatorDevice), or a
// SoftTPM's (Measure), so that quotes cover it.
//
// Bindings is an in-memory binding source that counts its calls.
//
// None of this proves anything about a machine: it is for tests and demos.
package attesttest
