package netboxtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Reporter receives what the schema check finds. A *testing.T or
// *testing.B satisfies it, so a mismatch fails the test.
type Reporter interface {
	Errorf(format string, args ...any)
}

// Config holds a Server's optional settings. A nil *Config means every
// default below.
type Config struct {
	// Validate turns on the schema check: every request the server
	// receives and every answer it sends is checked against NetBox 4.3's
	// OpenAPI document, and each mismatch is reported with Errorf. nil:
	// no check (as in a demo, or a load test where the check would
	// dominate).
	Validate Reporter
	// Users are the NetBox users to create, each with an API token
	// (Server.Token). nil means one user, "admin".
	Users []string
	// MaxPageSize is NetBox's MAX_PAGE_SIZE, the largest page a list
	// answers (limit=0 asks for it); 0 means 1000, NetBox's default.
	MaxPageSize int
	// PageSize is NetBox's PAGINATE_COUNT, the page a list answers without
	// a limit; 0 means 50, NetBox's default.
	PageSize int
	// MaxBody bounds a request body; 0 means 16 MiB. A larger body is
	// answered 413.
	MaxBody int64
}

// Server is an in-process NetBox: an httptest server that implements the
// part of NetBox 4.3's REST API fleet uses, with token authentication,
// filtering, limit/offset pagination, bulk writes and the changelog.
//
// A Server is safe for concurrent use. Close it when done; Close
// interrupts requests that wait on an injected fault.
type Server struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:41234, without a
	// trailing slash: the URL a NetBox client is given.
	URL string

	hs       *httptest.Server
	cfg      Config
	validate *validator
	report   Reporter
	closed   chan struct{}
	closing  sync.Once

	mu sync.Mutex // guards st
	st *store

	faultMu sync.Mutex
	fault   Fault

	reqMu    sync.Mutex
	requests []Request
}

// Request is one request the server received.
type Request struct {
	Method string
	URI    string // path and query, e.g. /api/dcim/devices/?serial=S
	User   string // the token's user; "" when the token was missing or refused
}

// A FaultKind is a way for NetBox to fail. The zero value is no fault.
type FaultKind int

// The faults Inject can set.
const (
	// Healthy answers every request.
	Healthy FaultKind = iota
	// Down closes each connection without an answer, as a NetBox that went
	// away does.
	Down
	// Slow answers after Fault.Delay. A request whose client gives up first
	// is dropped unprocessed.
	Slow
	// Failing answers Fault.Status (503 unless set) without processing the
	// request.
	Failing
	// Cut processes the request, then cuts the connection halfway through
	// the answer: the write happened, the client never learns it.
	Cut
)

// Fault is what Inject sets.
type Fault struct {
	Kind FaultKind
	// After is the number of requests served normally before the fault
	// starts, e.g. to fail an apply midway.
	After int
	// Delay is how long Slow waits.
	Delay time.Duration
	// Status is what Failing answers; 0 means 503.
	Status int
	// User, when set, limits the fault to the requests of that user's
	// token (e.g. one program's, while the test's own reads go on); "":
	// every request.
	User string
}

// New starts a Server with an empty NetBox but for cfg's users.
func New(cfg *Config) *Server {
	s := &Server{st: newStore(), closed: make(chan struct{})}
	if cfg != nil {
		s.cfg = *cfg
	}
	if s.cfg.MaxPageSize <= 0 {
		s.cfg.MaxPageSize = 1000
	}
	if s.cfg.PageSize <= 0 {
		s.cfg.PageSize = 50
	}
	if s.cfg.MaxBody <= 0 {
		s.cfg.MaxBody = 16 << 20
	}
	if s.cfg.Validate != nil {
		s.report = s.cfg.Validate
		v, err := newValidator()
		if err != nil {
			s.report.Errorf("netboxtest: the schema check cannot run: %v", err)
		}
		s.validate = v
	}
	users := s.cfg.Users
	if users == nil {
		users = []string{"admin"}
	}
	for _, u := range users {
		s.AddUser(u)
	}
	s.hs = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = s.hs.URL
	return s
}

// Close shuts the server down, ending requests that wait on a fault.
func (s *Server) Close() {
	s.closing.Do(func() { close(s.closed) })
	s.hs.CloseClientConnections()
	s.hs.Close()
}

// Handler is the handler the server's URL serves, for a client that calls
// it in memory, without a connection: e.g. through an http.RoundTripper in
// a testing/synctest bubble, where waiting on a socket would keep the
// bubble's clock from moving. The faults that cut the connection (Down,
// Cut) need a ResponseWriter that implements http.Hijacker.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Inject sets the fault for the requests that follow; Fault{} heals.
func (s *Server) Inject(f Fault) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.fault = f
}

