package configserve

import (
	"fmt"
	"time"
)

// Kind says what happened to a config or a fetch. The zero Kind is invalid:
// the Server never reports it.
type Kind int

// Kinds of Event.
const (
	_ Kind = iota
	// Served: the peer's kernel acknowledged every byte of the answer that
	// carried the config. The code is spent and the config dropped, even if
	// the peer's application then discards the config: a later fetch with
	// the code is Refetched.
	Served
	// NotAcknowledged: an answer carrying the config did not reach the peer
	// whole before the connection closed or the write deadline passed. The
	// config stays for the next fetch.
	NotAcknowledged
	// Refetched: a fetch came with a code whose config was served. It gets
	// nothing. It feeds FleetInstallConfigRefetched.
	Refetched
	// Missing: a fetch came with a code the Server holds no config for and
	// does not remember serving. It feeds FleetInstallConfigMissing.
	Missing
	// Expired: a config waited unread for the TTL and was dropped.
	Expired
	// Lost: a config lent to another Server (Lend) for a fetch was not
	// settled by the loan's deadline, and was dropped, served or not, so
	// that it is never served twice. The lender reports it; a loan
	// settled in time is reported by the borrower, Served or
	// NotAcknowledged, with Borrowed set.
	Lost
)

var kindNames = [...]string{
	Served:          "served",
	NotAcknowledged: "not-acknowledged",
	Refetched:       "refetched",
	Missing:         "missing",
	Expired:         "expired",
	Lost:            "lost",
}

// String returns the kind's name, fit for a metric label: "served",
// "not-acknowledged", "refetched", "missing", "expired" or "lost".
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// textNotAcknowledged is the text of a NotAcknowledged event.
const textNotAcknowledged = "the peer did not acknowledge all of it"

// texts are the words of a Server's events and answers that name the
// service (Config.Name) or what its Gate asks (Config.GateName).
type texts struct {
	name, gateName string
	refetched      string // event Refetched
	missing        string // event Missing
	closed         string // answer 503 after Close
	gateDown       string // answer 503 when the Gate fails
	cannotCheck    string // answer 500 when delivery cannot be checked
	borrowFailed   string // answer 503 when Config.Borrow fails
}

func newTexts(name, gateName string) texts {
	return texts{
		name:         name,
		gateName:     gateName,
		refetched:    "the node asked again for the Talos config " + name + " served it",
		missing:      "the node asked for its Talos config, and " + name + " holds none for it",
		closed:       name + " is shutting down",
		gateDown:     gateName + " did not answer; try again",
		cannotCheck:  name + " cannot check delivery",
		borrowFailed: name + " could not reach the replica that holds configs; try again",
	}
}

func (t texts) served(run string) string { return t.name + " served the config of " + run }

func (t texts) expired(run string) string { return "the Talos config of " + run + " expired unread" }

func (t texts) lost(run string) string {
	return "the Talos config of " + run + " was lent for a fetch that never reported back; it was dropped, so that it is never served twice"
}

// An Event is what the Server reports to Config.Events, for the caller to
// journal on the device and to count for the runbook's alerts. No event
// carries an install code or config bytes.
type Event struct {
	Kind Kind
	// Device and Run name the config the event is about. Both are zero
	// for Missing: a code the Server does not hold names no device.
	Device Device
	Run    string
	// Peer is the address (host:port) the fetch came from; empty for
	// Expired. For NotAcknowledged it matters: a peer that is not the
	// node may hold the code, so a journal line should show it.
	Peer string
	// Text says what happened, for a journal line; <Name> is Config.Name
	// (with Name "fleetd", these are the runbook's lines):
	//   Served:          <Name> served the config of <run>
	//   NotAcknowledged: the peer did not acknowledge all of it
	//   Refetched:       the node asked again for the Talos config <Name> served it
	//   Missing:         the node asked for its Talos config, and <Name> holds none for it
	//   Expired:         the Talos config of <run> expired unread
	//   Lost:            the Talos config of <run> was lent for a fetch that never reported back; ...
	Text string
	// Borrowed: the fetch was answered with a config this Server borrowed
	// (Config.Borrow); the lender spends its code or keeps it, and
	// reports nothing of it but Lost.
	Borrowed bool
	// Time is when it happened.
	Time time.Time
}

// A Device names the NetBox device a config belongs to. At least one of ID
// and Name is set.
type Device struct {
	ID   int64  // NetBox device ID; 0: not given
	Name string // NetBox device name; "": not given
}

func (d Device) String() string {
	switch {
	case d.Name != "" && d.ID != 0:
		return fmt.Sprintf("%s (%d)", d.Name, d.ID)
	case d.Name != "":
		return d.Name
	case d.ID != 0:
		return fmt.Sprintf("device %d", d.ID)
	}
	return "no device"
}
