package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	netbox "github.com/netbox-community/go-netbox/v4"
)

// NetBoxConfig holds a NetBox client's optional settings. A nil
// *NetBoxConfig means every default below. A NetBoxConfig must not change
// after NewNetBox.
type NetBoxConfig struct {
	// BindingAuthor is the NetBox user name whose writes of
	// approved_ek_hash and approved_ek_hash_ecc make a binding authored:
	// the runbook's bindingAuthor, the user whose token applies the nodes
	// file (Terraform's, or fleetctl apply's). "" means no binding is
	// authored, not even an empty one, so every device's binding attests as
	// ek-binding-unauthored.
	BindingAuthor string

	// Role is the slug of the device role of fleet's devices: Devices,
	// DevicesWithDesiredAction, DeviceBySerial and BindingBySerial see only
	// devices of this role, and Apply gives it to the devices it creates
	// (and creates the role when missing). "" means "kubernetes-node".
	Role string
	// Site is the slug of the site Apply creates devices in, which must
	// exist in NetBox. "" makes Plan refuse; the operations of fleetd do
	// not need it.
	Site string
	// Switch is the name of the switch device (in Site) the nodes' switch
	// ports belong to. Plan requires it. When a device is read, its
	// SwitchPort comes from its cable to an interface of this device; ""
	// accepts an interface of any device whose name PortName matches.
	Switch string
	// PortName formats a switch port's interface name from its number: a
	// format with exactly one %d. "" means "Port %d", as UniFi names ports.
	PortName string
	// Interface is the name of a node's interface in NetBox: the one that
	// holds its MAC, its address and its cable. "" means "eth0".
	Interface string
	// InterfaceType is the NetBox interface type of interfaces Apply
	// creates. "" means "other".
	InterfaceType string

	// HTTPClient sends the requests; nil means a new http.Client with the
	// default transport.
	HTTPClient *http.Client
	// Timeout bounds each request, answer included: NetBox not answering
	// within it is ErrUnavailable. 0 means 10 s.
	Timeout time.Duration
	// PageSize is the limit of each list request. 0 means 1000, NetBox's
	// default MAX_PAGE_SIZE; a NetBox that allows less answers less, and
	// the client reads on.
	PageSize int
	// BulkSize is how many objects one bulk write carries: Apply's, and
	// those of concurrent calls that share a request (journal entries, MAC
	// objects, primary MACs and devices' fields). 0 means 100.
	BulkSize int

	// Logger receives a debug line per request (method, path and query,
	// status, duration) and Apply's progress at info level. The token is
	// never logged. nil: silent.
	Logger *slog.Logger
}

// The defaults of NetBoxConfig.
const (
	DefaultRole          = "kubernetes-node"
	DefaultPortName      = "Port %d"
	DefaultInterface     = "eth0"
	DefaultInterfaceType = "other"
	DefaultTimeout       = 10 * time.Second
	DefaultPageSize      = 1000
	DefaultBulkSize      = 100
)

