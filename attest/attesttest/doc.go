// Package attesttest gives tests of package attest real and fast TPMs.
//
// OpenSimulator and NewSimulatorDevice start the Microsoft reference TPM 2.0
// through github.com/google/go-tpm-tools/simulator; they need cgo (and
// libssl-dev) and are left out of builds without it. Its seeds derive
// from a fixed number, so a seed always gives the same EKs; it is one global
// instance, so only one is open at a time (the next waits for Close), and
// it holds about three transient objects, which attest.Device respects.
//
// SoftTPM is a TPM in pure Go that performs the same credential-activation
// math, for load tests: a thousand of them attest at once where the
// simulator runs one. Its tests cross-check it against the simulator.
//
// BootLog builds a synthetic UEFI event log (SecureBootLog: Secure Boot on
// or off, with PK, KEK, db, dbx and the boot loader's authority) and
// extends it into a TPM's PCRs (ExtendInto, NewMeasuredSimulatorDevice,
// SoftTPM.Measure), so that quotes cover it.
//
// Bindings is an in-memory binding source that counts its calls.
//
// None of this proves anything about a machine: it is for tests and demos.
package attesttest
