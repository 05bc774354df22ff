package lldpwait

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// MaxPort is the largest switch port number a Rule can name. A capture that
// yields more (or less than 1) does not name a port.
const MaxPort = 65535

// A Field is the text of a Neighbor that a Rule reads. The zero value is
// invalid.
type Field uint8

// Fields a Rule can read.
const (
	_                    Field = iota
	FieldPortID                // Neighbor.PortID, in its rendered text form
	FieldPortDescription       // Neighbor.PortDescription
)

// String returns "port ID" or "port description".
func (f Field) String() string {
	switch f {
	case FieldPortID:
		return "port ID"
	case FieldPortDescription:
		return "port description"
	}
	return "Field(" + strconv.Itoa(int(f)) + ")"
}

// A Rule names a switch port number from a Neighbor: when the neighbour
// satisfies the rule's conditions (each nil or empty condition holds for
// every neighbour), Pattern is matched against the chosen Field, its one
// capture group is read as a decimal number, and Offset is added. The result
// names the port if it lies in 1 to MaxPort; otherwise, or when Pattern does
// not match, the rule does not apply and the next one is tried.
//
// A Rule is a plain value; the regular expressions in it are safe for
// concurrent use, so a Rule may be shared by goroutines once built. It must
// not be changed while a Port or Check call reads it.
type Rule struct {
	// Name identifies the rule in errors. Optional.
	Name string

	// SystemName, when not nil, must match Neighbor.SystemName.
	SystemName *regexp.Regexp
	// ChassisID, when not nil, must match Neighbor.ChassisID (its rendered
	// text form, e.g. "74:83:c2:01:02:03" for a MAC address).
	ChassisID *regexp.Regexp
	// PortIDSubtypes, when not empty, lists the port ID subtypes the rule
	// applies to.
	PortIDSubtypes []PortIDSubtype

	// Field is the text Pattern reads. Required: the zero Field is invalid.
	Field Field
	// Pattern must have exactly one capture group, which captures the
	// port's decimal number. Required. Anchor it (^...$) unless a partial
	// match is meant.
	Pattern *regexp.Regexp
	// Offset is added to the captured number: 1 for names that count from
	// 0 (eth4 is port 5), 0 for names that count from 1.
	Offset int
}

// validate reports whether r can be applied.
func (r *Rule) validate() error {
	if r.Field != FieldPortID && r.Field != FieldPortDescription {
		return fmt.Errorf("%w %s: Field %d is neither FieldPortID nor FieldPortDescription", ErrBadRule, r.label(), r.Field)
	}
	if r.Pattern == nil {
		return fmt.Errorf("%w %s: no Pattern", ErrBadRule, r.label())
	}
	if k := r.Pattern.NumSubexp(); k != 1 {
		return fmt.Errorf("%w %s: Pattern %q has %d capture groups, want 1", ErrBadRule, r.label(), r.Pattern, k)
	}
	return nil
}

func (r *Rule) label() string {
	if r.Name != "" {
		return strconv.Quote(r.Name)
	}
	return fmt.Sprintf("with Pattern %q", r.Pattern)
}

// port returns the port r names for n, or 0 when r does not apply.
func (r *Rule) port(n *Neighbor) int {
	if r.SystemName != nil && !r.SystemName.MatchString(n.SystemName) {
		return 0
	}
	if r.ChassisID != nil && !r.ChassisID.MatchString(n.ChassisID) {
		return 0
	}
	if len(r.PortIDSubtypes) > 0 && !slices.Contains(r.PortIDSubtypes, n.PortIDSubtype) {
		return 0
	}
	text := n.PortID
	if r.Field == FieldPortDescription {
		text = n.PortDescription
	}
	m := r.Pattern.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	v, err := strconv.Atoi(m[1])
	if err != nil || v > MaxPort {
		return 0
	}
	p := v + r.Offset
	if p < 1 || p > MaxPort {
		return 0
	}
	return p
}

