package configserve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults for a nil Config or its zero fields.
const (
	DefaultTTL          = time.Hour
	DefaultWriteTimeout = 30 * time.Second
	DefaultSpentCodes   = 4096
	DefaultBusyWait     = 5 * time.Second
	DefaultContentType  = "application/yaml"
	DefaultName         = "the config server"
	DefaultGateName     = "the inventory"
)

// PathPrefix is the path under which the Server answers: a node fetches
// PathPrefix + code.
const PathPrefix = "/config/"

// A Gate answers whether the inventory (NetBox, for fleetd) shows a device
// planned. The Server asks it before every answer that would carry a
// config, with the fetch's context. An error means the inventory did not
// answer: the fetch gets 503 and the config stays. Planned is called from
// many goroutines at once.
type Gate interface {
	Planned(ctx context.Context, device Device) (bool, error)
}

// Config holds a Server's optional settings. A nil *Config means every
// default. A Config must not change after New is given it.
type Config struct {
	// TTL is how long a config waits unread after Put before the Server
	// drops it (FLEET_CONFIG_TTL). Zero: DefaultTTL.
	TTL time.Duration
	// WriteTimeout bounds one answer that carries a config: from its
	// first byte until the peer's kernel acknowledged its last. An answer
	// that runs over does not count as served; its connection is reset
	// and the config stays. Zero: DefaultWriteTimeout.
	WriteTimeout time.Duration
	// BusyWait is how long a fetch (or a Lend) that finds another answer
	// carrying its config in flight waits for that answer's outcome: when
	// it ends, the fetch is answered by it (410 once the config was
	// served, the config itself when the other answer did not arrive),
	// so that a node that asks again in the moment between its kernel's
	// acknowledgement and the Server's release hears 410, not "try
	// again". A fetch still waiting at BusyWait gets 503 with
	// Retry-After: 1. Zero: DefaultBusyWait; negative: no wait.
	BusyWait time.Duration
	// SpentCodes is how many served codes the Server remembers, by their
	// SHA-256 digest with the device and run but without the config, so
	// that a fetch with a spent code is told apart from an unknown one
	// (Refetched, not Missing) and Put refuses to reuse it. The oldest is
	// forgotten first. Zero: DefaultSpentCodes.
	SpentCodes int
	// ContentType is the Content-Type of an answer that carries a config.
	// Empty: DefaultContentType.
	ContentType string
	// Name is how answers and event texts name the service that holds the
	// configs, as in "<Name> served the config of <run>" (fleetd: "fleetd",
	// which makes the runbook's lines). Empty: DefaultName.
	Name string
	// GateName is how answers and log lines name what the Gate asks, as in
	// "<GateName> did not answer; try again" (fleetd: "NetBox"). Empty:
	// DefaultGateName.
	GateName string
	// Logger gets the Server's log lines: every event, a Missing one at
	// debug level. They never carry an install code or config bytes. Nil:
	// no logs.
	Logger *slog.Logger
	// Borrow, when set, is asked for the config of a fetch whose code this
	// Server holds no config under and did not serve: it finds the Server
	// (of another replica) that holds it, has it Lend the config, and
	// returns the Loan (NewLoan) or Lend's error (see Server.Lend and the
	// errors there; any other error answers 503). It is called with the
	// code, which it must keep secret, and a context that carries the
	// fetch's values but is not canceled when the node leaves (a lend
	// cut short could leave the config lent, unread, until the loan's
	// deadline); it ends after WriteTimeout. A loan that comes back for a
	// node that left is settled unserved at once. Nil: such a fetch is
	// Missing.
	Borrow func(ctx context.Context, code string) (*Loan, error)
	// Events, when set, is called once per Event, synchronously from the
	// goroutine serving the fetch (or from a timer's goroutine for
	// Expired), and from many goroutines at once. It should return
	// quickly: a fetch waits for it. Nil: events are dropped.
	Events func(Event)
}

