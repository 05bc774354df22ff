// Package attest admits a machine only when its TPM proves every endorsement
// key (EK) that the node's entry approves: the HookOS client and the fleetd
// server of one attestation protocol, by TPM credential activation.
//
// # The EK binding
//
// An EK is named by its hash (EKHash): the SHA-256 of the public key's DER
// SubjectPublicKeyInfo, as 64 lowercase hex characters. A node's entry
// approves an RSA-2048 EK, an ECC P-256 EK, or both (a Binding, from the
// caller's Bindings source, which fleetd wires to NetBox). The verdict is a
// pure function of the binding and the EKs whose possession the TPM proved
// (Judge), one of:
//
//	attested               the TPM proved every EK the entry approves
//	pending-approval       no entry names the serial, or it approves no EK
//	ek-hash-mismatch       an approved EK type was presented with another hash
//	ek-missing             an approved EK was not presented
//	ek-binding-unauthored  the binding's author is not the configured one
//
// Precedence, first match wins: no entry (pending-approval); then
// unauthored, even a binding that approves no EK (another user cleared
// it); then an entry that approves no EK (pending-approval: never written,
// or cleared by its author); then mismatch (RSA-2048 before ECC P-256);
// then missing; else attested. An unauthored binding is never compared:
// nothing another user wrote is trusted. A certificate on an EK, even from
// a trusted maker, approves nothing.
//
// A binding source that cannot name one binding for the serial until an
// operator acts (a BindingError, e.g. more than one device holds the
// serial) refuses the claim before any challenge, with no verdict: the
// console says "attest: FAILED" and the source's reason.
//
// # The protocol
//
// JSON over the caller's HTTPS, two round trips:
//
//  1. claim: the SMBIOS serial, the MAC, the switch port learned from LLDP
//     (or none), every EK's public key (and its NV certificate when the
//     TPM has one), and the attestation key's (AK's) parameters. The
//     server checks the AK once (go-attestation's CheckAKParameters: a
//     restricted, TPM-generated key whose creation the TPM certified), asks
//     the binding source once, and answers one credential-activation
//     challenge per presented EK, all bound to the AK's name, with the
//     session state sealed (AES-256-GCM under the server's key) and valid
//     for 60 s.
//  2. proof: the secrets the TPM decrypted, with the sealed session. The
//     server opens the session, compares the secrets in constant time,
//     accepts each session once, judges, and on attested calls the caller's
//     admission hook, which returns an install code or "no provision" with
//     its reason. The answer is the verdict, its reason, and the code.
//
// A TPM decrypts a challenge only with the EK it was made for, and only for
// an AK of the name it names, so a correct secret proves that the same TPM
// holds the EK and the AK. Any replica that holds the sealing key finishes
// a session another began, without asking the binding source again; so
// replicas that share a key must share the record of spent sessions too
// (Config.Spent), and NewServer refuses a key without one.
//
// # Waiting claims
//
// A pending-approval claim whose EKs were proven waits (Server.Waiting, 24 h
// by default) so that an operator can print it with the two approval
// lines. A waiting claim proves nothing, because another machine can send
// one with this serial: compare its hashes with your independent evidence
// (a receiving scan, a supplier's authenticated record), and never approve
// it alone.
//
// Every TPM's claim of a serial waits beside the others, so another TPM
// claiming the serial can neither replace nor hide the machine's own: the
// operator sees each, oldest first, and more than one is itself the sign
// that another TPM claims the serial. The same TPM claiming again
// replaces its own claim. The store is bounded per serial
// (Config.MaxWaitingPerSerial, 8) and in all (Config.MaxWaiting, 1024),
// and makes room by one rule: of the claims considered (the serial's own
// at its bound; the claims of the serials that hold the most when the
// store is full), oldest first, the older half stays and the oldest of
// the newer half goes. A flood under one serial thus evicts only that
// serial's newer claims; a flood under many serials takes from the
// serials that hold several before any serial's only claim, and never
// the older half of the store. A software TPM can make any number of
// EKs, so no bound keeps every claim of a flood: a claim that came during
// one may be gone, and its machine must claim again.
//
// # Console and audit
//
// Run writes the console lines of the runbook word for word: "attest:
// PASSED", "attest: FAILED <verdict>" (e.g. "attest: FAILED
// pending-approval"), "attest: FAILED" for a claim refused without a
// verdict (ErrRefused; not tried again), and "attest: try N failed" when
// try N got no verdict; "attest: try 5 failed" means fleetd did not answer.
// The server writes one slog line "attest.verdict" per verdict, with
// serial, verdict, reason, the refused EK hash (refused_ek_hash) of an
// ek-hash-mismatch, the approved hash of each EK an ek-missing did not see
// presented (missing_ek_rsa2048, missing_ek_eccp256), the peer address,
// and the hashes of the EKs the TPM proved (ek_rsa2048, ek_eccp256); one
// "attest.verdict" without a verdict for a claim a BindingError refused,
// with serial, reason, the cause (error) and peer; and a line
// "attest.refused" for each request it refuses (a malformed or oversized
// body, a replayed, expired, changed or wrong proof, a binding source that
// did not answer or failed, with its error). No activation secret, session,
// sealing key or install code ever appears in a log line or a console
// line; the admission hook's error is answered as ReasonAdmissionFailed,
// never in its own words.
//
// # Safety
//
// Refusals never call the admission hook, and the server writes nothing but
// its log. Replay protection is a record of spent sessions: per Server by
// default, with a random sealing key that dies with the Server; a
// SealingKey (for replicas, or to survive a restart) needs a Config.Spent
// that every Server with the key shares. Bodies are
// bounded (64 KiB by default; 413 beyond) and malformed ones are answered
// 400.
//
// # Platforms and privileges
//
// The server and the protocol are pure Go with no build tags and no cgo.
// OpenTPM opens a TPM character device (/dev/tpmrm0 by default) and is
// implemented on Linux only; reading it and the SMBIOS serial
// (/sys/class/dmi/id/product_serial) needs root, as HookOS runs. OpenChannel
// drives any TPM command channel (a swtpm socket, a simulator) on every
// platform. The client's Device writes nothing to the TPM's NV: its EKs and
// AK are primary keys, recreated as needed and flushed on Close.
//
// # Use
//
// In fleetd:
//
//	srv, err := attest.NewServer(bindings, &attest.Config{
//		SealingKey: key,   // the same on every replica,
//		Spent:      spent, // and so is the record of spent sessions
//		Admit:      admit,
//		Logger:     logger,
//	})
//	mux.Handle("/attest/", srv) // under fleetd's own HTTPS server
//
// In HookOS:
//
//	tpm, err := attest.OpenTPM("")
//	defer tpm.Close()
//	serial, err := attest.ReadSerial(nil)
//	res, err := attest.Run(ctx, "https://fleetd:8443/attest", tpm,
//		attest.Machine{Serial: serial, MAC: mac, LLDP: port},
//		&attest.ClientConfig{HTTPClient: client, Console: os.Stdout})
//
// Package attesttest gives tests the reference TPM simulator and a fast
// software TPM.
package attest