// faultFor returns the fault for the next request, of user, counting down
// After.
func (s *Server) faultFor(user string) Fault {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if s.fault.Kind == Healthy || s.fault.User != "" && s.fault.User != user {
		return Fault{}
	}
	if s.fault.After > 0 {
		s.fault.After--
		return Fault{}
	}
	return s.fault
}

// Requests returns the requests received since the start or the last
// ResetRequests, in order.
func (s *Server) Requests() []Request {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	return slices.Clone(s.requests)
}

// RequestCount returns len(Requests()).
func (s *Server) RequestCount() int {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	return len(s.requests)
}

// ResetRequests forgets the requests received so far.
func (s *Server) ResetRequests() {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	s.requests = nil
}

// AddUser creates a NetBox user with an API token and returns the token.
// A user that exists keeps its token.
func (s *Server) AddUser(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.st.user(name); u != nil {
		return u.token
	}
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	u := &user{name: name, token: hex.EncodeToString(b[:])}
	u.id = put(&tx{s: s.st}, &s.st.users, 0, u) // no request: nothing to undo
	return u.token
}

// Token returns the API token of the named user, "" when there is none.
func (s *Server) Token(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.st.user(name); u != nil {
		return u.token
	}
	return ""
}

// DeleteUser deletes the named user and its token. As in NetBox, the
// changelog keeps the user's name on its records and answers user null.
func (s *Server) DeleteUser(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.st.user(name); u != nil {
		delete(s.st.users.byID, u.id)
		s.st.changes.all(func(id int64, c *objectChange) bool {
			if c.user == u.id {
				cc := *c
				cc.user = 0
				s.st.changes.byID[id] = &cc
			}
			return true
		})
	}
}

func (st *store) user(name string) *user {
	return st.users.get(find(&st.users, func(u *user) bool { return u.name == name }))
}

func (st *store) userByToken(token string) *user {
	return st.users.get(find(&st.users, func(u *user) bool { return u.token == token }))
}

// answer is a status and a JSON body.
type answer struct {
	status int
	body   []byte
	buf    *bytes.Buffer // holds body; back to answerBufs once sent
}

// answerBufs keeps the buffers answers are encoded in: a page of 1,000
// devices is megabytes, and allocating that anew for each page is most of
// a large list's cost under the race detector.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func jsonAnswer(status int, v any) answer {
	buf := answerBufs.Get().(*bytes.Buffer)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		answerBufs.Put(buf)
		return answer{status: http.StatusInternalServerError, body: []byte(`{"detail": "netboxtest: ` + err.Error() + `"}`)}
	}
	return answer{status: status, body: buf.Bytes(), buf: buf}
}

// release returns the answer's buffer once the answer is sent.
func (a answer) release() {
	if a.buf != nil {
		answerBufs.Put(a.buf)
	}
}

func detail(status int, format string, args ...any) answer {
	return jsonAnswer(status, map[string]string{"detail": fmt.Sprintf(format, args...)})
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	req := Request{Method: r.Method, URI: r.URL.RequestURI()}
	s.mu.Lock()
	u := s.st.userByToken(token(r))
	s.mu.Unlock()
	if u != nil {
		req.User = u.name
	}
	f := s.faultFor(req.User)
	s.reqMu.Lock()
	s.requests = append(s.requests, req)
	s.reqMu.Unlock()

	switch f.Kind {
	case Down:
		hijackClose(w)
		return
	case Failing:
		status := f.Status
		if status == 0 {
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<h1>%d %s</h1>\n", status, http.StatusText(status))
		return
	case Slow:
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		}
	}

	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBody+1))
	var a answer
	var template string
	var params map[string]string
	switch {
	case err != nil:
		a = detail(http.StatusBadRequest, "netboxtest: reading the body: %v", err)
	case int64(len(body)) > s.cfg.MaxBody:
		a = detail(http.StatusRequestEntityTooLarge, "netboxtest: the body is larger than %d bytes", s.cfg.MaxBody)
	case u == nil && token(r) == "":
		a = detail(http.StatusForbidden, "Authentication credentials were not provided.")
	case u == nil:
		a = detail(http.StatusForbidden, "Invalid token")
	default:
		a, template, params = s.route(r, u, body)
	}

	defer a.release()
	if s.validate != nil && template != "" {
		for _, err := range s.validate.check(r, template, params, body, a.status, http.Header{"Content-Type": {"application/json"}}, a.body) {
			s.report.Errorf("netboxtest: %v", err)
		}
	}

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("API-Version", "4.3")
	if f.Kind == Cut {
		w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
		w.WriteHeader(a.status)
		w.Write(a.body[:len(a.body)/2])
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		hijackClose(w)
		return
	}
	if a.status == http.StatusNoContent {
		w.WriteHeader(a.status)
		return
	}
	w.WriteHeader(a.status)
	w.Write(a.body)
}