// A Server holds rendered Talos configs in memory, each under its install
// code until its TTL, and serves each once over HTTP (it is an
// http.Handler at PathPrefix; ServeHTTP lists its statuses, and
// ConfigureServer sets up the http.Server that serves it).
//
// A Server is safe for concurrent use. Close drops every config it holds and
// stops its timers; a Server that is not closed keeps a timer per waiting
// config until the config is served or expires.
type Server struct {
	gate         Gate
	ttl          time.Duration
	writeTimeout time.Duration
	busyWait     time.Duration
	contentType  string
	text         texts
	log          *slog.Logger
	events       func(Event)
	borrow       func(ctx context.Context, code string) (*Loan, error)

	mu         sync.Mutex
	held       map[digest]*entry
	spent      spentSet
	closed     bool
	configured bool // ConfigureServer was called
}

// entry is one waiting config. Its fields are guarded by Server.mu.
type entry struct {
	config  []byte
	device  Device
	run     string
	expires time.Time
	timer   *time.Timer
	// busy: one fetch owns the entry (asking the gate, or answering). No
	// other fetch gets the config meanwhile.
	busy bool
	// freed is closed when the fetch or loan that owns the entry ends;
	// a new one is made each time the entry becomes busy.
	freed chan struct{}
	// dropped: Drop or Close let go of the entry while it was busy; the
	// owning fetch zeroes the config when it ends.
	dropped bool
}

