package configserve

import "errors"

// Errors that callers match with errors.Is.
var (
	// ErrInvalidCode: Put was given a code NewCode cannot have made (see
	// ValidCode).
	ErrInvalidCode = errors.New("configserve: not an install code")
	// ErrCodeInUse: Put was given a code that already holds a config.
	ErrCodeInUse = errors.New("configserve: the install code already holds a config")
	// ErrCodeSpent: Put was given a code whose config was served. A code
	// serves once.
	ErrCodeSpent = errors.New("configserve: the install code was served; a code serves once")
	// ErrNoConfig: Put was given an empty config.
	ErrNoConfig = errors.New("configserve: the config is empty")
	// ErrNoDevice: Put was given a Device with neither ID nor Name.
	ErrNoDevice = errors.New("configserve: the config names no device")
	// ErrNoRun: Put was given no run name.
	ErrNoRun = errors.New("configserve: the config names no run")
	// ErrClosed: the Server was closed.
	ErrClosed = errors.New("configserve: the server is closed")
	// ErrNoGate: New was given a nil Gate.
	ErrNoGate = errors.New("configserve: no gate: the server cannot tell whether a device is planned")
	// ErrInvalidConfig: New was given a Config with a negative field.
	ErrInvalidConfig = errors.New("configserve: invalid config")
)
