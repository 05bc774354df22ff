package netboxtest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

//go:generate go run ./internal/schemagen -out openapi.json

// openapiJSON is NetBox 4.3's OpenAPI document (api/openapi.yaml of
// go-netbox v4.3.0) pruned to the paths netboxtest serves: the paths, their
// operations and the components they reference, unchanged. Its
// x-fleet-source member records the source file's SHA-256;
// TestSchemaIsCurrent compares it with the module's.
//
//go:embed openapi.json
var openapiJSON []byte

// nullable lists the properties where NetBox 4.3 answers null although its
// schema does not allow it (netbox#11805): empty choice fields and an
// ObjectChange whose user was deleted. The validator marks exactly these
// nullable, and custom-field values (below); nothing else is relaxed, so the
// check still catches a missing field, a wrong type or a bad enum value.
var nullable = []struct{ schema, property string }{
	{"DeviceWithConfigContext", "face"},
	{"DeviceWithConfigContext", "airflow"},
	{"Interface", "mode"},
	{"Interface", "rf_role"},
	{"Interface", "rf_channel"},
	{"Interface", "poe_mode"},
	{"Interface", "poe_type"},
	{"IPAddress", "role"},
	{"ObjectChange", "user"},
}

// blankable lists the properties where NetBox answers "" for a blank
// value although the schema's pattern refuses an empty string (the field is
// blank=True in NetBox's model). The validator lets the pattern also match
// "", and nothing else.
var blankable = []struct{ schema, property string }{
	{"IPAddress", "dns_name"},
	{"Cable", "color"},
}

// schemaDoc is the document, loaded and relaxed once per process.
var schemaDoc = sync.OnceValues(func() (*openapi3.T, error) { return loadDoc(true) })

// loadDoc loads the embedded document, relaxed or as NetBox ships it.
func loadDoc(relaxed bool) (*openapi3.T, error) {
	// json.Unmarshal and ResolveRefsIn take a third of LoadFromData's time,
	// which parses JSON as YAML.
	doc := new(openapi3.T)
	if err := json.Unmarshal(openapiJSON, doc); err != nil {
		return nil, fmt.Errorf("netboxtest: load the OpenAPI document: %w", err)
	}
	if err := openapi3.NewLoader().ResolveRefsIn(doc, nil); err != nil {
		return nil, fmt.Errorf("netboxtest: resolve the OpenAPI document: %w", err)
	}
	// The shipped document has servers: [{url: ""}], which Validate refuses.
	doc.Servers = openapi3.Servers{{URL: "http://netbox.invalid"}}
	if relaxed {
		if err := relax(doc); err != nil {
			return nil, err
		}
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("netboxtest: the OpenAPI document: %w", err)
	}
	return doc, nil
}

// relax applies the nullable and blankable lists, and lets a custom field's value be null
// (NetBox stores and answers null for an unset custom field, and a request
// sets null to clear one) wherever a schema has custom_fields.
func relax(doc *openapi3.T) error {
	schemas := doc.Components.Schemas
	property := func(schema, name string) (*openapi3.Schema, error) {
		s, ok := schemas[schema]
		if !ok || s.Value == nil {
			return nil, fmt.Errorf("netboxtest: relax %s.%s: no such schema", schema, name)
		}
		p, ok := s.Value.Properties[name]
		if !ok || p.Value == nil {
			return nil, fmt.Errorf("netboxtest: relax %s.%s: no such property", schema, name)
		}
		if p.Ref != "" {
			return nil, fmt.Errorf("netboxtest: relax %s.%s: the property is a $ref; relaxing it would relax %s everywhere", schema, name, p.Ref)
		}
		return p.Value, nil
	}
	for _, n := range nullable {
		p, err := property(n.schema, n.property)
		if err != nil {
			return err
		}
		p.Nullable = true
	}
	for _, b := range blankable {
		p, err := property(b.schema, b.property)
		if err != nil {
			return err
		}
		if p.Pattern == "" {
			return fmt.Errorf("netboxtest: relax %s.%s: the property has no pattern", b.schema, b.property)
		}
		p.Pattern = "^$|" + p.Pattern
	}
	for _, s := range schemas {
		if s.Value == nil {
			continue
		}
		cf, ok := s.Value.Properties["custom_fields"]
		if !ok || cf.Value == nil || cf.Value.AdditionalProperties.Schema == nil || cf.Value.AdditionalProperties.Schema.Value == nil {
			continue
		}
		cf.Value.AdditionalProperties.Schema.Value.Nullable = true
	}
	return nil
}