// New returns a Server that asks gate whether a device is planned before it
// serves the device's config. cfg may be nil for the defaults. New returns
// ErrNoGate for a nil gate and ErrInvalidConfig for a negative field.
//
// The Server holds no config until ConfigureServer has set up the
// http.Server that serves it.
func New(gate Gate, cfg *Config) (*Server, error) {
	if gate == nil {
		return nil, ErrNoGate
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.TTL < 0 || c.WriteTimeout < 0 || c.SpentCodes < 0 {
		return nil, fmt.Errorf("%w: TTL %v, WriteTimeout %v and SpentCodes %d may not be negative",
			ErrInvalidConfig, c.TTL, c.WriteTimeout, c.SpentCodes)
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		gate:         gate,
		ttl:          cmp.Or(c.TTL, DefaultTTL),
		writeTimeout: cmp.Or(c.WriteTimeout, DefaultWriteTimeout),
		busyWait:     cmp.Or(c.BusyWait, DefaultBusyWait),
		contentType:  cmp.Or(c.ContentType, DefaultContentType),
		text:         newTexts(cmp.Or(c.Name, DefaultName), cmp.Or(c.GateName, DefaultGateName)),
		log:          log,
		events:       c.Events,
		borrow:       c.Borrow,
		held:         make(map[digest]*entry),
		spent:        newSpentSet(cmp.Or(c.SpentCodes, DefaultSpentCodes)),
	}
	if !ackSupported {
		log.Warn("configserve: on this platform an answer counts as served once it is written; the peer's acknowledgement is not checked")
	}
	return s, nil
}

// Put holds config under code for the Server's TTL, for the device it
// belongs to and the run that rendered it (e.g. the Workflow name
// provision-node-01-1767225600, which events name). The code comes first,
// as the key the config is held under.
//
// Put takes ownership of config: the Server zeroes it when it is served,
// expires, or is dropped, so the caller must neither change nor keep using
// it. When Put returns an error, config stays the caller's.
//
// Errors: ErrInvalidCode, ErrNoConfig, ErrNoDevice, ErrNoRun, ErrCodeInUse,
// ErrCodeSpent, ErrClosed, and ErrNotConfigured before ConfigureServer was
// called: a config no fetch could get is refused before it is held. None
// carries the code.
func (s *Server) Put(code string, config []byte, device Device, run string) error {
	switch {
	case !ValidCode(code):
		return ErrInvalidCode
	case len(config) == 0:
		return ErrNoConfig
	case device.ID == 0 && device.Name == "":
		return ErrNoDevice
	case run == "":
		return ErrNoRun
	}
	d := digestOf(code)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch _, spent := s.spent.get(d); {
	case s.closed:
		return ErrClosed
	case !s.configured:
		return ErrNotConfigured
	case s.held[d] != nil:
		return ErrCodeInUse
	case spent:
		return ErrCodeSpent
	}
	e := &entry{config: config, device: device, run: run, expires: time.Now().Add(s.ttl)}
	e.timer = time.AfterFunc(s.ttl, func() { s.expire(d, e) })
	s.held[d] = e
	s.log.Info("configserve: holding a config", deviceAttrs(device, run), slog.Int("bytes", len(config)), slog.Duration("ttl", s.ttl))
	return nil
}

// Drop lets go of the config held under code before its TTL, for a run that
// ended, and zeroes it. It reports whether the Server held one. A fetch
// already answering with the config finishes; if its answer is
// acknowledged, the config counts as served.
func (s *Server) Drop(code string) bool {
	if !ValidCode(code) {
		return false
	}
	d := digestOf(code)
	s.mu.Lock()
	e, ok := s.held[d]
	if ok {
		s.removeLocked(d, e)
	}
	s.mu.Unlock()
	if ok {
		s.log.Info("configserve: dropped a config", deviceAttrs(e.device, e.run))
	}
	return ok
}

// DropRun lets go of the config held for run (the run Put named) before
// its TTL, as Drop does, for a run that was replaced, deleted or ended
// without success, when the caller knows the run but not its code. It
// reports whether the Server held one. It looks at every waiting config.
func (s *Server) DropRun(run string) bool {
	if run == "" {
		return false
	}
	var dropped *entry
	s.mu.Lock()
	for d, e := range s.held {
		if e.run == run {
			s.removeLocked(d, e)
			dropped = e
			break
		}
	}
	s.mu.Unlock()
	if dropped != nil {
		s.log.Info("configserve: dropped a config", deviceAttrs(dropped.device, run))
	}
	return dropped != nil
}

// MissingText is the Text of the Server's Missing events: "the node asked
// for its Talos config, and <Name> holds none for it". A caller that
// journals a node's ask before Borrow answers ErrNotHeld writes it.
func (s *Server) MissingText() string { return s.text.missing }

// Waiting returns how many configs the Server holds.
func (s *Server) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// Close drops and zeroes every config the Server holds and stops its timers.
// Fetches after Close get 503; Put returns ErrClosed. Close is safe to call
// more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for d, e := range s.held {
		s.removeLocked(d, e)
	}
	return nil
}

// removeLocked forgets e, stops its timer and zeroes its config unless a
// fetch owns it (that fetch zeroes it when it ends).
func (s *Server) removeLocked(d digest, e *entry) {
	delete(s.held, d)
	e.timer.Stop()
	if e.busy {
		e.dropped = true
		return
	}
	clear(e.config)
	e.config = nil
}

// expire runs from e's timer.
func (s *Server) expire(d digest, e *entry) {
	s.mu.Lock()
	if s.held[d] != e || e.busy {
		// Gone already, or a fetch owns it: that fetch expires it if its
		// answer is not acknowledged.
		s.mu.Unlock()
		return
	}
	s.removeLocked(d, e)
	s.mu.Unlock()
	s.emit(Event{Kind: Expired, Device: e.device, Run: e.run, Text: s.text.expired(e.run)})
}

