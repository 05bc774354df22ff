package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Until calls cond until it holds, and returns nil. It calls cond once
// every limit/1000 (at least every 100 ms, at most every 5 ms) and gives
// up only when both limit has passed and cond has been called as many
// times as limit holds at that pace: on a loaded machine, where each call
// and each pause take longer, it waits longer rather than fail a test the
// machine only ran slowly. It returns an error that says how long and how
// many calls it waited when it gives up, or ctx's error when ctx ends
// first.
func Until(ctx context.Context, limit time.Duration, cond func() bool) error {
	pace := min(max(limit/1000, 5*time.Millisecond), 100*time.Millisecond)
	calls := int(limit / pace)
	start := time.Now()
	for n := 1; !cond(); n++ {
		if waited := time.Since(start); n >= calls && waited >= limit {
			return fmt.Errorf("not within %v (%d checks in %v)", limit, n, waited.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pace):
		}
	}
	return nil
}

// WaitFor waits with Until, for up to limit, until cond holds. When it
// does not, WaitFor ends t with a message that names what, the state
// waited for, e.g. "both devices active".
func WaitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := Until(t.Context(), limit, cond); err != nil {
		t.Fatalf("no %s: %v", what, err)
	}
}

// Context returns t's context, ended after d too: a bound on the calls of
// one test, which t's end also cancels.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
