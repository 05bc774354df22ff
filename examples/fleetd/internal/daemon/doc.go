// Package daemon is fleetd: it admits machines that prove their TPM's EKs,
// provisions them with Tinkerbell and Talos, and serves each node its
// config once. Main runs it from its settings, as the fleetd command does;
// New and Serve run it on parts made elsewhere, as the in-process world of
// package sim does.
//
// # The glue
//
// fleet's packages do not import each other across their jobs; fleetd is
// where they meet. Reading one machine's way through it:
//
//   - A claim and its proof reach attest.Server (daemon.go mounts it at
//     /attest/). Its binding source, bindings in glue.go, reads the device
//     of the claimed serial from NetBox with its approved EK hashes and who
//     wrote them, and keeps that device for the proof that follows
//     (boundDevices), so that an attestation reads the device once.
//   - For an attested proof attest.Server calls admit (glue.go), its
//     attest.Config.Admit. admit records the claimed MAC on the held
//     device (before it waits, so that a storm's MACs share their
//     batched writes), waits its turn (FLEET_MAX_ADMISSIONS), names the
//     switch port from the claim's LLDP frame (lldpwait.Port), turns the
//     quoted boot into NetBox's Secure Boot fields (provenBoot), and calls
//     provision.Provisioner.Admit. The Decision becomes the
//     attest.Admission the machine's console prints: the install code, or
//     "no provision: <reason>" ("refused: <reason>" for a refusal). Every
//     verdict, admitted or not, is counted by judged.
//   - provision renders the config and hands it over through configsOf
//     (glue.go), its provision.Configs: configserve.Server.Put holds it
//     under the install code in this process's memory. A run that ends or
//     is replaced drops it here and, for replicas, at every peer.
//   - The installed node fetches its config from configserve.Server
//     (/config/). configserve asks gate whether NetBox still shows the
//     device planned, and reports each outcome as an Event; configEvent
//     (glue.go) journals it on the device, counts it for the alerts, and
//     takes a served device active. A fetch for a code nobody holds
//     (missing, asks.go) is looked up by the asker's address and journaled
//     at most once a window.
//   - NetBox writes that must not hold up a machine go through one
//     inventory.JournalQueue, which batches lines and keeps device statuses
//     in a lane of their own; refusals that anyone can trigger (a serial
//     two devices hold, an unauthored binding) are journaled through
//     inventory.RefusalJournal, at most once a window per serial.
//
// # The rest of the files
//
//   - settings.go: every FLEET_* setting, its default and -help text;
//     main.go makes the parts from them (partsFrom).
//   - peers.go: replicas. A fetch that reaches another replica than the
//     config's holder borrows it over the peers' API (mutual TLS on its own
//     listener); borrowlimit.go bounds borrows of codes no replica holds.
//   - approver.go: GET /v1/claims/{serial}, the approvers' view of waiting
//     claims, gathered from every replica.
//   - templates.go: the Tinkerbell Templates fleet's Workflows name, made
//     to run the images of the settings at start.
//   - certs.go: the serving certificate, reread when its files change.
//   - listener.go: the machines' listener, capped, keeping each
//     connection's TCP socket reachable for configserve's acknowledgement
//     check.
//   - metrics.go, buildinfo.go: /metrics, which the alert rules in
//     examples/fleetd/alerts read.
package daemon