// emit stamps, logs and reports ev.
func (s *Server) emit(ev Event) {
	ev.Time = time.Now()
	// Anyone who reaches the Server can ask for unknown codes, as fast as
	// they like: a Missing event is logged at debug level, and the caller,
	// who gets every event, decides what to make of a flood of them.
	level := slog.LevelInfo
	switch ev.Kind {
	case Served:
	case Missing:
		level = slog.LevelDebug
	default:
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("event", ev.Kind.String())}
	if ev.Kind != Missing {
		attrs = append(attrs, deviceAttrs(ev.Device, ev.Run))
	}
	if ev.Peer != "" {
		attrs = append(attrs, slog.String("peer", ev.Peer))
	}
	s.log.LogAttrs(context.Background(), level, "configserve: "+ev.Text, attrs...)
	if s.events != nil {
		s.events(ev)
	}
}

func deviceAttrs(d Device, run string) slog.Attr {
	return slog.Group("config", slog.Int64("device_id", d.ID), slog.String("device", d.Name), slog.String("run", run))
}

type connKey struct{}

// connContext records c in the connection's context, so that the Server
// can check, on the TCP socket under it, that the peer acknowledged an
// answer.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// ConfigureServer sets up hs to serve s, wherever hs's handler mounts s:
//
//   - hs.ConnContext records each connection for s, after calling the
//     ConnContext hs had, if any: the Server checks on the connection's TCP
//     socket that the peer's kernel acknowledged every byte of an answer
//     (c may be a *tls.Conn or anything else whose NetConn method leads to
//     a *net.TCPConn);
//   - hs speaks HTTP/1.1 only (hs.Protocols), so that an answer owns its
//     connection.
//
// Call it once per http.Server, after setting hs's other fields and before
// hs serves. Until it has been called, Put refuses every config
// (ErrNotConfigured), so a Server without it fails when the first config
// comes, not when a node fetches. It returns ErrHTTP2, and changes nothing,
// when hs asks for HTTP/2: in hs.Protocols, an "h2" entry in
// hs.TLSNextProto, or "h2" in hs.TLSConfig.NextProtos. It returns ErrClosed
// after Close.
//
// A fetch served by an http.Server whose ConnContext or protocols were
// changed after ConfigureServer gets 500 or 505, and the config stays.
func (s *Server) ConfigureServer(hs *http.Server) error {
	switch {
	case hs == nil:
		return fmt.Errorf("%w: no http.Server", ErrInvalidConfig)
	case hs.Protocols != nil && (hs.Protocols.HTTP2() || hs.Protocols.UnencryptedHTTP2()):
		return fmt.Errorf("%w: http.Server.Protocols enables it", ErrHTTP2)
	case hs.TLSNextProto[http2Proto] != nil:
		return fmt.Errorf("%w: http.Server.TLSNextProto holds %q", ErrHTTP2, http2Proto)
	case hs.TLSConfig != nil && slices.Contains(hs.TLSConfig.NextProtos, http2Proto):
		return fmt.Errorf("%w: http.Server.TLSConfig.NextProtos holds %q", ErrHTTP2, http2Proto)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if hs.Protocols == nil {
		hs.Protocols = new(http.Protocols)
	}
	hs.Protocols.SetHTTP1(true)
	prev := hs.ConnContext
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		return connContext(ctx, c)
	}
	s.configured = true
	return nil
}

// http2Proto is HTTP/2's ALPN protocol ID over TLS.
const http2Proto = "h2"

