package attest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/fleetkit/fleet/attest"
)

// The runbook: "The console says attest: try 5 failed — fleetd did not
// answer".
func TestFleetdDoesNotAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + ln.Addr().String() + "/attest"
	ln.Close() // nothing listens there now
	var console bytes.Buffer
	var waits []int
	res, err := attest.Run(context.Background(), url, quickTPM(t, 0), attest.Machine{Serial: "S1", MAC: testMAC}, &attest.ClientConfig{
		Console: &console,
		Backoff: func(n int) time.Duration { waits = append(waits, n); return 0 },
	})
	if !errors.Is(err, attest.ErrNoVerdict) {
		t.Fatalf("Run: %v, want ErrNoVerdict", err)
	}
	if res.Tries != 5 || res.Verdict != 0 {
		t.Errorf("result %+v", res)
	}
	if fmt.Sprint(waits) != "[1 2 3 4]" {
		t.Errorf("backed off after tries %v, want [1 2 3 4]", waits)
	}
	tries := slices.DeleteFunc(strings.Split(console.String(), "\n"), func(l string) bool { return !strings.HasPrefix(l, "attest: try ") })
	want := []string{"attest: try 1 failed", "attest: try 2 failed", "attest: try 3 failed", "attest: try 4 failed", "attest: try 5 failed"}
	if !slices.Equal(tries, want) {
		t.Errorf("console try lines %q, want %q", tries, want)
	}
	if !strings.Contains(console.String(), "connection refused") {
		t.Errorf("console %q does not say why", console.String())
	}
}

// failingTPM fails its first n activations, as a busy or faulty TPM does.
type failingTPM struct {
	attest.TPM
	mu    sync.Mutex
	fails int
}

func (f *failingTPM) ActivateCredential(c attest.Challenge) ([]byte, error) {
	f.mu.Lock()
	fail := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("%w: TPM_RC_RETRY", attest.ErrTPM)
	}
	return f.TPM.ActivateCredential(c)
}

func TestTPMErrorsRetried(t *testing.T) {
	f, tpm := approvedFleet(t, nil)
	res, console, err := f.run(t, &failingTPM{TPM: tpm, fails: 2}, "S1", nil)
	if err != nil || res.Verdict != attest.Attested || res.Tries != 3 {
		t.Fatalf("Run: %+v %v\n%s", res, err, console)
	}
	want := "attest: try 1 failed\nattest: activate the rsa2048 challenge: attest: the TPM failed: TPM_RC_RETRY\n" +
		"attest: try 2 failed\nattest: activate the rsa2048 challenge: attest: the TPM failed: TPM_RC_RETRY\n" +
		"attest: PASSED\n"
	if console != want {
		t.Errorf("console:\n%s\nwant:\n%s", console, want)
	}
	res, console, err = f.run(t, &failingTPM{TPM: tpm, fails: 100}, "S1", nil)
	if !errors.Is(err, attest.ErrNoVerdict) || !errors.Is(err, attest.ErrTPM) {
		t.Fatalf("Run with a dead TPM: %v, want ErrNoVerdict wrapping ErrTPM", err)
	}
	if !strings.Contains(console, "attest: try 5 failed\n") {
		t.Errorf("console %q", console)
	}
}

