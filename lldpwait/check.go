package lldpwait

import (
	"errors"
	"fmt"
)

// The runbook's journal lines for a machine that is not where its entry
// says, or whose port nobody knows ("If something goes wrong": the journal
// says `on port N, expected M`, `recorded no attested switch port` or
// `attested no switch port`).
var (
	// ErrNoAttestedPort is the machine's side: its claim carried no switch
	// port, because HookOS received no LLDP frame within the wait (35
	// seconds by default) of the attestation. Check returns it for a nil
	// Neighbor. Its text is the journal line "attested no switch port".
	ErrNoAttestedPort = errors.New("attested no switch port")

	// ErrNoRecordedPort is fleetd's side: when fleetd checks a machine later
	// (e.g. when a desired_action run starts), the port recorded from its
	// attestation (NetBox's attested_switch_port) holds none. CheckRecorded
	// returns it for a recorded port of 0. Its text is the journal line
	// "recorded no attested switch port".
	ErrNoRecordedPort = errors.New("recorded no attested switch port")

	// ErrWrongPort is matched (errors.Is) by every *PortError.
	ErrWrongPort = errors.New("wrong switch port")

	// ErrNoDeclaredPort is returned by Check and CheckRecorded when the
	// declared port is not a port number (below 1): a missing switch_port
	// never passes a check.
	ErrNoDeclaredPort = errors.New("no switch port is declared")
)

// A PortError says the machine is on another switch port than its entry
// declares. Its text is the journal line "on port N, expected M".
// errors.Is(err, ErrWrongPort) finds it; errors.As gives the numbers.
type PortError struct {
	Port     int // the port the machine is on (attested or recorded)
	Expected int // the port its entry declares (switch_port)
}

func (e *PortError) Error() string {
	return fmt.Sprintf("on port %d, expected %d", e.Port, e.Expected)
}

// Unwrap returns ErrWrongPort.
func (e *PortError) Unwrap() error { return ErrWrongPort }

// Is reports whether target is a *PortError with the same numbers.
func (e *PortError) Is(target error) bool {
	t, ok := target.(*PortError)
	return ok && t != nil && *t == *e
}

// Check compares the neighbour a machine attested with its declared switch
// port, naming the neighbour's port with cfg's rules (nil: DefaultRules).
// It returns nil when they agree.
//
// errors.Is finds, in this order of precedence: ErrNoDeclaredPort for a
// declared port below 1; ErrNoAttestedPort for a nil n (no LLDP frame
// arrived); ErrBadRule or ErrPortUnnamed when the rules name no port;
// ErrWrongPort, as a *PortError, when the ports differ. To record the
// attested port, call Port.
func Check(n *Neighbor, declared int, cfg *PortConfig) error {
	if err := checkDeclared(declared); err != nil {
		return err
	}
	if n == nil {
		return ErrNoAttestedPort
	}
	p, err := Port(n, cfg)
	if err != nil {
		return err
	}
	if p != declared {
		return &PortError{Port: p, Expected: declared}
	}
	return nil
}

// CheckRecorded compares the switch port recorded from a machine's
// attestation (0: none recorded) with its declared switch port. It returns
// nil when they agree.
//
// errors.Is finds ErrNoDeclaredPort for a declared port below 1,
// ErrNoRecordedPort for a recorded port below 1, and ErrWrongPort, as a
// *PortError, when the ports differ.
func CheckRecorded(recorded, declared int) error {
	if err := checkDeclared(declared); err != nil {
		return err
	}
	switch {
	case recorded == 0:
		return ErrNoRecordedPort
	case recorded < 0:
		return fmt.Errorf("%w (recorded %d)", ErrNoRecordedPort, recorded)
	case recorded != declared:
		return &PortError{Port: recorded, Expected: declared}
	}
	return nil
}

func checkDeclared(declared int) error {
	switch {
	case declared == 0:
		return ErrNoDeclaredPort
	case declared < 0:
		return fmt.Errorf("%w (switch_port %d)", ErrNoDeclaredPort, declared)
	}
	return nil
}
