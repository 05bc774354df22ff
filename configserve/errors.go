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
	// ErrInvalidConfig: New was given a Config with a negative field, or
	// ConfigureServer no http.Server.
	ErrInvalidConfig = errors.New("configserve: invalid config")
	// ErrNotConfigured: Put came before Server.ConfigureServer set up the
	// http.Server that serves the Server: no fetch could get the config.
	ErrNotConfigured = errors.New("configserve: no http.Server is set up to serve the configs: call Server.ConfigureServer before Put")
	// ErrHTTP2: ConfigureServer was given an http.Server that asks for
	// HTTP/2. An answer that carries a config must own its connection,
	// which only HTTP/1.1 gives it.
	ErrHTTP2 = errors.New("configserve: the http.Server asks for HTTP/2; configs are served over HTTP/1.1 only")
)