// Run refuses what checkRun refuses (TestCheckRun), before any request.
func TestRunRefusesBadMachine(t *testing.T) {
	if _, err := attest.Run(context.Background(), "https://127.0.0.1:1", quickTPM(t, 0), attest.Machine{Serial: "S1\x00", MAC: testMAC}, nil); !errors.Is(err, attest.ErrBadMachine) {
		t.Errorf("bad serial: %v, want ErrBadMachine", err)
	}
	if _, err := attest.Run(context.Background(), "http://fleetd/attest", quickTPM(t, 0), attest.Machine{Serial: "S1", MAC: testMAC}, nil); !errors.Is(err, attest.ErrBadURL) {
		t.Errorf("an http URL: %v, want ErrBadURL", err)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var console bytes.Buffer
	_, err := attest.Run(ctx, "https://127.0.0.1:1/attest", quickTPM(t, 0), attest.Machine{Serial: "S1", MAC: testMAC}, &attest.ClientConfig{
		Console: &console,
		Backoff: func(int) time.Duration { cancel(); return time.Hour },
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
}

// Each outcome of an admission the server hands an attested claim: its
// install code, its reason to provision nothing, or the hook's failure,
// whose words stay out of the logs, the reason and the console. An
// admission another replica is deciding at this moment is decided on a
// later try: the client is told no verdict, with ReasonAdmitLater, tries
// again with a new session and gets the code; the audit says so for each
// try.
func TestAdmissionOutcomes(t *testing.T) {
	tpm := quickTPM(t, 0)
	later := ""
	for try := 1; try <= 2; try++ {
		later += fmt.Sprintf("attest: try %d failed\nattest: proof: fleetd answered 503: %s\n", try, attest.ReasonAdmitLater)
	}
	for _, tc := range []struct {
		name    string
		adm     attest.Admission
		err     error
		first   []error // the hook's errors on its first calls
		code    string
		reason  string
		console string
		hidden  string // the hook's words, which no log line, reason or console holds
	}{
		{name: "code", adm: attest.Admission{InstallCode: "c0de-secret"}, code: "c0de-secret", reason: "install code issued", console: "attest: PASSED\n"},
		{name: "no provision", adm: attest.Admission{NoProvision: "control plane"}, reason: "no provision: control plane",
			console: "attest: PASSED\nattest: no provision: control plane\n"},
		{name: "hook error", err: errors.New("create node-7's bootstrap token: Unauthorized token=abcdef.0123456789abcdef"),
			reason: attest.ReasonAdmissionFailed, console: "attest: PASSED\nattest: " + attest.ReasonAdmissionFailed + "\n", hidden: "Unauthorized"},
		{name: "admit later", adm: attest.Admission{InstallCode: "c0de-secret"},
			first: []error{fmt.Errorf("%w: run provision-w-01-7 is starting elsewhere", attest.ErrAdmitLater), fmt.Errorf("%w: still starting", attest.ErrAdmitLater)},
			code:  "c0de-secret", reason: "install code issued", console: later + "attest: PASSED\n", hidden: "elsewhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleetFor(t, nil, tpm)
			f.hook.adm, f.hook.err, f.hook.first = tc.adm, tc.err, tc.first
			res, console, err := f.run(t, tpm, "S1", nil)
			if err != nil {
				t.Fatal(err)
			}
			tries := len(tc.first) + 1
			if res.Verdict != attest.Attested || res.InstallCode != tc.code || res.Reason != tc.reason || res.Tries != tries {
				t.Errorf("result %+v, want code %q reason %q on try %d", res, tc.code, tc.reason, tries)
			}
			if console != tc.console {
				t.Errorf("console %q, want %q", console, tc.console)
			}
			if n := len(f.hook.calls()); n != tries {
				t.Errorf("the admission hook was called %d times, want %d", n, tries)
			}
			if got := strings.Count(f.logs.String(), attest.ReasonAdmitLater); got != len(tc.first) {
				t.Errorf("%d audit lines say %q, want %d:\n%s", got, attest.ReasonAdmitLater, len(tc.first), f.logs.String())
			}
			if tc.hidden != "" && (strings.Contains(f.logs.String(), tc.hidden) || strings.Contains(res.Reason, tc.hidden) || strings.Contains(console, tc.hidden)) {
				t.Error("the hook's error leaked")
			}
		})
	}
}

// recorder keeps every request and answer body a client sends and gets.
type recorder struct {
	rt     http.RoundTripper
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(b))
		r.add(b)
	}
	rsp, err := r.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(rsp.Body)
	rsp.Body = io.NopCloser(bytes.NewReader(b))
	r.add(b)
	return rsp, nil
}

