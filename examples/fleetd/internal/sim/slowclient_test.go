package sim

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/configserve"

	"github.com/fleetkit/fleet/examples/fleetd/internal/daemon"
)

// A client that trickles its request, headers or body, on any endpoint, is
// cut off once FLEET_READ_TIMEOUT has passed, and so is one that never
// finishes its TLS handshake.
func TestSlowClientsCutOff(t *testing.T) {
	const timeout = time.Second
	f := newTestFleet(t, func(s *daemon.Settings) { s.ReadTimeout = timeout }, testNode{name: "w-01", class: "worker", approve: true})
	addr := strings.TrimPrefix(f.url, "https://")
	tlsConf := f.client.Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsConf.ServerName = "127.0.0.1"
	body := func(method, path string, header ...string) string {
		return method + " " + path + " HTTP/1.1\r\nHost: fleetd\r\n" + strings.Join(header, "") +
			"Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"
	}
	for name, sent := range map[string]string{
		"headers":       "POST /attest/claim HTTP/1.1\r\nHost: fleetd\r\n",
		"claim body":    body("POST", "/attest/claim"),
		"proof body":    body("POST", "/attest/proof"),
		"config body":   body("GET", configserve.PathPrefix+configserve.NewCode()),
		"approver body": body("GET", "/v1/claims/SN-w-01", "Authorization: Bearer "+approverToken+"\r\n"),
		"TLS handshake": "",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			raw, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			conn := raw
			if sent != "" {
				tc := tls.Client(raw, tlsConf)
				if err := tc.Handshake(); err != nil {
					t.Fatal(err)
				}
				conn = tc
				if _, err := io.WriteString(conn, sent); err != nil {
					t.Fatal(err)
				}
				// One byte every 200 ms: the request never ends.
				go func() {
					for range 50 {
						time.Sleep(200 * time.Millisecond)
						if _, err := conn.Write([]byte{' '}); err != nil {
							return
						}
					}
				}()
			}
			// fleetd may answer (400 for a body it could not read, 404 for a
			// config) before it closes; what counts is that it closes.
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = io.Copy(io.Discard, conn)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("fleetd still held the connection after %v", time.Since(start))
			}
			if took := time.Since(start); took > timeout+2*time.Second {
				t.Errorf("fleetd closed the connection after %v, want about %v", took, timeout)
			}
		})
	}
}

// fleetd serves at most FLEET_MAX_CONNECTIONS connections at once. A flood
// of connections that send nothing holds the slots only until the read
// timeout; the client after them waits, and is served then.
func TestConnectionsCapped(t *testing.T) {
	const timeout, slots = 2 * time.Second, 4
	f := newTestFleet(t, func(s *daemon.Settings) { s.ReadTimeout, s.MaxConns = timeout, slots }, testNode{name: "w-01", class: "worker", approve: true})
	addr := strings.TrimPrefix(f.url, "https://")
	for range slots {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	time.Sleep(200 * time.Millisecond) // fleetd accepts them
	start := time.Now()
	rsp, err := f.client.Get(f.url + configserve.PathPrefix + configserve.NewCode())
	took := time.Since(start)
	if err != nil {
		t.Fatalf("the request after the flood: %v", err)
	}
	rsp.Body.Close()
	if rsp.StatusCode != http.StatusNotFound {
		t.Errorf("the request after the flood: %s, want 404", rsp.Status)
	}
	if took < timeout-500*time.Millisecond || took > timeout+3*time.Second {
		t.Errorf("the request after %d idle connections was answered after %v; want it to wait for their %v timeout", slots, took, timeout)
	}
}
