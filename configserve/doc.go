// Package configserve holds rendered Talos machine configs in memory and
// serves each one once, by install code, to the node whose kernel proves it
// received every byte.
//
// After a render, the caller puts the config under a fresh install code
// (NewCode) with the device it belongs to and the run that rendered it
// (Server.Put). The installed Talos boots with the kernel argument
// talos.config=https://<host>/config/<code> and fetches GET /config/<code>
// from the Server, an http.Handler mounted at PathPrefix:
//
//	srv, err := configserve.New(gate, &configserve.Config{TTL: ttl, Name: "fleetd", GateName: "NetBox", Events: journal})
//	mux.Handle(configserve.PathPrefix, srv)
//	hs := &http.Server{Handler: mux, TLSConfig: tlsConfig}
//	err = srv.ConfigureServer(hs) // HTTP/1.1 only, connections recorded; Put refuses configs until then
//	err = hs.Serve(tlsListener)
//
// # Guarantees
//
//   - A config is served at most once: the answer that carries it counts as
//     served only when the peer's kernel acknowledged every byte of it
//     (Linux; elsewhere, once every byte was written, and New logs a
//     warning). An answer that does not arrive whole leaves the config for
//     the next fetch; at most one answer carrying a config is in flight,
//     and a fetch that meets one waits for its outcome (Config.BusyWait),
//     so that a node asking again right after it was served hears 410.
//   - A config is served only while the Gate says its device is planned.
//   - A config waits only in memory, for Config.TTL: a restart drops every
//     waiting config, by design, since they hold secrets.
//   - Each fetch's outcome is an Event (Served, NotAcknowledged, Refetched,
//     Missing, Expired, Lost) for the caller to journal and count; its Text
//     names the service by Config.Name. ServeHTTP lists every status.
//
// # Replicas
//
// Servers in several replicas of one service behind one address each hold
// the configs rendered in their own replica, and a fetch may reach any of
// them. A Server that holds no config under a fetch's code borrows it
// (Config.Borrow) from the Server that does, which lends it for that one
// fetch (Server.Lend): the borrower answers and waits for the node's
// acknowledgement as for a config of its own, reports the outcome
// (Served or NotAcknowledged, from the borrower: it saw the answer, and it
// is the one still alive if the lender's replica dies meanwhile), then
// settles the loan (Loan.Settle). Only the lender holds and spends the
// config, so each is served at most once across the replicas. A loan not
// settled by its deadline (the borrower died mid-answer) is dropped,
// served or not, and reported Lost by the lender: the node's next fetch is
// Missing, as when the lender's replica dies.
//
// # Secrets
//
// An install code is a secret: the Server keeps only its SHA-256, looks it
// up by that digest, and never puts a code in a log line, an event, an
// error or an answer. Config bytes appear only in the one answer that
// serves them; the Server zeroes its copy when the config is served,
// expires, or is dropped. Copies that net/http and crypto/tls make while
// writing the answer are outside its reach.
//
// # Concurrency
//
// A Server is safe for concurrent use by any number of fetches and Puts.
// Events and Gate calls come from the goroutines serving fetches, and
// Expired events from timer goroutines.
package configserve