var uuidRE = regexp.MustCompile(openapi3.FormatOfStringForUUIDOfRFC9562)

// formats checks the string formats NetBox's schema uses that kin-openapi
// leaves unchecked by default (date-time is checked already).
var formats = map[string]openapi3.StringFormatValidator{
	"uuid": openapi3.NewCallbackValidator(func(s string) error {
		if !uuidRE.MatchString(s) {
			return errors.New("not a UUID")
		}
		return nil
	}),
	"uri": openapi3.NewCallbackValidator(func(s string) error {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return errors.New("not an absolute URI")
		}
		return nil
	}),
}

// validator checks requests and responses against the document.
type validator struct {
	doc  *openapi3.T
	opts *openapi3filter.Options
}

func newValidator() (*validator, error) {
	doc, err := schemaDoc()
	if err != nil {
		return nil, err
	}
	return validatorOf(doc), nil
}

func validatorOf(doc *openapi3.T) *validator {
	return &validator{doc: doc, opts: &openapi3filter.Options{
		AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
		MultiError:              true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableFormatValidation(), openapi3.WithStringFormatValidators(formats)},
	}}
}

// route finds the operation of method on the path template, e.g.
// "/api/dcim/devices/{id}/".
func (v *validator) route(method, template string) (*routers.Route, error) {
	item := v.doc.Paths.Find(template)
	if item == nil {
		return nil, fmt.Errorf("the schema has no path %s", template)
	}
	op := item.GetOperation(method)
	if op == nil {
		return nil, fmt.Errorf("the schema has no %s %s", method, template)
	}
	return &routers.Route{Spec: v.doc, Server: v.doc.Servers[0], Path: template, PathItem: item, Method: method, Operation: op}, nil
}

// check validates one exchange. A POST whose body is a JSON array is
// NetBox's bulk create, which the schema does not describe (it gives the
// single-object body): each element is checked as a request of its own,
// and each element of the answer as an answer of its own.
func (v *validator) check(r *http.Request, template string, params map[string]string, body []byte, status int, header http.Header, answer []byte) []error {
	route, err := v.route(r.Method, template)
	if err != nil {
		return []error{err}
	}
	if r.Method == http.MethodPost && isArray(body) {
		var items, answers []json.RawMessage
		if err := json.Unmarshal(body, &items); err != nil {
			return []error{fmt.Errorf("bulk create body: %v", err)}
		}
		if status/100 == 2 {
			if err := json.Unmarshal(answer, &answers); err != nil || len(answers) != len(items) {
				return []error{fmt.Errorf("bulk create: the answer is not a list of %d objects", len(items))}
			}
		}
		var errs []error
		for i, item := range items {
			var a []byte
			if answers != nil {
				a = answers[i]
			}
			for _, err := range v.one(r, route, params, item, status, header, a) {
				errs = append(errs, fmt.Errorf("item %d: %w", i, err))
			}
		}
		return errs
	}
	return v.one(r, route, params, body, status, header, answer)
}

func (v *validator) one(r *http.Request, route *routers.Route, params map[string]string, body []byte, status int, header http.Header, answer []byte) []error {
	req := r.Clone(r.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: v.opts}
	var errs []error
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		errs = append(errs, fmt.Errorf("request %s %s: %w", r.Method, r.URL.RequestURI(), err))
	}
	if answer == nil && status/100 == 2 && status != http.StatusNoContent {
		return append(errs, fmt.Errorf("response %s %s: no body", r.Method, r.URL.RequestURI()))
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header, Options: v.opts}
	out.SetBodyBytes(answer)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		errs = append(errs, fmt.Errorf("response %d to %s %s: %w", status, r.Method, r.URL.RequestURI(), err))
	}
	return errs
}

func isArray(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '['
}