// NetBox is fleet's NetBox client: the device store of the runbook. It reads
// and writes fleet's devices, their journal and changelog, and plans and
// applies the nodes file (Plan, Apply). It is built on go-netbox v4.3.0, the
// official client: single-object writes are go-netbox calls, and bulk
// writes send lists of go-netbox's request models (NetBox's bulk create,
// which go-netbox's calls, following the schema, do not offer). Reads
// decode answers into lean views of the fields fleet reads: go-netbox's models
// decode each object several times over (a page of 1,000 devices took 14
// times as long here) and refuse answers NetBox really gives, such as a
// changelog record whose user was deleted.
//
// # The data model
//
// A node is a dcim.device of role Role, named by its host name, with its
// serial, status, device type (manufacturer and model, the type's slug
// being the nodes file's model key) and these custom fields, which Plan
// creates when missing (all on dcim.device, in group "fleet"):
//
//	class                  text      Talos class                 (nodes file)
//	bmc                    text      BMC type: amt, ipmi, ...    (nodes file)
//	install_disk           text      install disk, a /dev path   (nodes file)
//	install_disk_serial    text      install disk serial         (nodes file)
//	approved_ek_hash       text      approved RSA-2048 EK hash   (nodes file)
//	approved_ek_hash_ecc   text      approved ECC P-256 EK hash  (nodes file)
//	attested_ek_hash       text      proven RSA-2048 EK hash     (fleetd)
//	attested_ek_hash_ecc   text      proven ECC P-256 EK hash    (fleetd)
//	attested_switch_port   integer   switch port of the claim    (fleetd)
//	attested_at            datetime  time of the attestation     (fleetd)
//	attest_verdict         text      e.g. attested               (fleetd)
//	attested_secure_boot   text      on, off, unknown, unquoted  (fleetd)
//	attested_pcr7          text      quoted PCR 7 (SHA-256)      (fleetd)
//	desired_action         text      provision, or unset         (operator, fleetd)
//	last_run               text      last Workflow's name        (fleetd)
//
// EK hash fields and attested_pcr7 carry the validation regex
// ^[0-9a-f]{64}$. attested_secure_boot is the Secure Boot state of the
// boot the TPM quoted at the last attestation: on, off, unknown (the quote
// verified, but the event log does not tell the state), or unquoted (the
// proof carried no quote). The device has
// one interface, named Interface, which holds the node's MAC (a
// dcim.macaddress object assigned to it and set as its primary MAC), its
// address (an ipam.ipaddress with K8S_NODE_CIDR's prefix length, assigned
// to it and set as the device's primary IPv4) and a cable to the switch
// port, an interface of the Switch device named by PortName.
//
// # Errors
//
// Every method wraps, for errors.Is: ErrUnavailable when NetBox did not
// answer within Timeout, refused the connection, cut it, or answered 5xx;
// ErrNotFound when no device (or object) matches; ErrRefusedToken when
// NetBox answered 401 or 403.
//
// # Concurrency
//
// A NetBox is safe for concurrent use; each method makes its requests in
// turn. Concurrent calls of Journal, RecordMAC, RecordDeviceMAC,
// UpdateDevice and the interface reads (DeviceBySerial, Device) share
// requests, as a database commits a group: a call that finds no request of
// its kind in flight is sent at once, alone, and the calls that come while
// one is in flight go together in the next, in one bulk create, bulk update
// or list of several devices (at most BulkSize, or 100 interfaces). When
// NetBox refuses such a request whole, each call of it is sent again
// alone, so that only the call NetBox refuses gets the refusal. Apply must
// not run concurrently with another Apply.
type NetBox struct {
	base  string // without a trailing slash
	token string
	cfg   NetBoxConfig
	hc    *http.Client
	api   *netbox.APIClient
	log   *slog.Logger

	portPrefix, portSuffix string // PortName around its %d

	// Concurrent calls of these share requests (see batcher).
	serials  *batcher[string, *nbDevice]
	ifaces   *batcher[int64, *nbInterface]
	macs     *batcher[macRecord, *nbInterface]
	journals *batcher[JournalEntry, struct{}]
	updates  *batcher[deviceUpdate, struct{}]

	// places holds, per device ID, the device type, role and site the
	// client last read the device with: what a bulk update item of it
	// must carry (see updateDevices). One entry per device read, so at
	// most one per device NetBox holds (for fleetd, fleet's devices: a
	// few dozen bytes each); an entry goes when NetBox says the device is
	// gone.
	placesMu sync.Mutex
	places   map[int64]devicePlace
}