// ServeHTTP answers GET PathPrefix+code:
//
//   - 200 and the config, with Connection: close (one config per
//     connection), when the Server holds a config under the code and the
//     Gate says the device is planned. The config counts as served only
//     when the peer's kernel acknowledged every byte of the answer before
//     Config.WriteTimeout passed: then the code is spent, the config is
//     zeroed and dropped, and the event is Served. Otherwise the connection
//     is reset (so the kernel sends no more of it), the config stays for
//     the next fetch, and the event is NotAcknowledged, with the peer's
//     address.
//   - 503 with Retry-After: 5, and the config stays, when the Gate fails.
//   - 409 Conflict, and the config stays, when the Gate says the device is
//     not planned.
//   - At most one answer carrying a config is in flight at a time: a fetch
//     that comes while another fetch of the same code is being answered
//     (or its Gate question is out, or the config is lent to another
//     replica) waits for that answer's outcome, up to Config.BusyWait, and
//     is then answered as if it came after it: 410 once the config was
//     served, the config when that answer was not acknowledged. Still in
//     flight at BusyWait: 503 with Retry-After: 1, without the config; try
//     again.
//   - 404 when the Server holds no config under the code: it was never put,
//     the process restarted, or the TTL passed (the config was dropped,
//     with the event Expired). The event is Missing, with the peer's
//     address and no device: an unknown code names none.
//   - 410 Gone when the code's config was served: no config is served
//     twice. The event is Refetched, naming the device and run, since the
//     Server remembers the last Config.SpentCodes served codes by their
//     SHA-256, without their configs.
//   - 400 for a last path element that is not an install code, 404 for any
//     other path, 405 for a method other than GET; no event.
//   - 500 when the connection was not recorded (ConnContext was replaced
//     after ConfigureServer), and 505 for HTTP/2: the config stays, and the
//     Server logs an error that says what to set.
//   - 503 after Close.
//
// The query and headers (Range included) are ignored.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	code, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok || code == "" || strings.Contains(code, "/") {
		answer(w, http.StatusNotFound, "not found")
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		answer(w, http.StatusMethodNotAllowed, "only GET")
		return
	}
	if !ValidCode(code) {
		answer(w, http.StatusBadRequest, "not an install code")
		return
	}
	d := digestOf(code)
	peer := r.RemoteAddr
	f := s.await(r.Context(), d)
	switch f.found {
	case foundClosed:
		answer(w, http.StatusServiceUnavailable, s.text.closed)
	case foundSpent:
		s.emit(Event{Kind: Refetched, Device: f.spent.device, Run: f.spent.run, Peer: peer, Text: s.text.refetched})
		answer(w, http.StatusGone, "this install code was served; a code serves once")
	case foundNone:
		if s.borrow != nil {
			s.serveBorrowed(w, r, code)
			return
		}
		s.emit(Event{Kind: Missing, Peer: peer, Text: s.text.missing})
		answer(w, http.StatusNotFound, "no config for this install code")
	case foundBusy:
		w.Header().Set("Retry-After", "1")
		answer(w, http.StatusServiceUnavailable, "another fetch is answering with this config; try again")
	case foundOwned:
		s.serveOwned(w, r, d, f.owned)
	}
}

// found says what a fetch's code stands for.
type found int

const (
	foundClosed found = iota + 1 // the Server is closed
	foundSpent                   // the code's config was served
	foundNone                    // no config is held under the code
	foundBusy                    // another fetch owns the config
	foundOwned                   // the fetch owns the config now
)

// fetch is what claim decided for one fetch under the lock, for
// ServeHTTP to act on outside it.
type fetch struct {
	found   found
	owned   *entry        // foundOwned: the entry, busy until release
	spent   spentEntry    // foundSpent: whose config the code served
	freed   chan struct{} // foundBusy: closed when the owner lets go
	expired *entry        // an entry whose TTL claim found passed; it is gone
}

