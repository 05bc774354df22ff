package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/fleetkit/fleet/inventory"
)

// failNetBox says a NetBox error on stderr and returns 2. A NetBox that did
// not answer is one short line, "fleetctl NAME: netbox did not answer at
// URL: REASON", REASON the cause an operator acts on ("connection refused",
// "lookup HOST: no such host", "no answer in time", "the connection
// closed without an answer", "it answered 503",
// a certificate the client refused); the request and the chain of
// transport errors are left out.
func (c *call) failNetBox(err error) int {
	return c.fail(2, shortNetBoxError(netBoxURL(), err))
}

// netBoxURL is the NetBox NETBOX_URL names.
func netBoxURL() string { return os.Getenv("NETBOX_URL") }

// shortNetBoxError is err, or, when NetBox did not answer, an error that
// says so in one short line; errors.Is still finds
// inventory.ErrUnavailable in it.
func shortNetBoxError(url string, err error) error {
	if !errors.Is(err, inventory.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w at %s: %s", inventory.ErrUnavailable, url, unansweredReason(err))
}

// unansweredReason is why NetBox, or the Kubernetes API server, did not
// answer, in a few words.
func unansweredReason(err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &dns):
		reason := "lookup " + dns.Name + ": "
		if dns.IsNotFound {
			return reason + "no such host"
		}
		return reason + dns.Err
	case errors.Is(err, context.Canceled):
		return "interrupted"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "no answer in time (see -timeout)"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed without an answer"
	}
	leaf := innermost(err)
	if leaf == inventory.ErrUnavailable {
		// NetBox answered, with a 5xx: the words after the sentinel say so.
		msg := err.Error()
		if i := strings.LastIndex(msg, inventory.ErrUnavailable.Error()+": "); i >= 0 {
			return msg[i+len(inventory.ErrUnavailable.Error())+2:]
		}
		return "no answer"
	}
	return leaf.Error()
}

// innermost follows err's chain to its last cause; of an error that wraps
// several, it follows the last, the cause the wrapper adds.
func innermost(err error) error {
	for {
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next := u.Unwrap()
			if next == nil {
				return err
			}
			err = next
		case interface{ Unwrap() []error }:
			errs := u.Unwrap()
			if len(errs) == 0 {
				return err
			}
			err = errs[len(errs)-1]
		default:
			return err
		}
	}
}
