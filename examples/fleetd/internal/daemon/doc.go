// Package daemon is fleetd: it admits machines that prove their TPM's EKs,
// provisions them with Tinkerbell and Talos, and serves each node its
// config once. Main runs it from its settings, as the fleetd command does;
// New and Serve run it on parts made elsewhere, as the in-process world of
// package sim does.
package daemon