// await claims the code's digest as claim does, and reports an entry
// claim found expired. While another answer carrying the config is in
// flight, it waits up to BusyWait for that answer's outcome, or until ctx
// ends, and claims again: a fetch that comes in the moment between a
// node's acknowledgement and the release of its config then hears that
// the code was served (410), and one that comes while an answer goes
// unacknowledged gets the config. It returns foundBusy when the wait ran
// out.
func (s *Server) await(ctx context.Context, d digest) fetch {
	var timeout <-chan time.Time
	for {
		f := s.claim(d, time.Now())
		if e := f.expired; e != nil {
			s.emit(Event{Kind: Expired, Device: e.device, Run: e.run, Text: s.text.expired(e.run)})
		}
		if f.found != foundBusy || s.busyWait < 0 {
			return f
		}
		if timeout == nil {
			t := time.NewTimer(s.busyWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-f.freed:
		case <-timeout:
			return f
		case <-ctx.Done():
			return f
		}
	}
}

// claim looks the code's digest up, in one critical section: a config
// whose TTL passed before its timer ran is expired here, and a config no
// other fetch owns becomes the fetch's own (busy) until release.
func (s *Server) claim(d digest, now time.Time) (f fetch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fetch{found: foundClosed}
	}
	e := s.held[d]
	if e != nil && !now.Before(e.expires) && !e.busy {
		// The timer has not run yet; expire it here.
		s.removeLocked(d, e)
		f.expired, e = e, nil
	}
	switch {
	case e == nil:
		f.found = foundNone
		if sp, ok := s.spent.get(d); ok {
			f.found, f.spent = foundSpent, sp
		}
	case e.busy:
		f.found, f.freed = foundBusy, e.freed
	default:
		e.busy, e.freed = true, make(chan struct{})
		f.found, f.owned = foundOwned, e
	}
	return f
}

// serveOwned answers a fetch that owns e: it asks the Gate, checks that
// the connection can tell an acknowledged answer, writes the config and
// waits for the acknowledgement, and releases e however that ends.
func (s *Server) serveOwned(w http.ResponseWriter, r *http.Request, d digest, e *entry) {
	peer := r.RemoteAddr
	var out outcome
	defer func() { s.release(d, e, out) }()

	planned, err := s.gate.Planned(r.Context(), e.device)
	if err != nil {
		s.log.Warn("configserve: "+s.text.gateName+" did not answer whether the device is planned; the config stays",
			deviceAttrs(e.device, e.run), slog.String("peer", peer), slog.Any("error", err))
		w.Header().Set("Retry-After", "5")
		answer(w, http.StatusServiceUnavailable, s.text.gateDown)
		return
	}
	if !planned {
		s.log.Warn("configserve: "+s.text.gateName+" does not show the device planned; the config stays",
			deviceAttrs(e.device, e.run), slog.String("peer", peer))
		answer(w, http.StatusConflict, "the device is not planned")
		return
	}

	out.served, out.notAcknowledgedBy = s.deliver(w, r, s.contentType, e.config, e.device, e.run)
}

// deliver answers a fetch with config, of device's run: it checks that the
// connection can tell an acknowledged answer, writes the config and waits
// for the acknowledgement. served says the peer's kernel acknowledged
// every byte; notAcknowledgedBy names the peer when an answer was written
// but not acknowledged.
func (s *Server) deliver(w http.ResponseWriter, r *http.Request, contentType string, config []byte, device Device, run string) (served bool, notAcknowledgedBy string) {
	peer := r.RemoteAddr
	if r.ProtoMajor != 1 {
		s.log.Error("configserve: a fetch came over HTTP/2; the server must speak HTTP/1.1 only (call Server.ConfigureServer last)",
			deviceAttrs(device, run), slog.String("peer", peer))
		answer(w, http.StatusHTTPVersionNotSupported, "use HTTP/1.1")
		return false, ""
	}
	conn, _ := r.Context().Value(connKey{}).(net.Conn)
	if conn == nil {
		s.log.Error("configserve: the http.Server's ConnContext does not record the connection, so no answer can be checked: call Server.ConfigureServer after setting ConnContext",
			deviceAttrs(device, run), slog.String("peer", peer))
		answer(w, http.StatusInternalServerError, s.text.cannotCheck)
		return false, ""
	}
	sock, err := tcpSocket(conn)
	if err != nil {
		s.log.Error("configserve: cannot check delivery on this connection",
			deviceAttrs(device, run), slog.String("peer", peer), slog.Any("error", err))
		answer(w, http.StatusInternalServerError, s.text.cannotCheck)
		return false, ""
	}

	start := time.Now()
	res, err := s.write(w, conn, sock, contentType, config, start.Add(s.writeTimeout))
	if err != nil {
		sock.abort()
		s.log.Warn("configserve: the answer did not arrive whole; the connection was reset and the config stays",
			deviceAttrs(device, run), slog.String("peer", peer), slog.Any("error", err),
			slog.Int("unacknowledged", res.unacked), slog.Int("polls", res.polls), slog.Duration("elapsed", time.Since(start)))
		return false, peer
	}
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.Debug("configserve: the peer acknowledged every byte",
			deviceAttrs(device, run), slog.String("peer", peer),
			slog.Int("polls", res.polls), slog.Duration("ack_wait", res.wait), slog.Duration("elapsed", time.Since(start)))
	}
	return true, ""
}

