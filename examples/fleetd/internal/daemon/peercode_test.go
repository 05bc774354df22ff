package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// peerCode gathers the replicas' answers to "the install code of run?":
// a code from any wins; else a replica still starting the run (200 with no
// code) says it is not to be replaced; else nobody holds it, and a replica
// that fails to answer says nothing.
func TestPeerCode(t *testing.T) {
	const run = "provision-node-01-946684800"
	notHeld := func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no code held for the run", http.StatusNotFound)
	}
	answer := func(code string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"code": "` + code + `"}`))
		}
	}
	broken := func(w http.ResponseWriter, r *http.Request) { http.Error(w, "", http.StatusInternalServerError) }
	for _, c := range []struct {
		name     string
		replicas []http.HandlerFunc
		code     string
		held     bool
	}{
		{"held by none", []http.HandlerFunc{notHeld, notHeld}, "", false},
		{"one fails, one holds none", []http.HandlerFunc{broken, notHeld}, "", false},
		{"starting at one", []http.HandlerFunc{notHeld, answer("")}, "", true},
		{"held by one", []http.HandlerFunc{answer("SECRETCODE"), notHeld}, "SECRETCODE", true},
		{"held by one, one fails", []http.HandlerFunc{broken, answer("SECRETCODE")}, "SECRETCODE", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &Daemon{peers: &peers{client: http.DefaultClient}}
			for i, h := range c.replicas {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodPost || r.URL.Path != codePath {
						t.Errorf("%s %s, want POST %s", r.Method, r.URL.Path, codePath)
					}
					h(w, r)
				}))
				t.Cleanup(srv.Close)
				d.peers.others = append(d.peers.others, Peer{Name: fmt.Sprintf("fleetd-%d", i+1), URL: srv.URL})
			}
			if code, held := d.peerCode(context.Background(), run); code != c.code || held != c.held {
				t.Errorf("peerCode = %q, %v; want %q, %v", code, held, c.code, c.held)
			}
		})
	}
}