func hijackClose(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("netboxtest: the server cannot hijack connections")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		conn.Close()
	}
}

// token returns the API token of a request: "Authorization: Token <key>".
func token(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if k, ok := strings.CutPrefix(h, "Token "); ok {
		return strings.TrimSpace(k)
	}
	return ""
}

// route serves one authenticated request; it returns the path template of
// the operation for the schema check ("" when the request matched none).
func (s *Server) route(r *http.Request, u *user, body []byte) (answer, string, map[string]string) {
	p := r.URL.Path
	if k, ok := kinds[p]; ok {
		switch {
		case r.Method == http.MethodGet:
			return s.list(r, k), p, nil
		case (r.Method == http.MethodPost || r.Method == http.MethodPatch) && k.write != nil:
			return s.writes(u, k, body, r.Method == http.MethodPost), p, nil
		}
		return notAllowed(r.Method), "", nil
	}
	i := strings.LastIndex(strings.TrimSuffix(p, "/"), "/")
	if i < 0 || !strings.HasSuffix(p, "/") {
		return detail(http.StatusNotFound, "Not found."), "", nil
	}
	k, ok := kinds[p[:i+1]]
	id, err := strconv.ParseInt(p[i+1:len(p)-1], 10, 64)
	if !ok || err != nil || id <= 0 {
		return detail(http.StatusNotFound, "Not found."), "", nil
	}
	template := k.path + "{id}/"
	params := map[string]string{"id": strconv.FormatInt(id, 10)}
	switch r.Method {
	case http.MethodGet:
		return s.get(k, id), template, params
	case http.MethodPatch:
		if k.write != nil {
			return s.patchOne(u, k, id, body), template, params
		}
	case http.MethodDelete:
		if k.remove != nil {
			return s.delete(u, k, id), template, params
		}
	}
	return notAllowed(r.Method), "", nil
}

func notAllowed(method string) answer {
	return detail(http.StatusMethodNotAllowed, "Method \"%s\" not allowed (netboxtest implements part of the API).", method)
}

func (s *Server) renderer() *renderer { return &renderer{s: s.st, base: s.URL} }

func (s *Server) get(k *kind, id int64) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !k.rows(s.st).has(id) {
		return detail(http.StatusNotFound, "No %s matches the given query.", k.objectType)
	}
	return jsonAnswer(http.StatusOK, k.render(s.renderer(), id))
}

// page is NetBox's paginated list.
type page struct {
	Count    int     `json:"count"`
	Next     *string `json:"next"`
	Previous *string `json:"previous"`
	Results  []any   `json:"results"`
}

func (s *Server) list(r *http.Request, k *kind) answer {
	q := r.URL.Query()
	limit, offset := s.window(q)
	ordering := q.Get("ordering")

	s.mu.Lock()
	defer s.mu.Unlock()
	var params []queryFilter
	for name, vals := range q {
		if exists := k.choices[name]; exists != nil {
			for _, v := range vals {
				if !exists(s.st, v) {
					return jsonAnswer(http.StatusBadRequest, map[string][]string{name: {"Select a valid choice. " + v + " is not one of the available choices."}})
				}
			}
		}
	}
	for name, vals := range q {
		switch name {
		case "limit", "offset", "ordering":
			continue
		}
		f, err := s.filterFor(k, name)
		if err != nil {
			return detail(http.StatusBadRequest, "%v", err)
		}
		params = append(params, queryFilter{name, vals, f})
	}
	ids, ferr := matching(s.st, k, params)
	if ferr != nil {
		return jsonAnswer(http.StatusBadRequest, map[string][]string{strings.SplitN(ferr.Error(), ":", 2)[0]: {ferr.Error()}})
	}
	if k.order != nil {
		if err := k.order(s.st, ids, ordering); err != nil {
			return detail(http.StatusBadRequest, "%v", err)
		}
	} else if ordering != "" && ordering != "id" {
		return detail(http.StatusBadRequest, "netboxtest orders %s by id only, not %q", k.objectType, ordering)
	}
	out := page{Count: len(ids), Results: []any{}}
	rd := s.renderer()
	for i := offset; i < len(ids) && i < offset+limit; i++ {
		out.Results = append(out.Results, k.render(rd, ids[i]))
	}
	link := func(off int) *string {
		u := *r.URL
		v := u.Query()
		v.Set("limit", strconv.Itoa(limit))
		if off > 0 {
			v.Set("offset", strconv.Itoa(off))
		} else {
			v.Del("offset")
		}
		u.RawQuery = v.Encode()
		str := s.URL + u.RequestURI()
		return &str
	}
	if offset+limit < len(ids) {
		out.Next = link(offset + limit)
	}
	if offset > 0 {
		out.Previous = link(max(offset-limit, 0))
	}
	return jsonAnswer(http.StatusOK, out)
}

