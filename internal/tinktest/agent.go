package tinktest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Agent asks tink-server for a worker's actions and reports their states
// over gRPC, with the two calls of Tinkerbell's agent (pkg/proto's
// WorkflowService: GetAction and ReportActionStatus), so that a test can
// play the part of a machine's agent without a container engine: what it
// reports, and when, is the test's. The calls are unary gRPC over plain
// HTTP/2 (tink-server serves no TLS here), their messages encoded in
// protobuf's wire format by the field numbers of Tinkerbell's .proto files;
// no Tinkerbell code is linked. An Agent is safe for concurrent use.
type Agent struct {
	addr string
	hc   *http.Client
}

// Agent returns a client of tb's tink-server.
func (tb *Tinkerbell) Agent() *Agent { return NewAgent(tb.grpc) }

// NewAgent returns a client of the tink-server at addr (host:port).
func NewAgent(addr string) *Agent {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &Agent{addr: addr, hc: &http.Client{Transport: &http.Transport{Protocols: &p}}}
}

// Status is a call's gRPC status other than OK.
type Status struct {
	Code    int
	Message string
}

func (s *Status) Error() string { return fmt.Sprintf("gRPC status %d: %s", s.Code, s.Message) }

// Action is an action tink-server hands a worker: GetAction's answer.
type Action struct {
	WorkflowID string // <namespace>/<name>
	TaskID     string
	AgentID    string
	ActionID   string
	Name       string
	Image      string
	Timeout    int64 // seconds
	Command    []string
	Volumes    []string
	// Environment holds KEY=value strings, the task's and the action's,
	// sorted.
	Environment []string
}