// NewNetBox returns a client of the NetBox at baseURL (e.g.
// "https://netbox.example", without /api) that authenticates with token.
func NewNetBox(baseURL, token string, cfg *NetBoxConfig) (*NetBox, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("netbox: the URL %q is not an http or https URL of a NetBox", baseURL)
	}
	if token == "" {
		return nil, errors.New("netbox: no API token")
	}
	nb := &NetBox{base: strings.TrimSuffix(u.String(), "/"), token: token}
	if cfg != nil {
		nb.cfg = *cfg
	}
	c := &nb.cfg
	if c.Role == "" {
		c.Role = DefaultRole
	}
	if c.PortName == "" {
		c.PortName = DefaultPortName
	}
	if c.Interface == "" {
		c.Interface = DefaultInterface
	}
	if c.InterfaceType == "" {
		c.InterfaceType = DefaultInterfaceType
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.PageSize <= 0 {
		c.PageSize = DefaultPageSize
	}
	if c.BulkSize <= 0 {
		c.BulkSize = DefaultBulkSize
	}
	var ok bool
	nb.portPrefix, nb.portSuffix, ok = strings.Cut(c.PortName, "%d")
	if !ok || strings.Contains(nb.portSuffix, "%") || strings.Contains(nb.portPrefix, "%") {
		return nil, fmt.Errorf("netbox: the switch port name %q needs exactly one %%d and no other verb", c.PortName)
	}
	nb.log = c.Logger
	if nb.log == nil {
		nb.log = slog.New(slog.DiscardHandler)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	logged := *hc
	logged.Transport = &logTransport{base: base, log: nb.log}
	nb.hc = &logged

	api := netbox.NewConfiguration()
	api.Servers = netbox.ServerConfigurations{{URL: nb.base}}
	api.HTTPClient = nb.hc
	api.UserAgent = "fleet-inventory"
	api.AddDefaultHeader("Authorization", "Token "+token)
	api.AddDefaultHeader("Accept-Language", "en-US")
	nb.api = netbox.NewAPIClient(api)
	nb.serials = newBatcher(serialBatch, nb.readSerials)
	nb.ifaces = newBatcher(ifaceBatch, nb.readIfaces)
	nb.macs = newBatcher(c.BulkSize, nb.recordMACs)
	nb.journals = newBatcher(c.BulkSize, nb.journalBatch)
	nb.updates = newBatcher(c.BulkSize, nb.updateDevices)
	nb.places = map[int64]devicePlace{}
	return nb, nil
}

// PortName returns the NetBox interface name of switch port n.
func (nb *NetBox) PortName(n int) string {
	return nb.portPrefix + strconv.Itoa(n) + nb.portSuffix
}

// portNumber parses a switch port's interface name; 0 when it is not one.
func (nb *NetBox) portNumber(name string) int {
	digits, ok := strings.CutPrefix(name, nb.portPrefix)
	if !ok {
		return 0
	}
	if digits, ok = strings.CutSuffix(digits, nb.portSuffix); !ok || digits == "" || digits[0] == '0' || len(digits) > 6 {
		return 0
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// logTransport logs each request: method, path and query, status,
// duration. Never headers, so never the token.
type logTransport struct {
	base http.RoundTripper
	log  *slog.Logger
}

func (t *logTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	rsp, err := t.base.RoundTrip(r)
	attrs := []any{"method", r.Method, "uri", r.URL.RequestURI(), "duration", time.Since(start)}
	if err != nil {
		t.log.Debug("netbox request", append(attrs, "error", err)...)
	} else {
		t.log.Debug("netbox request", append(attrs, "status", rsp.StatusCode)...)
	}
	return rsp, err
}

// withTimeout bounds one request.
func (nb *NetBox) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, nb.cfg.Timeout)
}

// maxAnswer bounds what the client reads of one answer: a page of 1,000
// devices is about 2.5 MB.
const maxAnswer = 256 << 20

// answerBufs keeps the buffers answers are read into, so that reading a
// large list does not allocate megabytes a page.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// do sends one request to path (below the base URL, e.g.
// "/api/dcim/devices/") with query and a JSON body (nil: none), and decodes
// a 2xx answer into out (nil: discard).
func (nb *NetBox) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	uri := path
	if len(query) > 0 {
		uri += "?" + query.Encode()
	}
	what := method + " " + uri
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("netbox: %s: %w", what, err)
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := nb.withTimeout(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, nb.base+uri, rd)
	if err != nil {
		return fmt.Errorf("netbox: %s: %w", what, err)
	}
	req.Header.Set("Authorization", "Token "+nb.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "fleet-inventory")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rsp, err := nb.hc.Do(req)
	if err != nil {
		return unavailable(what, err)
	}
	defer rsp.Body.Close()
	buf := answerBufs.Get().(*bytes.Buffer)
	defer answerBufs.Put(buf)
	buf.Reset()
	if rsp.ContentLength > 0 && rsp.ContentLength <= maxAnswer {
		buf.Grow(int(rsp.ContentLength) + 1)
	}
	if _, err := buf.ReadFrom(io.LimitReader(rsp.Body, maxAnswer+1)); err != nil {
		return unavailable(what, err)
	}
	// data is not kept: json.Unmarshal copies what it decodes.
	data := buf.Bytes()
	if len(data) > maxAnswer {
		return fmt.Errorf("netbox: %s: the answer is larger than %d MiB", what, maxAnswer>>20)
	}
	if err := statusError(what, rsp.StatusCode, data); err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("netbox: %s: the answer is not what NetBox 4.3 answers: %v", what, err)
		}
	}
	return nil
}