// window returns the limit and offset of the page a list query asks for.
// A missing or malformed limit is the configured PageSize; 0, or one over
// MaxPageSize, is MaxPageSize. A missing or malformed offset is 0.
func (s *Server) window(q url.Values) (limit, offset int) {
	limit = s.cfg.PageSize
	if v, ok := q["limit"]; ok {
		if n, err := strconv.Atoi(v[0]); err == nil && n >= 0 {
			limit = n
			if limit == 0 || limit > s.cfg.MaxPageSize {
				limit = s.cfg.MaxPageSize
			}
		}
	}
	if v, ok := q["offset"]; ok {
		if n, err := strconv.Atoi(v[0]); err == nil && n >= 0 {
			offset = n
		}
	}
	return limit, offset
}

// queryFilter is a list query's filter parameter: its name, its values and
// the filter it names.
type queryFilter struct {
	name string
	vals []string
	f    filter
}

// matching returns, in list order, the IDs of the objects of k that
// pass every filter in params. The error of a filter that fails is
// returned as "NAME: error".
func matching(st *store, k *kind, params []queryFilter) ([]int64, error) {
	var ids []int64
	var ferr error
	k.rows(st).each(func(id int64) bool {
		for _, p := range params {
			ok, err := p.f(st, id, p.vals)
			if err != nil {
				ferr = fmt.Errorf("%s: %v", p.name, err)
				return false
			}
			if !ok {
				return true
			}
		}
		ids = append(ids, id)
		return true
	})
	return ids, ferr
}

// filterFor returns the filter a query parameter names: one of the kind's
// (id among them), or a custom-field filter (cf_NAME, cf_NAME__n,
// cf_NAME__empty, cf_NAME__ic, cf_NAME__ie) on a kind with custom fields.
// Unknown parameters are refused, so that a client's typo cannot list
// everything.
func (s *Server) filterFor(k *kind, name string) (filter, error) {
	if f, ok := k.filters[name]; ok {
		return f, nil
	}
	cfName, ok := strings.CutPrefix(name, "cf_")
	if !ok || k.objectType != "dcim.device" {
		return nil, fmt.Errorf("netboxtest: unknown filter %q for %s", name, k.path)
	}
	cfName, lookup, _ := strings.Cut(cfName, "__")
	cf := s.st.customFields.get(find(&s.st.customFields, func(c *customField) bool {
		return c.name == cfName && slices.Contains(c.objectTypes, k.objectType) && c.filterLogic != "disabled"
	}))
	if cf == nil {
		return nil, fmt.Errorf("netboxtest: unknown filter %q: no custom field %s on %s that allows filtering", name, cfName, k.objectType)
	}
	value := func(d *device) (string, bool) {
		v, ok := d.customFields[cfName]
		if !ok || v == nil {
			return "", false
		}
		return fmt.Sprint(v), true
	}
	// match says whether a value set matches one asked for; __n matches
	// where the exact lookup does not.
	match := map[string]func(v, x string) bool{
		"":   func(v, x string) bool { return v == x },
		"ie": strings.EqualFold,
		"ic": func(v, x string) bool { return strings.Contains(strings.ToLower(v), strings.ToLower(x)) },
	}
	if cf.filterLogic == "loose" && (cf.typ == "text" || cf.typ == "longtext" || cf.typ == "url") {
		match[""] = match["ic"]
	}
	match["n"] = match[""]
	m, ok := match[lookup]
	var f filterOf[device]
	switch {
	case ok:
		f = func(_ *store, d *device, vals []string) (bool, error) {
			v, set := value(d)
			return (set && slices.ContainsFunc(vals, func(x string) bool { return m(v, x) })) != (lookup == "n"), nil
		}
	case lookup == "empty":
		f = boolFilter(func(_ *store, d *device) bool { v, set := value(d); return !set || v == "" })
	default:
		return nil, fmt.Errorf("netboxtest: unknown filter %q: netboxtest implements the lookups n, ie, ic and empty", name)
	}
	return func(st *store, id int64, vals []string) (bool, error) { return f(st, st.devices.get(id), vals) }, nil
}

