// Package attest admits a machine only when its TPM proves every endorsement
// key (EK) that the node's entry approves: the HookOS client (Run) and the
// fleetd server (Server) of one attestation protocol, by TPM credential
// activation.
//
// An EK is named by its hash (EKHash: SHA-256 of its DER
// SubjectPublicKeyInfo, 64 lowercase hex characters). A node's entry
// approves an RSA-2048 EK, an ECC P-256 EK, or both (a Binding, from the
// caller's Bindings). The verdict is a pure function of the binding and the
// EKs the TPM proved (Judge): attested, pending-approval, ek-hash-mismatch,
// ek-missing or ek-binding-unauthored. A certificate on an EK approves
// nothing: no setting names an EK certificate authority, and a TPM whose
// EKs a maker's CA certified waits for approval like any other (the
// client sends the certificates from NV; the verdict never reads them). A
// Bindings source that cannot name one binding until an operator
// acts (BindingError) refuses the claim with no verdict.
//
// The protocol is JSON over the caller's HTTPS, two round trips:
//
//  1. claim: the SMBIOS serial, the MAC, the switch port from LLDP (or
//     none), every EK's public key, and the attestation key's (AK's)
//     parameters. The server checks the AK, asks Bindings once, and answers
//     one challenge per EK, bound to the AK's name, with the session sealed
//     under its key.
//  2. proof: the secrets the TPM decrypted, with the sealed session, and,
//     from a TPM that is a Quoter, a quote by the AK over a nonce derived
//     from the session (QuoteNonce) of PCRs 0-7 of every PCR bank the TPM
//     has active, with each bank's values and the UEFI event log. The
//     server accepts each session once, verifies the quote, judges, and
//     on attested asks the caller's admission hook for an install code.
//     It answers the verdict, its reason and the code.
//
// A TPM decrypts a challenge only with its EK and for an AK of the name it
// names, so a correct secret proves that one TPM holds the EK and the AK.
//
// For the measured boot, the client asks for one TPM2_Quote of PCRs 0-7
// of the SHA-1, SHA-256, SHA-384 and SHA-512 banks. The TPM clears the
// selection of each bank it has not allocated, so the statement the AK
// signs names the active banks: an OS cannot hide one. The server
// requires the selection to list the four banks, each with PCRs 0-7 or
// nothing, SHA-256 among the active ones; the values sent to be those of
// exactly the active banks, hashing to the quote's PCR digest; and, with
// an event log, the log's banks (its Spec ID event) to be exactly the
// active ones, and the log to replay to each bank on its own
// (go-attestation). Firmware that extends one bank and leaves another to
// the OS, or an OS that extends a bank itself, is thus refused. The
// Secure Boot state is read from the SHA-256 bank's replay. A quote that
// verifies, with a log that replays to it, proves the boot that TPM
// measured: Claim.Boot holds its Secure Boot state, keys and SHA-256 PCR
// 7 (nil for a proof without a quote; SecureBootUnknown for one without a
// log, its banks still verified). A quote that does not verify, or a log
// that does not replay, refuses the attestation without a verdict (the
// Reason* constants). A TPM that does not implement one of the four hash
// algorithms refuses the quote itself (TPM_RC_HASH), and the client's try
// fails.
//
// Replicas that share a SealingKey must share the record of spent sessions
// (Config.Spent). Only a proof whose verdict is attested is recorded as
// spent: any TPM, a software one too, can prove its own EKs under any
// serial, so a record per refused or waiting proof would grow with a
// flood; such a proof replayed changes nothing. Waiting claims are bounded
// per serial, per source address and in all (Config.MaxWaiting...).
// Refusals never call the admission hook; no secret,
// session, key or install code is ever logged or printed.
//
// A pending-approval claim whose EKs were proven waits (Server.Waiting), one
// per TPM, so that an operator can print it with its approval lines
// (WaitingClaim is its wire format). A waiting claim proves nothing, because
// another machine can send one with this serial: never approve it alone.
//
// Run writes the runbook's console lines ("attest: PASSED", "attest: FAILED
// <verdict>", "attest: try N failed"); the Server writes the audit lines
// attest.verdict and attest.refused to Config.Logger.
//
// The server and protocol are pure Go on every platform. OpenTPM opens a
// TPM device on Linux (root); OpenChannel drives any TPM command channel.
// Package attesttest gives tests a TPM simulator and a fast software TPM.
//
// In fleetd:
//
//	srv, err := attest.NewServer(bindings, &attest.Config{
//		SealingKey: key, Spent: spent, Admit: admit, Logger: logger,
//	})
//	mux.Handle("/attest/", srv) // under fleetd's own HTTPS server
//
// In HookOS:
//
//	tpm, err := attest.OpenTPM("")
//	res, err := attest.Run(ctx, "https://fleetd:8443/attest", tpm,
//		attest.Machine{Serial: serial, MAC: mac, LLDP: port},
//		&attest.ClientConfig{HTTPClient: client, Console: os.Stdout})
package attest
