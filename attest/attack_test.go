package attest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetkit/fleet/attest"
	"github.com/fleetkit/fleet/attest/attesttest"
)

func TestReplayedProofRefused(t *testing.T) {
	f, tpm := approvedFleet(t, nil)
	p := activate(t, tpm, f.challenge(t, tpm, "S1"))
	f.proveWant(t, "first proof", p, http.StatusOK)
	f.proveWant(t, "replayed proof", p, http.StatusConflict)
	if n := len(f.hook.calls()); n != 1 {
		t.Errorf("the admission hook was called %d times, want 1", n)
	}
	if n := len(f.logs.Lines("attest.verdict")); n != 1 {
		t.Errorf("%d verdict lines, want 1", n)
	}
}

// A proof whose session or secrets are not the ones fleetd sealed and
// asked is refused and admits nothing: the secrets of another session of
// the machine, or the machine's secrets with another machine's session
// (each session's secrets are its own); its session with a byte flipped,
// cut short, or sealed by a server with another key. The session itself
// still attests. Secrets wrong, missing, swapped or one too many are
// TestVerifyProof's rows.
func TestForgedProofsRefused(t *testing.T) {
	f, tpm := approvedFleet(t, nil)
	good := activate(t, tpm, f.challenge(t, tpm, "S1"))
	other := quickTPM(t, 1)
	f.bindings.Set("S3", attesttest.Approved(t, other))
	later, elsewhere := f.challenge(t, tpm, "S1"), f.challenge(t, other, "S3")
	session := func(change func(s []byte) []byte) wireProof {
		p := good
		p.Session = change(bytes.Clone(good.Session))
		return p
	}
	forged := map[string]wireProof{
		"session B with the secrets that answer session A":      {Session: later.Session, Secrets: good.Secrets},
		"another machine's session with this machine's secrets": {Session: elsewhere.Session, Secrets: good.Secrets},
		"truncated session": session(func(s []byte) []byte { return s[:len(s)-1] }),
	}
	for _, i := range []int{0, 12, len(good.Session) / 2, len(good.Session) - 1} {
		forged[fmt.Sprintf("session with byte %d flipped", i)] = session(func(s []byte) []byte { s[i] ^= 0x01; return s })
	}
	for name, p := range forged {
		f.proveWant(t, name, p, http.StatusForbidden)
	}
	// A session sealed by a server with another key.
	otherKey := newFleetFor(t, nil, tpm)
	otherKey.proveWant(t, "a session of another key", good, http.StatusForbidden)
	if n := len(f.hook.calls()) + len(otherKey.hook.calls()); n != 0 {
		t.Errorf("the admission hook was called %d times", n)
	}
	f.proveWant(t, "the right secrets after wrong ones", good, http.StatusOK)
}

// sharedSpent is a record of spent sessions that several Servers in one
// process share, as replicas share one through their cluster.
type sharedSpent struct{ ids sync.Map }

func (s *sharedSpent) Spend(_ context.Context, id string, _ time.Time) (bool, error) {
	_, spent := s.ids.LoadOrStore(id, true)
	return !spent, nil
}

// A key shared without a shared record of spent sessions would let a
// second Server accept a proof the first accepted: NewServer refuses it.
func TestSealingKeyWithoutSpentRefused(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	srv, err := attest.NewServer(&attesttest.Bindings{}, &attest.Config{SealingKey: key})
	if !errors.Is(err, attest.ErrSealingKeyWithoutSpent) || srv != nil {
		t.Fatalf("NewServer with a key and no Spent: %v, %v; want ErrSealingKeyWithoutSpent", srv, err)
	}
	if _, err := attest.NewServer(&attesttest.Bindings{}, nil); err != nil {
		t.Fatalf("NewServer with a random key: %v", err)
	}
}

func TestExpiredSessionRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, tpm, claim := approvedServer(t)
		challenge := func() wireChallenge {
			status, b := serve(srv, "claim", claim)
			return challengeOf(t, status, b)
		}
		late := activate(t, tpm, challenge())
		time.Sleep(attest.DefaultSessionTTL)
		if status, b := serve(srv, "proof", mustJSON(t, late)); status != http.StatusGone {
			t.Errorf("a proof %v after the claim: %d %s, want 410", attest.DefaultSessionTTL, status, b)
		}
		inTime := activate(t, tpm, challenge())
		time.Sleep(attest.DefaultSessionTTL - time.Second)
		if status, b := serve(srv, "proof", mustJSON(t, inTime)); status != http.StatusOK {
			t.Errorf("a proof 59 s after the claim: %d %s, want 200", status, b)
		}
	})
}