// writes serves POST (create, one object or a list) and PATCH on a list
// path (bulk update: a list of objects with IDs). A request is one
// transaction: when any object is refused, nothing is written, and the
// answer lists the errors by position, as NetBox does.
func (s *Server) writes(u *user, k *kind, body []byte, create bool) answer {
	bulk := isArray(body)
	var items []json.RawMessage
	if bulk {
		if err := json.Unmarshal(body, &items); err != nil {
			return detail(http.StatusBadRequest, "JSON parse error - %v", err)
		}
	} else {
		if !create {
			return jsonAnswer(http.StatusBadRequest, map[string][]string{"non_field_errors": {"Expected a list of items but got type \"dict\"."}})
		}
		items = []json.RawMessage{body}
	}
	idOf := created
	if !create {
		idOf = func(in *input) (int64, error) { return updateID(s.st, k, in) }
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.st.begin(u)
	ids, errs := s.writeAll(t, k, items, idOf)
	if slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		t.rollback()
		bodies := make([]any, len(errs))
		for i, err := range errs {
			bodies[i] = map[string]any{}
			if err != nil {
				bodies[i] = errorBody(err)
			}
		}
		if !bulk {
			return jsonAnswer(http.StatusBadRequest, bodies[0])
		}
		return jsonAnswer(http.StatusBadRequest, bodies)
	}
	rd := s.renderer()
	status := http.StatusOK
	if create {
		status = http.StatusCreated
	}
	if !bulk {
		return jsonAnswer(status, k.render(rd, ids[0]))
	}
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = k.render(rd, id)
	}
	return jsonAnswer(status, out)
}

// updateID returns the ID a bulk update item names.
func updateID(st *store, k *kind, in *input) (int64, error) {
	raw, ok := in.raw["id"]
	if !ok {
		return 0, fieldErrors{"id": {"This field is required."}}
	}
	var id int64
	if err := json.Unmarshal(raw, &id); err != nil || !k.rows(st).has(id) {
		return 0, fieldErrors{"id": {"Related object not found using the provided ID: " + string(raw)}}
	}
	return id, nil
}

// writeAll writes items to k in t, each the object idOf names (0: a new
// one), and returns their IDs and errors. When one is refused, the caller
// rolls t back.
func (s *Server) writeAll(t *tx, k *kind, items []json.RawMessage, idOf func(*input) (int64, error)) ([]int64, []error) {
	ids, errs := make([]int64, len(items)), make([]error, len(items))
	for i, raw := range items {
		in, err := parseInput(raw)
		var id int64
		if err == nil {
			id, err = idOf(in)
		}
		if err == nil {
			ids[i], err = s.writeOne(t, k, id, in)
		}
		errs[i] = err
	}
	return ids, errs
}

// writeOne writes one object in t and records the change.
func (s *Server) writeOne(t *tx, k *kind, id int64, in *input) (int64, error) {
	var pre map[string]any
	action := "create"
	if id != 0 {
		pre = k.snapshot(s.st, id)
		action = "update"
	}
	nid, err := k.write(t, id, in)
	if err != nil {
		return 0, err
	}
	t.record(action, k.objectType, nid, k.repr(s.st, nid), pre, k.snapshot(s.st, nid))
	return nid, nil
}

func errorBody(err error) any {
	var fe fieldErrors
	if errors.As(err, &fe) {
		return fe
	}
	return map[string]string{"detail": err.Error()}
}

func (s *Server) patchOne(u *user, k *kind, id int64, body []byte) answer {
	in, err := parseInput(body)
	if err != nil {
		return jsonAnswer(http.StatusBadRequest, errorBody(err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !k.rows(s.st).has(id) {
		return detail(http.StatusNotFound, "No %s matches the given query.", k.objectType)
	}
	t := s.st.begin(u)
	if _, err := s.writeOne(t, k, id, in); err != nil {
		t.rollback()
		return jsonAnswer(http.StatusBadRequest, errorBody(err))
	}
	return jsonAnswer(http.StatusOK, k.render(s.renderer(), id))
}

func (s *Server) delete(u *user, k *kind, id int64) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !k.rows(s.st).has(id) {
		return detail(http.StatusNotFound, "No %s matches the given query.", k.objectType)
	}
	t := s.st.begin(u)
	pre, repr := k.snapshot(s.st, id), k.repr(s.st, id)
	k.remove(t, id)
	t.record("delete", k.objectType, id, repr, pre, nil)
	return answer{status: http.StatusNoContent}
}