// Env returns the value of the action's environment variable key; "" when
// it has none.
func (a *Action) Env(key string) string {
	for _, kv := range a.Environment {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// GetAction asks for worker agentID's next action, as the agent does. When
// the first Workflow tink-server finds for the worker cannot serve one, it
// tries again every second for up to a minute before it answers a *Status:
// NotFound (5) when no Workflow names the worker or its Workflow has no
// action left for it, FailedPrecondition (9) when the Workflow it took
// first is PREPARING, or is neither PENDING nor RUNNING (it ended); ctx
// bounds the wait.
func (c *Agent) GetAction(ctx context.Context, agentID string) (*Action, error) {
	rsp, err := c.call(ctx, "GetAction", appendString(nil, 1, agentID))
	if err != nil {
		return nil, err
	}
	a := &Action{}
	err = eachField(rsp, func(num int, v uint64, b []byte) {
		switch num {
		case 1:
			a.WorkflowID = string(b)
		case 2:
			a.TaskID = string(b)
		case 3:
			a.AgentID = string(b)
		case 4:
			a.ActionID = string(b)
		case 5:
			a.Name = string(b)
		case 6:
			a.Image = string(b)
		case 7:
			a.Timeout = int64(v)
		case 8:
			a.Command = append(a.Command, string(b))
		case 9:
			a.Volumes = append(a.Volumes, string(b))
		case 10:
			a.Environment = append(a.Environment, string(b))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("GetAction: %w", err)
	}
	return a, nil
}

// The states an agent reports (ActionStatusRequest.StateType).
var states = map[string]uint64{"PENDING": 1, "RUNNING": 2, "FAILED": 3, "TIMEOUT": 4, "SUCCESS": 5}

// Report reports action a's state ("RUNNING", "SUCCESS", "FAILED" or
// "TIMEOUT") with message, as the agent's ReportActionStatus does: every
// field set, start and stop the times the agent holds (Tinkerbell's agent
// reports RUNNING with both zero, and its end with "action completed" and
// the action's times), duration as the agent writes it ("1s2ms").
func (c *Agent) Report(ctx context.Context, a *Action, state, message string, start, stop time.Time, duration string) error {
	st, ok := states[state]
	if !ok {
		return fmt.Errorf("report: unknown state %q", state)
	}
	var b []byte
	b = appendString(b, 1, a.WorkflowID)
	b = appendString(b, 2, a.AgentID)
	b = appendString(b, 3, a.TaskID)
	b = appendString(b, 4, a.ActionID)
	b = appendString(b, 5, a.Name)
	b = appendVarint(b, 6, st)
	b = appendBytes(b, 7, timestamp(start))
	b = appendBytes(b, 8, timestamp(stop))
	b = appendString(b, 9, duration)
	b = appendBytes(b, 10, appendString(nil, 1, message))
	_, err := c.call(ctx, "ReportActionStatus", b)
	return err
}

// call makes one unary call of method with the encoded request and
// returns the encoded response.
func (c *Agent) call(ctx context.Context, method string, req []byte) ([]byte, error) {
	body := make([]byte, 5, 5+len(req))
	binary.BigEndian.PutUint32(body[1:], uint32(len(req)))
	body = append(body, req...)
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.addr+"/proto.WorkflowService/"+method, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Content-Type", "application/grpc")
	r.Header.Set("TE", "trailers")
	rsp, err := c.hc.Do(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer rsp.Body.Close()
	data, err := io.ReadAll(rsp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if rsp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %s", method, rsp.Status)
	}
	// A call that fails at once answers its status in the headers
	// (Trailers-Only), else in the trailers.
	st, msg := rsp.Header.Get("Grpc-Status"), rsp.Header.Get("Grpc-Message")
	if st == "" {
		st, msg = rsp.Trailer.Get("Grpc-Status"), rsp.Trailer.Get("Grpc-Message")
	}
	code, err := strconv.Atoi(st)
	if err != nil {
		return nil, fmt.Errorf("%s: grpc-status %q", method, st)
	}
	if code != 0 {
		if m, err := url.PathUnescape(msg); err == nil {
			msg = m
		}
		return nil, fmt.Errorf("%s: %w", method, &Status{Code: code, Message: msg})
	}
	if len(data) < 5 || data[0] != 0 || int(binary.BigEndian.Uint32(data[1:5])) != len(data)-5 {
		return nil, fmt.Errorf("%s: a response of %d bytes is not one uncompressed message", method, len(data))
	}
	return data[5:], nil
}

// timestamp encodes t as a google.protobuf.Timestamp (the zero time as
// its seconds, -62135596800, as the agent's timestamppb.New does).
func timestamp(t time.Time) []byte {
	var b []byte
	if s := t.Unix(); s != 0 {
		b = appendVarint(b, 1, uint64(s))
	}
	if n := t.Nanosecond(); n != 0 {
		b = appendVarint(b, 2, uint64(n))
	}
	return b
}

func appendTag(b []byte, num, wire int) []byte {
	return binary.AppendUvarint(b, uint64(num<<3|wire))
}

func appendVarint(b []byte, num int, v uint64) []byte {
	return binary.AppendUvarint(appendTag(b, num, 0), v)
}

func appendBytes(b []byte, num int, v []byte) []byte {
	b = binary.AppendUvarint(appendTag(b, num, 2), uint64(len(v)))
	return append(b, v...)
}

func appendString(b []byte, num int, s string) []byte { return appendBytes(b, num, []byte(s)) }

// eachField calls f with each field of the protobuf message msg: its
// number, and its value (a varint's v, a length-delimited field's b).
// Fixed-size fields are skipped.
func eachField(msg []byte, f func(num int, v uint64, b []byte)) error {
	for len(msg) > 0 {
		tag, n := binary.Uvarint(msg)
		if n <= 0 {
			return errors.New("bad field tag")
		}
		msg = msg[n:]
		num := int(tag >> 3)
		switch tag & 7 {
		case 0:
			v, n := binary.Uvarint(msg)
			if n <= 0 {
				return errors.New("bad varint")
			}
			msg = msg[n:]
			f(num, v, nil)
		case 1:
			if len(msg) < 8 {
				return errors.New("short fixed64")
			}
			msg = msg[8:]
		case 2:
			l, n := binary.Uvarint(msg)
			if n <= 0 || uint64(len(msg)-n) < l {
				return errors.New("bad length")
			}
			f(num, 0, msg[n:n+int(l)])
			msg = msg[n+int(l):]
		case 5:
			if len(msg) < 4 {
				return errors.New("short fixed32")
			}
			msg = msg[4:]
		default:
			return fmt.Errorf("wire type %d", tag&7)
		}
	}
	return nil
}