// unavailable wraps ErrUnavailable for a request NetBox did not answer.
func unavailable(what string, err error) error {
	return fmt.Errorf("netbox: %s: %w: %w", what, ErrUnavailable, err)
}

// statusError maps a non-2xx status to the client's errors.
func statusError(what string, status int, body []byte) error {
	switch {
	case status >= 200 && status < 300:
		return nil
	case status >= 500:
		return fmt.Errorf("netbox: %s: %w: it answered %d", what, ErrUnavailable, status)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return fmt.Errorf("netbox: %s: %w: %d %s", what, ErrRefusedToken, status, netboxMessage(body))
	case status == http.StatusNotFound:
		return fmt.Errorf("netbox: %s: %w", what, ErrNotFound)
	}
	re := &refusedError{what: what, status: status, msg: netboxMessage(body)}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) == nil {
		for k := range fields {
			re.fields = append(re.fields, k)
		}
	}
	return re
}

// refusedError is a 4xx answer other than 401, 403 and 404: NetBox refused
// the request as it stands.
type refusedError struct {
	what   string
	status int
	msg    string
	fields []string // the fields or query parameters the answer names
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("netbox: %s: NetBox refused it (%d): %s", e.what, e.status, e.msg)
}

// unknownChoice reports whether err is NetBox refusing a list because the
// query parameter param names an object it does not have, as when the
// role (?role=SLUG) does not exist yet: NetBox answers 400, not an empty
// list.
func unknownChoice(err error, param string) bool {
	var re *refusedError
	return errors.As(err, &re) && re.status == http.StatusBadRequest && slices.Contains(re.fields, param)
}

// netboxMessage shortens an error answer for an error message.
func netboxMessage(body []byte) string {
	var v any
	if json.Unmarshal(body, &v) == nil {
		if m, ok := v.(map[string]any); ok {
			if d, ok := m["detail"].(string); ok {
				return d
			}
		}
		compact, _ := json.Marshal(v)
		body = compact
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 1000 {
		s = s[:1000] + "..."
	}
	return s
}

// apiError maps what a go-netbox call returned to the client's errors.
func apiError(what string, rsp *http.Response, err error) error {
	if err == nil {
		return nil
	}
	if rsp == nil {
		return unavailable(what, err)
	}
	var oe *netbox.GenericOpenAPIError
	if errors.As(err, &oe) {
		if e := statusError(what, rsp.StatusCode, oe.Body()); e != nil {
			return e
		}
		return fmt.Errorf("netbox: %s: the answer is not what NetBox 4.3 answers: %v", what, err)
	}
	// A 2xx answer whose body could not be read whole: the connection was
	// cut.
	return unavailable(what, err)
}

// page is one page of a NetBox list.
type page[T any] struct {
	Count   int     `json:"count"`
	Next    *string `json:"next"`
	Results []T     `json:"results"`
}

// list reads every page of the list at path with query, PageSize objects
// per request.
func list[T any](ctx context.Context, nb *NetBox, path string, query url.Values) ([]T, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	var all []T
	offset := 0
	for {
		q.Set("limit", strconv.Itoa(nb.cfg.PageSize))
		if offset > 0 {
			q.Set("offset", strconv.Itoa(offset))
		}
		var p page[T]
		if err := nb.do(ctx, http.MethodGet, path, q, nil, &p); err != nil {
			return nil, err
		}
		if all == nil {
			all = make([]T, 0, p.Count)
		}
		all = append(all, p.Results...)
		offset += len(p.Results)
		// Follow next, but count offsets ourselves: behind a proxy NetBox
		// may write next with the wrong scheme or host.
		if p.Next == nil || len(p.Results) == 0 || offset >= p.Count {
			return all, nil
		}
	}
}

// ErrConflict is what errors.Is finds in a Plan error that says NetBox
// holds something the nodes file cannot have as it stands (a serial on
// another device, an address on another interface, a switch port cabled to
// something else, a missing site or switch). The error names each one.
var ErrConflict = errors.New("netbox conflicts with the nodes file")
