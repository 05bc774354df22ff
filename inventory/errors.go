package inventory

import "errors"

// Errors of the NetBox client that callers match with errors.Is.
var (
	// ErrUnavailable: NetBox did not answer in time, refused the
	// connection, or answered 5xx. fleetd answers 503 and loses nothing.
	ErrUnavailable = errors.New("netbox did not answer")
	// ErrNotFound: no device (or object) matches.
	ErrNotFound = errors.New("not found in netbox")
	// ErrRefusedToken: NetBox refused the API token (401 or 403).
	ErrRefusedToken = errors.New("netbox refused the token")
)