func (r *recorder) add(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, b)
}

// No secret ever appears in a log line: not the activation secrets, the
// sealed session, the sealing key, the install code, nor the hook's error.
func TestNoSecretInLogs(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a, 0xa5}, 16)
	f, tpm := approvedFleet(t, &attest.Config{SealingKey: key, Spent: &sharedSpent{}})
	rec := &recorder{rt: f.ts.Client().Transport}
	f.ts.Client().Transport = rec
	res, _, err := f.run(t, tpm, "S1", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.hook.err = errors.New("bootstrap token abcdef.0123456789abcdef refused")
	if _, _, err := f.run(t, tpm, "S1", nil); err != nil {
		t.Fatal(err)
	}
	// A replay and a wrong proof, logged as refusals.
	ch := f.challenge(t, tpm, "S1")
	p := activate(t, tpm, ch)
	f.prove(t, p)
	f.prove(t, p)
	p.Secrets[0].Secret = bytes.Repeat([]byte{1}, 32)
	f.prove(t, p)

	var secrets []string
	add := func(b []byte) {
		secrets = append(secrets, base64.StdEncoding.EncodeToString(b), hex.EncodeToString(b))
	}
	add(key)
	secrets = append(secrets, res.InstallCode, "abcdef.0123456789abcdef", "code-Zq81-secret")
	rec.mu.Lock()
	for _, b := range rec.bodies {
		var ch wireChallenge
		if json.Unmarshal(b, &ch) == nil && len(ch.Session) > 0 {
			add(ch.Session)
		}
		var pr wireProof
		if json.Unmarshal(b, &pr) == nil {
			for _, s := range pr.Secrets {
				add(s.Secret)
			}
		}
	}
	rec.mu.Unlock()
	for _, s := range p.Secrets {
		add(s.Secret)
	}
	add(p.Session)
	logs := f.logs.String()
	if len(f.logs.Lines("attest.verdict")) != 3 || len(f.logs.Lines("attest.refused")) != 2 {
		t.Fatalf("unexpected log lines:\n%s", logs)
	}
	if len(secrets) < 14 {
		t.Fatalf("only %d secrets gathered", len(secrets))
	}
	for _, s := range secrets {
		if s == "" {
			t.Fatal("an empty secret")
		}
		if strings.Contains(logs, s) || len(s) > 24 && strings.Contains(logs, s[:24]) {
			t.Errorf("the logs hold the secret %q", s)
		}
	}
}

func TestReadSerial(t *testing.T) {
	for name, tc := range map[string]struct {
		fs   fstest.MapFS
		want string
		err  error
	}{
		"serial":        {fs: fstest.MapFS{"product_serial": {Data: []byte("FLK-0001\n")}}, want: "FLK-0001"},
		"spaces inside": {fs: fstest.MapFS{"product_serial": {Data: []byte("  ABC 123  \n")}}, want: "ABC 123"},
		"missing":       {fs: fstest.MapFS{"board_serial": {Data: []byte("B1\n")}}, err: attest.ErrNoSerial},
		"empty":         {fs: fstest.MapFS{"product_serial": {Data: []byte("\n")}}, err: attest.ErrNoSerial},
		"placeholder":   {fs: fstest.MapFS{"product_serial": {Data: []byte("To Be Filled By O.E.M.\n")}}, err: attest.ErrNoSerial},
		"default":       {fs: fstest.MapFS{"product_serial": {Data: []byte("Default string\n")}}, err: attest.ErrNoSerial},
		"binary":        {fs: fstest.MapFS{"product_serial": {Data: []byte("AB\xffCD")}}, err: attest.ErrNoSerial},
		"too long":      {fs: fstest.MapFS{"product_serial": {Data: bytes.Repeat([]byte("A"), 200)}}, err: attest.ErrNoSerial},
	} {
		got, err := attest.ReadSerial(tc.fs)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: ReadSerial = %q, %v; want %q, %v", name, got, err, tc.want, tc.err)
		}
	}
}
