// Command fleetd is the server side of the runbook "Provision a node": it
// admits machines that prove their TPM's EKs, provisions them with
// Tinkerbell and Talos, and serves each node its config once.
//
//	fleetd            serve, with settings from the environment
//	fleetd -help      list the settings
//	fleetd -version   print the version, the commit and the Go release
//
// The version line, e.g. "fleetd version=v0.0.0-20261201120000-3c16fca1a2b3
// revision=3c16fca1a2b3... modified=false goversion=go1.26.8", comes from
// the build's own information (package internal/buildinfo); the first log
// line ("fleetd: starting") and the fleet_build_info gauge carry the same
// fields, so which commit a host runs is one command away.
//
// One HTTPS listener (FLEET_LISTEN) serves:
//
//	POST /attest/claim, /attest/proof   the attestation protocol (package attest)
//	GET  /config/<install code>         the Talos config, once (package configserve)
//	GET  /v1/claims/<serial>            every waiting claim (one per TPM), to approvers only
//
// and a plain HTTP listener (FLEET_METRICS_LISTEN) serves /metrics for
// Prometheus, /healthz (liveness: fleetd serves) and /readyz (readiness:
// the certificate is valid, NetBox and Tinkerbell's API server answered
// within FLEET_READY_WINDOW; 503 with one line per cause). The alert rules in alerts/fleet.rules.yaml fire
// from the metrics.
//
// fleetd writes the runbook's audit lines (attest.verdict, attest.install,
// fleet.render) as JSON on standard error, journals every event on the
// device in NetBox, and runs provision's loop, which picks up the runs in
// flight from the cluster after a restart. SIGINT or SIGTERM shuts it down
// gracefully; configs waiting to be fetched are dropped, by design: they
// hold secrets.
//
// NetBox is written in the background (inventory.JournalQueue), so that
// no fetch or attestation waits for it: a device's status (active once its
// node has its config) in a lane of its own, which holds the latest status wanted per device and
// which no journal line can fill; journal lines in a queue that, when
// full, drops them (counted in fleet_journal_lines_lost_total, and
// logged). Asks for a config fleetd does not hold, which anyone can send,
// are looked up and journaled at most once a minute per address, on the
// device NetBox names at the address, in a line that counts them; asks
// from other addresses are only counted, and never make a metric series
// of their own.
//
// Exit codes: 0 after a clean shutdown, 1 on a failure, 2 on bad settings.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(daemon.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