func TestMalformedRequestsRefused(t *testing.T) {
	f, tpm := approvedFleet(t, &attest.Config{MaxBody: 16 << 10})
	claim := claimOf(t, tpm, "S1")
	mutate := func(fn func(c *wireClaim)) []byte {
		c := claim
		c.EKs = append([]wireEK(nil), claim.EKs...)
		fn(&c)
		return mustJSON(t, c)
	}
	for name, tc := range map[string]struct {
		op     string
		body   []byte
		status int
	}{
		"empty claim":         {"claim", nil, 400},
		"not JSON":            {"claim", []byte("serial=S1"), 400},
		"truncated":           {"claim", mustJSON(t, claim)[:100], 400},
		"array":               {"claim", []byte(`[1,2]`), 400},
		"trailing data":       {"claim", append(mustJSON(t, claim), []byte(`{}`)...), 400},
		"wrong version":       {"claim", mutate(func(c *wireClaim) { c.Version = 2 }), 400},
		"no serial":           {"claim", mutate(func(c *wireClaim) { c.Serial = "" }), 400},
		"serial with newline": {"claim", mutate(func(c *wireClaim) { c.Serial = "S1\nverdict=attested" }), 400},
		"bad MAC":             {"claim", mutate(func(c *wireClaim) { c.MAC = "52:54:00" }), 400},
		"no EK":               {"claim", mutate(func(c *wireClaim) { c.EKs = nil }), 400},
		"two RSA EKs":         {"claim", mutate(func(c *wireClaim) { c.EKs[1] = c.EKs[0] }), 400},
		"kind lies":           {"claim", mutate(func(c *wireClaim) { c.EKs[0].Kind = "eccp256"; c.EKs = c.EKs[:1] }), 400},
		"EK not DER":          {"claim", mutate(func(c *wireClaim) { c.EKs[0].Public = []byte("nope") }), 400},
		"LLDP control char":   {"claim", mutate(func(c *wireClaim) { c.LLDP = &attest.LLDP{PortID: "7\x1b[2J"} }), 400},
		"bad base64":          {"claim", []byte(`{"version":1,"serial":"S1","mac":"52:54:00:12:34:56","eks":[{"kind":"rsa2048","public":"!!"}]}`), 400},
		"AK signature": {"claim", mutate(func(c *wireClaim) {
			c.AK.CreateSignature = bytes.Clone(c.AK.CreateSignature)
			c.AK.CreateSignature[len(c.AK.CreateSignature)-1] ^= 1
		}), 403},
		"oversized claim": {"claim", bytes.Repeat([]byte(" "), 16<<10+1), 413},
		"empty proof":     {"proof", []byte(`{}`), 400},
		"short secret":    {"proof", []byte(`{"session":"AAAA","secrets":[{"kind":"rsa2048","secret":"AAAA"}]}`), 400},
		"oversized proof": {"proof", []byte(`{"session":"` + strings.Repeat("A", 16<<10) + `"}`), 413},
	} {
		status, b := f.post(t, tc.op, tc.body)
		if status != tc.status {
			t.Errorf("%s: %d %s, want %d", name, status, b, tc.status)
		}
		var e struct{ Error string }
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			t.Errorf("%s: the answer %q carries no error", name, b)
		}
	}
	if n := f.bindings.Calls(); n != 0 {
		t.Errorf("refused claims asked the binding source %d times", n)
	}
	// Methods and paths.
	rsp, err := f.ts.Client().Get(f.url + "/claim")
	if err != nil {
		t.Fatal(err)
	}
	rsp.Body.Close()
	if rsp.StatusCode != http.StatusMethodNotAllowed || rsp.Header.Get("Allow") != "POST" {
		t.Errorf("GET claim: %d, Allow %q", rsp.StatusCode, rsp.Header.Get("Allow"))
	}
	if status, _ := f.post(t, "verdict", []byte(`{}`)); status != http.StatusNotFound {
		t.Errorf("POST verdict: %d, want 404", status)
	}
}
