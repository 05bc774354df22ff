package tinktest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/fleetkit/fleet/internal/repotest"
	"github.com/fleetkit/fleet/internal/testproc"
)

// stopTimeout is how long tinkerbell has to exit after SIGTERM before it is
// killed.
const stopTimeout = 10 * time.Second

// keepLog copies the whole log at path out of the test's temporary directory,
// which the test's end removes, and returns where it went, with the lines
// of Rufio and tink-controller that report an error or a failure (at most
// 60): what a failed test needs to tell Tinkerbell's own failure from
// fleet's.
func keepLog(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	var b strings.Builder
	if f, err := os.CreateTemp("", "tinkerbell-log-*.json"); err == nil {
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil && cerr == nil {
			fmt.Fprintf(&b, "its whole log is kept at %s", f.Name())
		}
	}
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if n == 60 {
			b.WriteString("\n(more)")
			break
		}
		controller := strings.Contains(l, `"logger":"rufio"`) || strings.Contains(l, `"logger":"tink-controller"`)
		if controller && (strings.Contains(l, `"error"`) || strings.Contains(l, "failed") || strings.Contains(l, "Failed")) {
			b.WriteString("\n" + repotest.Tail(l, 600))
			n++
		}
	}
	if n == 0 {
		b.WriteString("\nno line of Rufio or tink-controller reports an error")
	}
	return b.String()
}

// waitReady waits (Process.WaitReady) until tinkerbell's HTTP server
// answers 200 at healthURL and its gRPC port accepts a connection at
// grpcAddr: tinkerbell serves both only after its CRD migration.
func waitReady(ctx context.Context, p *testproc.Process, stall time.Duration, healthURL, grpcAddr string) error {
	health := testproc.HTTPReady(&http.Client{Timeout: 2 * time.Second}, healthURL, "")
	var dialer net.Dialer
	return p.WaitReady(ctx, stall, func(ctx context.Context) error {
		if err := health(ctx); err != nil {
			return err
		}
		conn, err := dialer.DialContext(ctx, "tcp", grpcAddr)
		if err != nil {
			return fmt.Errorf("tink-server's gRPC port: %w", err)
		}
		return conn.Close()
	})
}
