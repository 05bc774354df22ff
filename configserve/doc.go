// Package configserve holds rendered Talos machine configs in memory and
// serves each one once, by install code, to the node whose kernel proves it
// received every byte.
//
// After a render, fleetd puts the config under a fresh install code (NewCode)
// with the device it belongs to and the run that rendered it (Server.Put).
// The installed Talos boots with the kernel argument
//
//	talos.config=https://<fleetd>/config/<code>
//
// and fetches GET /config/<code> from the Server, which fleetd mounts on its
// HTTPS server at PathPrefix:
//
//	srv, err := configserve.New(gate, &configserve.Config{TTL: ttl, Logger: log, Events: journal})
//	mux.Handle(configserve.PathPrefix, srv)
//	hs := &http.Server{Handler: mux, TLSConfig: tlsConfig, ConnContext: configserve.ConnContext}
//	hs.Protocols = new(http.Protocols)
//	hs.Protocols.SetHTTP1(true) // HTTP/1.1 only; or TLSNextProto: map[string]func(...){}
//
// # What a fetch gets
//
// Configs wait only in memory: a restart drops every waiting config, by
// design, since they hold secrets. A fetch of /config/<code> gets:
//
//   - 200 and the config, served once, with Connection: close (one config
//     per connection), if the Server holds a config under
//     the code and the Gate says NetBox shows the device planned. The config
//     counts as served only when the peer's kernel acknowledged every byte
//     of the answer before Config.WriteTimeout passed: then the code is
//     spent, the config is zeroed and dropped, and the event is Served
//     ("fleetd served the config of <run>"). Otherwise the connection is
//     reset (so the kernel sends no more of it), the config stays for the
//     next fetch, and the event is NotAcknowledged ("the peer did not
//     acknowledge all of it", with the peer's address).
//   - 503 with Retry-After: 5, and the config stays, when the Gate fails:
//     NetBox did not answer.
//   - 409 Conflict, and the config stays, when NetBox does not show the
//     device planned.
//   - 503 with Retry-After: 1, without the config, while another fetch of
//     the same code is being answered (or its Gate question is out): at
//     most one answer carrying a config is in flight at a time. If that
//     answer is not acknowledged, a later try gets the config.
//   - 404 when the Server holds no config under the code: it was never put,
//     fleetd restarted, or the TTL passed (the config was dropped, with the
//     event Expired: "the Talos config of <run> expired unread"). The event
//     is Missing ("the node asked for its Talos config, and fleetd holds
//     none for it"), with the peer's address and no device: an unknown code
//     names none.
//   - 410 Gone when the code's config was served: fleetd serves no config
//     twice. The event is Refetched ("the node asked again for the Talos
//     config fleetd served it"), naming the device and run, since the
//     Server remembers the last Config.SpentCodes served codes by their
//     SHA-256, without their configs.
//   - 400 for a last path element that is not an install code, 404 for any
//     other path, 405 for a method other than GET; no event.
//   - 500 when the http.Server does not call ConnContext, and 505 for
//     HTTP/2: the config stays, and the Server logs an error that says what
//     to set.
//   - 503 after Close.
//
// The query and headers (Range included) are ignored.
//
// # Acknowledgement
//
// The acknowledgement is the peer's kernel's, not its application's: a
// kernel acknowledges every byte that reaches it, read or not. A client
// that reads half an answer and closes the connection spends the code all
// the same if its kernel had received the whole answer, as it has a config
// of a few kilobytes, which fits in its receive buffer; only an answer
// that had not all arrived goes unacknowledged, and its config stays. A
// node that loses the config after its kernel received it, as to a power
// loss before Talos writes it to STATE, has spent its code too. A later
// fetch with a spent code gets 410 and the event Refetched, which feeds
// FleetInstallConfigRefetched: set desired_action to provision, and the
// new run renders a new code and config.
//
// On Linux, after the last byte of the answer is written and flushed, the
// Server queries the TCP socket under the connection (through *tls.Conn's
// NetConn) for its outgoing queue, SIOCOUTQ: bytes written but not yet
// acknowledged by the peer. Zero means the peer's kernel holds the whole
// answer. The first query comes at once (on loopback it is mostly the only
// one).
// The acknowledgement of the last byte is due about one round trip after
// it left, so the second query comes after 7/8 of the connection's
// round-trip time (the kernel's tcpi_min_rtt, which delayed
// acknowledgements do not inflate), the next ones every 1/8 of it until
// two round trips have passed, and then at gaps that double up to 10 ms;
// short gaps are slept in the kernel, not spun. The check ends when the
// queue is empty, when the connection closes (as by a reset), or at the
// write deadline. Over a link with a 40 ms round trip it ends about one
// round trip after the last write, after three queries.
//
// The peer's kernel acknowledges at once on a new connection, and when the
// client closes the connection: the answer that carries a config says
// Connection: close, and a client closes once it has read it. On a
// connection that stays open, a kernel may hold its acknowledgement back
// for its delayed-ACK timer (40 ms or more on Linux); the check then lasts
// that long.
//
// While an answer that carries a config is unacknowledged, its socket is
// set to reset on close (SO_LINGER 0), so that a connection closed early,
// by the Server or by net/http after a failed write, drops what the kernel
// still holds of the answer instead of sending it on: once the Server lets
// go of the answer, no more of it reaches anyone, and a later fetch may
// carry the config.
//
// This needs the connection: set ConnContext as the http.Server's
// ConnContext (or call it from yours). It needs HTTP/1.1, where one answer
// owns the connection: disable HTTP/2 on the server (http.Server.Protocols
// with only HTTP/1, or an empty non-nil TLSNextProto). Talos fetches with
// Go's HTTP client, which then speaks HTTP/1.1. The Server sets the
// connection's write deadline for the answer (Config.WriteTimeout) and
// lifts it afterwards.
//
// # Platforms
//
// The acknowledgement check is Linux only (ack_linux.go). Elsewhere
// (ack_others.go) the Server cannot read the socket's queue: it counts an
// answer as served once every byte was written to the socket before the
// write deadline, and New logs a warning saying so. fleetd runs on Linux.
//
// # Secrets
//
// An install code is a secret: the Server keeps only its SHA-256, looks it
// up by that digest (so the time a lookup takes depends on digests, which
// tell nothing about any code), and
// never puts a code in a log line, an event, an error or an answer. Config
// bytes appear only in the one answer that serves them, never in logs; the
// Server zeroes its copy when the config is served, expires, or is
// dropped. Copies that net/http and crypto/tls make while writing the
// answer are outside its reach.
//
// # Concurrency
//
// A Server is safe for concurrent use by any number of fetches and Puts.
// Events and Gate calls come from the goroutines serving fetches, and
// Expired events from timer goroutines.
package configserve