// Patterns of the default rules.
var (
	// "Port 5", "port5": UniFi switches send port ID subtype local with
	// "Port N", N counting from 1, e.g. lldpcli's "PortID: local Port 5"
	// from a USW-Flex-2.5G-8 or a US-48.
	portNPattern = regexp.MustCompile(`^(?i:port)\s*(\d+)$`)
	// "eth4": Linux interface names count from 0; UniFi devices whose
	// switch ports are Linux interfaces name port N ethN-1.
	ethPattern = regexp.MustCompile(`^eth(\d+)$`)
	// "5", "0/5", "1/0/5", "Ethernet5", "GigabitEthernet1/0/5", "Gi1/0/5",
	// "ge-0/0/5", "xe-0/0/5", "swp5", "g5": an optional alphabetic prefix,
	// optional slot/module numbers, then the port number, counting from 1.
	ifNamePattern = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z-]*)?(?:\d+/)*(\d+)$`)
)

// DefaultRules returns the rules a nil or empty PortConfig applies, in the
// order they are tried. Each call returns a new slice, which the caller may
// change or extend.
//
//  1. A port ID of subtype locally assigned, interface name, interface
//     alias or port component that reads "Port N" (any case, space
//     optional) names port N. UniFi switches send this.
//  2. A port ID of subtype interface name "ethN" names port N+1.
//  3. A port ID of subtype interface name or port component that reads
//     like an interface name ("0/5", "ge-0/0/5", "Ethernet5",
//     "GigabitEthernet1/0/5", "swp5", "5") names its last number.
//  4. Otherwise the port description, whatever the port ID subtype, is read
//     as in 1 to 3: "Port N" names N, "ethN" names N+1, an interface name
//     names its last number. This covers switches that send a MAC address as
//     port ID with the port's name in the description (lldpd does by
//     default), and switches whose locally assigned port ID is an ifIndex
//     (Juniper: "506", described "ge-0/0/5").
//  5. Last, a port ID of subtype locally assigned is read as in 2 and 3:
//     "eth4" names 5, "g5" or "5" names 5.
//
// A switch family whose names these rules misread needs its own rules
// before them: match it by SystemName or ChassisID.
func DefaultRules() []Rule {
	names := []PortIDSubtype{PortLocal, PortInterfaceName, PortInterfaceAlias, PortComponent}
	ifNames := []PortIDSubtype{PortInterfaceName, PortComponent}
	local := []PortIDSubtype{PortLocal}
	return []Rule{
		{Name: "port ID Port N", PortIDSubtypes: names, Field: FieldPortID, Pattern: portNPattern},
		{Name: "port ID ethN", PortIDSubtypes: []PortIDSubtype{PortInterfaceName}, Field: FieldPortID, Pattern: ethPattern, Offset: 1},
		{Name: "port ID interface name", PortIDSubtypes: ifNames, Field: FieldPortID, Pattern: ifNamePattern},
		{Name: "port description Port N", Field: FieldPortDescription, Pattern: portNPattern},
		{Name: "port description ethN", Field: FieldPortDescription, Pattern: ethPattern, Offset: 1},
		{Name: "port description interface name", Field: FieldPortDescription, Pattern: ifNamePattern},
		{Name: "local port ID ethN", PortIDSubtypes: local, Field: FieldPortID, Pattern: ethPattern, Offset: 1},
		{Name: "local port ID", PortIDSubtypes: local, Field: FieldPortID, Pattern: ifNamePattern},
	}
}

// PortConfig says how Port and Check name a neighbour's switch port. A nil
// *PortConfig applies DefaultRules. A PortConfig may be shared by
// goroutines, and must not be changed while they use it.
type PortConfig struct {
	// Rules are tried in order; the first that applies names the port.
	// Empty means DefaultRules. To add rules for a switch family and keep
	// the defaults, append DefaultRules() after your own.
	Rules []Rule
}

// ErrBadRule is returned by Port, Check and PortConfig.Validate for a Rule
// that cannot be applied: no Pattern, not exactly one capture group, or an
// invalid Field.
var ErrBadRule = errors.New("lldpwait: invalid port rule")

// ErrPortUnnamed is returned by Port and Check when no rule names a port
// number for the neighbour. The error's text quotes the port ID, its
// subtype, the port description and the system name.
var ErrPortUnnamed = errors.New("no rule names the switch port")

// Validate returns an error wrapping ErrBadRule when a rule cannot be
// applied. Port and Check validate too; Validate lets a program refuse a bad
// configuration when it starts.
func (c *PortConfig) Validate() error {
	rules := c.rules()
	for i := range rules {
		if err := rules[i].validate(); err != nil {
			return err
		}
	}
	return nil
}

var defaultRules = DefaultRules()

func (c *PortConfig) rules() []Rule {
	if c == nil || len(c.Rules) == 0 {
		return defaultRules
	}
	return c.Rules
}

// Port returns the switch port number n names under cfg's rules (nil cfg:
// DefaultRules).
//
// errors.Is finds ErrNoAttestedPort when n is nil (no frame, so no port),
// ErrPortUnnamed when no rule names a port, and ErrBadRule for a rule that
// cannot be applied.
func Port(n *Neighbor, cfg *PortConfig) (int, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	if n == nil {
		return 0, ErrNoAttestedPort
	}
	rules := cfg.rules()
	for i := range rules {
		if p := rules[i].port(n); p > 0 {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: port ID %q (%s), port description %q, system name %q",
		ErrPortUnnamed, n.PortID, n.PortIDSubtype, n.PortDescription, n.SystemName)
}
