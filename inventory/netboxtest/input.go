package netboxtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// fieldErrors is a 400 answer in Django REST framework's shape:
// {"field": ["message", ...]}.
type fieldErrors map[string][]string

func (e fieldErrors) add(field, format string, args ...any) {
	e[field] = append(e[field], fmt.Sprintf(format, args...))
}

func (e fieldErrors) Error() string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+": "+strings.Join(e[k], "; "))
	}
	return strings.Join(parts, ", ")
}

// input is one object of a request body.
type input struct {
	raw  map[string]json.RawMessage
	errs fieldErrors
}

func parseInput(data []byte) (*input, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return nil, fieldErrors{"non_field_errors": {"Invalid data. Expected a dictionary, but got " + jsonKind(data) + "."}}
	}
	return &input{raw: raw, errs: fieldErrors{}}, nil
}

func jsonKind(data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '[':
		return "list"
	case '"':
		return "str"
	case 'n':
		return "NoneType"
	case 't', 'f':
		return "bool"
	}
	return "int"
}

func (in *input) has(k string) bool { _, ok := in.raw[k]; return ok }

func (in *input) isNull(k string) bool {
	v, ok := in.raw[k]
	return ok && bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// null reports whether field k is null, refusing it unless nullable.
func (in *input) null(k string, nullable bool) bool {
	if !in.isNull(k) {
		return false
	}
	if !nullable {
		in.errs.add(k, "This field may not be null.")
	}
	return true
}

// value reads the field k as a V, refusing with bad a value that is not
// one; null reads as V's zero when nullable.
func value[V any](in *input, k string, nullable bool, bad string) (V, bool) {
	var v V
	raw, ok := in.raw[k]
	if !ok || in.null(k, nullable) {
		return v, ok
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		in.errs.add(k, "%s", bad)
	}
	return v, true
}

// str reads a string field; null reads as "" when nullable.
func (in *input) str(k string, nullable bool) (string, bool) {
	return value[string](in, k, nullable, "Not a valid string.")
}

// choice reads a string field that must be one of choices.
func (in *input) choice(k string, nullable bool, choices ...string) (string, bool) {
	s, ok := in.str(k, nullable)
	if ok && s != "" && !slices.Contains(choices, s) {
		in.errs.add(k, "%q is not a valid choice.", s)
	}
	return s, ok
}

// boolean reads a boolean field; null reads as false.
func (in *input) boolean(k string) (bool, bool) {
	return value[bool](in, k, true, "Must be a valid boolean.")
}

// integer reads an integer field; null reads as 0 when nullable.
func (in *input) integer(k string, nullable bool) (int64, bool) {
	n, ok := value[json.Number](in, k, nullable, "A valid integer is required.")
	if n == "" {
		return 0, ok
	}
	i, err := n.Int64()
	if err != nil {
		in.errs.add(k, "A valid integer is required.")
	}
	return i, ok
}

// ref reads a related object: its numeric ID, or a dictionary holding "id"
// (NetBox also resolves other attributes; netboxtest takes only the ID).
// null reads as 0 when nullable.
func (in *input) ref(k string, nullable bool) (int64, bool) {
	v, ok := in.raw[k]
	if !ok {
		return 0, false
	}
	if in.null(k, nullable) {
		return 0, true
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err == nil {
		id, err := n.Int64()
		if err != nil || id <= 0 {
			in.errs.add(k, "Related object not found using the provided numeric ID: %s", n)
			return 0, true
		}
		return id, true
	}
	var obj struct {
		ID *int64 `json:"id"`
	}
	if err := json.Unmarshal(v, &obj); err != nil || obj.ID == nil {
		in.errs.add(k, "Related objects must be referenced by numeric ID or by dictionary of attributes; netboxtest takes a numeric ID or {\"id\": N}.")
		return 0, true
	}
	return *obj.ID, true
}

// setStr sets *dst to the string field k when in has it.
func (in *input) setStr(k string, dst *string) {
	if s, ok := in.str(k, false); ok {
		*dst = s
	}
}

// setChoice sets *dst to the choice field k when in has it.
func (in *input) setChoice(k string, nullable bool, dst *string, choices ...string) {
	if s, ok := in.choice(k, nullable, choices...); ok {
		*dst = s
	}
}

var slugRE = regexp.MustCompile(`^[-a-zA-Z0-9_]+$`)

// setSlug sets *dst to the field "slug" when in has it, refusing one that
// is not a slug.
func (in *input) setSlug(dst *string) {
	if s, ok := in.str("slug", false); ok {
		if !slugRE.MatchString(s) {
			in.errs.add("slug", "Enter a valid “slug” consisting of letters, numbers, underscores or hyphens.")
		}
		*dst = s
	}
}

// setBool sets *dst to the boolean field k when in has it.
func (in *input) setBool(k string, dst *bool) {
	if b, ok := in.boolean(k); ok {
		*dst = b
	}
}

// related sets *dst to the related object k, an object of tab, when in
// has it; an ID tab lacks is refused.
func related[T any](in *input, k string, tab *table[T], dst *int64) {
	if id, ok := in.ref(k, false); ok {
		if tab.get(id) == nil {
			in.errs.add(k, "Related object not found using the provided numeric ID: %d", id)
		}
		*dst = id
	}
}

// object reads a JSON object field.
func (in *input) object(k string) (map[string]json.RawMessage, bool) {
	m, ok := value[map[string]json.RawMessage](in, k, true, "Invalid data. Expected a dictionary.")
	if ok && m == nil && in.isNull(k) {
		in.errs.add(k, "Invalid data. Expected a dictionary.")
	}
	return m, ok
}

// known reports every field outside fields as one netboxtest does not
// implement, so that a client's mistake cannot pass silently. "id" is
// always allowed: bulk updates carry it.
func (in *input) known(fields ...string) {
	for k := range in.raw {
		if k != "id" && !slices.Contains(fields, k) {
			in.errs.add(k, "netboxtest does not implement this field.")
		}
	}
}

func (in *input) err() error {
	if len(in.errs) == 0 {
		return nil
	}
	return in.errs
}
