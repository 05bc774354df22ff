package attest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/attest"
)

// The runbook: "The console says attest: FAILED and the agent starts at
// once | fleetd refused the machine | Read the attest.verdict audit line".
// A binding source that cannot name one binding (two devices hold the
// serial) refuses the claim with its reason: the console says so once, the
// client does not try again, and the audit line carries the cause.
func TestBindingErrorRefusesClaim(t *testing.T) {
	const reason = `NetBox holds more than one device with serial "S1"`
	cause := errors.New(`netbox: devices w-01 (id 3) and w-02 (id 7) both have serial "S1"`)
	// The source may wrap its BindingError.
	f := newFleet(t, nil)
	f.bindings.SetError(fmt.Errorf("binding of S1: %w", &attest.BindingError{Reason: reason, Err: cause}))
	res, console, err := f.run(t, quickTPM(t, 0), "S1", nil)
	checkRefused(t, f, res, console, err, reason)
	if errors.Is(err, attest.ErrNoVerdict) || !strings.Contains(err.Error(), reason) {
		t.Errorf("Run's error %q, want ErrRefused alone, with the reason %q", err, reason)
	}
	if n, judged := f.bindings.Calls(), len(f.judgements()); n != 1 || judged != 0 {
		t.Errorf("%d binding reads, %d judgements; want one read, and no judgement", n, judged)
	}
	line := f.logs.Lines("attest.verdict")[0]
	for _, want := range []string{"serial=S1", `error="` + strings.ReplaceAll(cause.Error(), `"`, `\"`) + `"`, "peer=127.0.0.1:"} {
		if !strings.Contains(line, want) {
			t.Errorf("attest.verdict line %q lacks %s", line, want)
		}
	}
	if refused := f.logs.Lines("attest.refused"); len(refused) != 0 {
		t.Errorf("attest.refused lines %q for a claim audited as attest.verdict", refused)
	}
}

// A binding source's other errors are answered without their words, and
// logged with them: 503 (tried again) when the source did not answer, 500
// (tried again) when it failed otherwise; once the source answers, the
// machine passes.
func TestBindingSourceErrorsLogged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		answer string
	}{
		{"did not answer", fmt.Errorf("%w: netbox did not answer: GET /api/dcim/devices/: 502 Bad Gateway", attest.ErrBindingUnavailable), 503, "the binding source did not answer"},
		{"failed", errors.New("netbox: GET /api/dcim/devices/: answered 400: role: unknown choice"), 500, "the binding could not be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, tpm := approvedFleet(t, nil)
			f.bindings.SetError(tc.err)
			res, console, err := f.run(t, tpm, "S1", nil)
			backoffs := f.backoffs.Load()
			if !errors.Is(err, attest.ErrNoVerdict) || errors.Is(err, attest.ErrRefused) || res.Tries != attest.DefaultTries || backoffs != attest.DefaultTries-1 {
				t.Fatalf("Run: %+v %v after %d backoffs, want no verdict after %d tries", res, err, backoffs, attest.DefaultTries)
			}
			wantTry := fmt.Sprintf("attest: try 1 failed\nattest: claim: fleetd answered %d: %s\n", tc.status, tc.answer)
			if !strings.HasPrefix(console, wantTry) || strings.Contains(console, "netbox") {
				t.Errorf("console:\n%s\nwant it to start:\n%s", console, wantTry)
			}
			refused := f.logs.Lines("attest.refused")
			if len(refused) != attest.DefaultTries {
				t.Fatalf("attest.refused lines: %q, want %d", refused, attest.DefaultTries)
			}
			for _, want := range []string{"serial=S1", fmt.Sprintf("status=%d", tc.status), `reason="` + tc.answer + `"`, `error="` + strings.ReplaceAll(tc.err.Error(), `"`, `\"`) + `"`} {
				if !strings.Contains(refused[0], want) {
					t.Errorf("attest.refused line %q lacks %s", refused[0], want)
				}
			}
			if v := f.logs.Lines("attest.verdict"); len(v) != 0 {
				t.Errorf("attest.verdict lines %q for a claim tried again", v)
			}
			f.bindings.SetError(nil)
			if res, console, err := f.run(t, tpm, "S1", nil); err != nil || res.Verdict != attest.Attested || console != "attest: PASSED\n" {
				t.Errorf("once the source answers: %+v %v\n%s", res, err, console)
			}
		})
	}
}