// outcome is how a fetch that owned a config ended.
type outcome struct {
	served            bool
	notAcknowledgedBy string // the peer, when an answer was not acknowledged
	// reported: the fetch's Server (a borrower) reported Served or
	// NotAcknowledged itself.
	reported bool
}

// release ends a fetch's ownership of e: served spends the code and zeroes
// the config; otherwise the config waits again, unless it was dropped or
// its TTL passed meanwhile. The events come after the entry is released,
// so that whoever sees NotAcknowledged can fetch the config again.
func (s *Server) release(d digest, e *entry, out outcome) {
	s.mu.Lock()
	e.busy = false
	close(e.freed)
	held := s.held[d] == e
	expired := false
	switch {
	case out.served:
		if held {
			delete(s.held, d)
			e.timer.Stop()
		}
		s.spent.add(d, spentEntry{device: e.device, run: e.run})
		clear(e.config)
		e.config = nil
	case e.dropped:
		clear(e.config)
		e.config = nil
	case held && !time.Now().Before(e.expires):
		s.removeLocked(d, e)
		expired = true
	}
	s.mu.Unlock()
	if out.notAcknowledgedBy != "" {
		s.emit(Event{Kind: NotAcknowledged, Device: e.device, Run: e.run, Peer: out.notAcknowledgedBy, Text: textNotAcknowledged})
	}
	switch {
	case out.served && out.reported:
	case out.served:
		s.emit(Event{Kind: Served, Device: e.device, Run: e.run, Text: s.text.served(e.run)})
	case expired:
		s.emit(Event{Kind: Expired, Device: e.device, Run: e.run, Text: s.text.expired(e.run)})
	}
}

// write sends config as the whole answer and waits until the peer's kernel
// acknowledged its last byte, or deadline. Until then, a close of the
// connection resets it (see socket.resetOnClose). The write deadline is
// lifted once the answer is acknowledged.
func (s *Server) write(w http.ResponseWriter, conn net.Conn, sock socket, contentType string, config []byte, deadline time.Time) (ackResult, error) {
	if err := sock.resetOnClose(); err != nil {
		return ackResult{}, err
	}
	if err := conn.SetWriteDeadline(deadline); err != nil {
		return ackResult{}, err
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(config)))
	h.Set("Cache-Control", "no-store")
	// One config per connection: a client closes the connection once it
	// has read the answer, and its FIN acknowledges every byte at once. On
	// a kept-alive connection the peer's kernel may delay its
	// acknowledgement by its delayed-ACK timer.
	h.Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(config); err != nil {
		return ackResult{}, err
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		return ackResult{}, err
	}
	res, err := awaitAck(sock, deadline)
	if errors.Is(err, errAckUnsupported) {
		// The documented fallback: the whole answer was written.
		err = nil
	}
	if err != nil {
		return res, err
	}
	// Served. Lift the deadline and the reset, so that net/http closes the
	// connection gracefully; if that fails the connection is broken, and
	// net/http finds out on its own.
	conn.SetWriteDeadline(time.Time{})
	sock.gracefulClose()
	return res, nil
}

// answer writes a short plain-text answer that never carries a code.
func answer(w http.ResponseWriter, status int, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintln(w, text)
}
