// Package firmware holds TestIntegrationFirmware, which boots machines
// through real UEFI firmware and Debian's signed boot chain into
// hookos-attest, and holds fleetd's Secure Boot policy to the runbook's
// words on a real measured boot.
package firmware
