package configserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
)

// PathPrefix is the path under which the Server answers: a node fetches
// PathPrefix + code.
const PathPrefix = "/config/"

// A Gate answers whether NetBox shows a device planned. The Server asks it
// before every answer that would carry a config, with the fetch's context.
// An error means NetBox did not answer: the fetch gets 503 and the config
// stays. Planned is called from many goroutines at once.
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
	// SpentCodes is how many served codes the Server remembers, by their
	// SHA-256 digest with the device and run but without the config, so
	// that a fetch with a spent code is told apart from an unknown one
	// (Refetched, not Missing) and Put refuses to reuse it. The oldest is
	// forgotten first. Zero: DefaultSpentCodes.
	SpentCodes int
	// Logger gets the Server's log lines: every event, a Missing one at
	// debug level. They never carry an install code or config bytes. Nil:
	// no logs.
	Logger *slog.Logger
	// Events, when set, is called once per Event, synchronously from the
	// goroutine serving the fetch (or from a timer's goroutine for
	// Expired), and from many goroutines at once. It should return
	// quickly: a fetch waits for it. Nil: events are dropped.
	Events func(Event)
}

// A Server holds rendered Talos configs in memory, each under its install
// code until its TTL, and serves each once over HTTP (it is an
// http.Handler; see the package documentation for the URL, statuses and the
// http.Server settings it needs).
//
// A Server is safe for concurrent use. Close drops every config it holds and
// stops its timers; a Server that is not closed keeps a timer per waiting
// config until the config is served or expires.
type Server struct {
	gate         Gate
	ttl          time.Duration
	writeTimeout time.Duration
	log          *slog.Logger
	events       func(Event)

	mu     sync.Mutex
	held   map[digest]*entry
	spent  spentSet
	closed bool
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
	// dropped: Drop or Close let go of the entry while it was busy; the
	// owning fetch zeroes the config when it ends.
	dropped bool
}

// New returns a Server that asks gate whether a device is planned before it
// serves the device's config. cfg may be nil for the defaults. New returns
// ErrNoGate for a nil gate and ErrInvalidConfig for a negative field.
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
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.SpentCodes == 0 {
		c.SpentCodes = DefaultSpentCodes
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		gate:         gate,
		ttl:          c.TTL,
		writeTimeout: c.WriteTimeout,
		log:          log,
		events:       c.Events,
		held:         make(map[digest]*entry),
		spent:        newSpentSet(c.SpentCodes),
	}
	if !ackSupported {
		log.Warn("configserve: on this platform an answer counts as served once it is written; the peer's acknowledgement is not checked")
	}
	return s, nil
}

// Put holds config under code for the Server's TTL, for the device it
// belongs to and the run that rendered it (e.g. the Workflow name
// provision-node-01-1767225600, which events name).
//
// Put takes ownership of config: the Server zeroes it when it is served,
// expires, or is dropped, so the caller must neither change nor keep using
// it. When Put returns an error, config stays the caller's.
//
// Errors: ErrInvalidCode, ErrNoConfig, ErrNoDevice, ErrNoRun, ErrCodeInUse,
// ErrCodeSpent, ErrClosed. None carries the code.
func (s *Server) Put(code string, device Device, run string, config []byte) error {
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
	if s.closed {
		return ErrClosed
	}
	if _, ok := s.held[d]; ok {
		return ErrCodeInUse
	}
	if _, ok := s.spent.get(d); ok {
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
	s.emit(Event{Kind: Expired, Device: e.device, Run: e.run, Text: textExpired(e.run)})
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

// ConnContext records c in the connection's context so that the Server can
// check, on the TCP socket under it, that the peer acknowledged an answer.
// Set it as the http.Server's ConnContext, or call it from yours:
//
//	hs := &http.Server{Handler: mux, ConnContext: configserve.ConnContext}
//
// c may be a *tls.Conn or anything else whose NetConn method leads to a
// *net.TCPConn.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// ServeHTTP answers GET PathPrefix+code. See the package documentation for
// every status.
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

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		answer(w, http.StatusServiceUnavailable, "fleetd is shutting down")
		return
	}
	e := s.held[d]
	if e != nil && !time.Now().Before(e.expires) && !e.busy {
		// The timer has not run yet; expire it here.
		s.removeLocked(d, e)
		s.mu.Unlock()
		s.emit(Event{Kind: Expired, Device: e.device, Run: e.run, Text: textExpired(e.run)})
		s.mu.Lock()
		e = nil
	}
	if e == nil {
		sp, spent := s.spent.get(d)
		s.mu.Unlock()
		if spent {
			s.emit(Event{Kind: Refetched, Device: sp.device, Run: sp.run, Peer: peer, Text: textRefetched})
			answer(w, http.StatusGone, "this install code was served; a code serves once")
			return
		}
		s.emit(Event{Kind: Missing, Peer: peer, Text: textMissing})
		answer(w, http.StatusNotFound, "no config for this install code")
		return
	}
	if e.busy {
		s.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		answer(w, http.StatusServiceUnavailable, "another fetch is answering with this config; try again")
		return
	}
	e.busy = true
	s.mu.Unlock()

	var out outcome
	defer func() { s.release(d, e, out) }()

	planned, err := s.gate.Planned(r.Context(), e.device)
	if err != nil {
		s.log.Warn("configserve: NetBox did not answer whether the device is planned; the config stays",
			deviceAttrs(e.device, e.run), slog.String("peer", peer), slog.Any("error", err))
		w.Header().Set("Retry-After", "5")
		answer(w, http.StatusServiceUnavailable, "NetBox did not answer; try again")
		return
	}
	if !planned {
		s.log.Warn("configserve: NetBox does not show the device planned; the config stays",
			deviceAttrs(e.device, e.run), slog.String("peer", peer))
		answer(w, http.StatusConflict, "the device is not planned")
		return
	}

	if r.ProtoMajor != 1 {
		s.log.Error("configserve: a fetch came over HTTP/2; the server must speak HTTP/1.1 only (see the package documentation)",
			deviceAttrs(e.device, e.run), slog.String("peer", peer))
		answer(w, http.StatusHTTPVersionNotSupported, "use HTTP/1.1")
		return
	}
	conn, _ := r.Context().Value(connKey{}).(net.Conn)
	if conn == nil {
		s.log.Error("configserve: the http.Server's ConnContext does not call configserve.ConnContext, so no answer can be checked",
			deviceAttrs(e.device, e.run), slog.String("peer", peer))
		answer(w, http.StatusInternalServerError, "fleetd cannot check delivery")
		return
	}
	sock, err := tcpSocket(conn)
	if err != nil {
		s.log.Error("configserve: cannot check delivery on this connection",
			deviceAttrs(e.device, e.run), slog.String("peer", peer), slog.Any("error", err))
		answer(w, http.StatusInternalServerError, "fleetd cannot check delivery")
		return
	}

	start := time.Now()
	res, err := s.write(w, conn, sock, e.config, start.Add(s.writeTimeout))
	if err != nil {
		sock.abort()
		s.log.Warn("configserve: the answer did not arrive whole; the connection was reset and the config stays",
			deviceAttrs(e.device, e.run), slog.String("peer", peer), slog.Any("error", err),
			slog.Int("unacknowledged", res.unacked), slog.Int("polls", res.polls), slog.Duration("elapsed", time.Since(start)))
		out.notAcknowledgedBy = peer
		return
	}
	out.served = true
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.Debug("configserve: the peer acknowledged every byte",
			deviceAttrs(e.device, e.run), slog.String("peer", peer),
			slog.Int("polls", res.polls), slog.Duration("ack_wait", res.wait), slog.Duration("elapsed", time.Since(start)))
	}
}

// outcome is how a fetch that owned a config ended.
type outcome struct {
	served            bool
	notAcknowledgedBy string // the peer, when an answer was not acknowledged
}

// release ends a fetch's ownership of e: served spends the code and zeroes
// the config; otherwise the config waits again, unless it was dropped or
// its TTL passed meanwhile. The events come after the entry is released,
// so that whoever sees NotAcknowledged can fetch the config again.
func (s *Server) release(d digest, e *entry, out outcome) {
	s.mu.Lock()
	e.busy = false
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
	case out.served:
		s.emit(Event{Kind: Served, Device: e.device, Run: e.run, Text: textServed(e.run)})
	case expired:
		s.emit(Event{Kind: Expired, Device: e.device, Run: e.run, Text: textExpired(e.run)})
	}
}

// write sends config as the whole answer and waits until the peer's kernel
// acknowledged its last byte, or deadline. Until then, a close of the
// connection resets it.
func (s *Server) write(w http.ResponseWriter, conn net.Conn, sock socket, config []byte, deadline time.Time) (ackResult, error) {
	if err := sock.resetOnClose(); err != nil {
		return ackResult{}, err
	}
	if err := conn.SetWriteDeadline(deadline); err != nil {
		return ackResult{}, err
	}
	h := w.Header()
	h.Set("Content-Type", "application/yaml")
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
