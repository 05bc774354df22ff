package inventory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetkit/fleet/inventory/netboxtest"
)

// operations calls every client operation once; each returns its error.
func operations(nb *NetBox, id int64, inv *Inventory) map[string]func(context.Context) error {
	mac, _ := net.ParseMAC("58:47:ca:71:0a:01")
	return map[string]func(context.Context) error{
		"DeviceBySerial": func(ctx context.Context) error { _, err := nb.DeviceBySerial(ctx, "MS01-0002"); return err },
		"Device":         func(ctx context.Context) error { _, err := nb.Device(ctx, id); return err },
		"Devices":        func(ctx context.Context) error { _, err := nb.Devices(ctx); return err },
		"DevicesWithDesiredAction": func(ctx context.Context) error {
			_, err := nb.DevicesWithDesiredAction(ctx)
			return err
		},
		"RecordAttestation": func(ctx context.Context) error {
			return nb.RecordAttestation(ctx, id, Attestation{MAC: mac, EKHash: hashC, Verdict: "attested", At: time.Now()})
		},
		"SetStatus":        func(ctx context.Context) error { return nb.SetStatus(ctx, id, StatusActive) },
		"SetDesiredAction": func(ctx context.Context) error { return nb.SetDesiredAction(ctx, id, DesiredActionProvision) },
		"SetLastRun":       func(ctx context.Context) error { return nb.SetLastRun(ctx, id, "provision-w-01-1") },
		"Journal":          func(ctx context.Context) error { return nb.Journal(ctx, id, JournalInfo, "hello") },
		"BindingBySerial":  func(ctx context.Context) error { _, err := nb.BindingBySerial(ctx, "MS01-0002"); return err },
		"BindingAuthored": func(ctx context.Context) error {
			_, err := nb.BindingAuthored(ctx, Device{ID: id, ApprovedEKHash: hashC})
			return err
		},
		"Plan": func(ctx context.Context) error { _, err := nb.Plan(ctx, inv); return err },
	}
}

// Every operation is ErrUnavailable when NetBox fails, within its timeout,
// and ErrRefusedToken for a token NetBox refuses. The client logs each
// request, and never the token: neither a log line nor an error shows it.
func TestFaults(t *testing.T) {
	srv, _, devs := appliedFleet(t)
	inv := parseNodes(t, fleetNodes)
	const timeout = 150 * time.Millisecond
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	nb := client(t, srv, userFleetd, &NetBoxConfig{Site: "folly", Switch: "usw", BindingAuthor: userTerraform, Timeout: timeout, Logger: logger})
	id := devs["w-01"].ID
	// other is a client of url with token, logging to the same log.
	other := func(url, token string) *NetBox {
		nb, err := NewNetBox(url, token, &NetBoxConfig{Site: "folly", Switch: "usw", BindingAuthor: userTerraform, Timeout: timeout, Logger: logger})
		noErr(t, err)
		return nb
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	noErr(t, err)
	nothing := "http://" + l.Addr().String()
	l.Close()
	for _, c := range []struct {
		name  string
		fault netboxtest.Fault
		nb    *NetBox
		want  error
	}{
		{"down", netboxtest.Fault{Kind: netboxtest.Down}, nb, ErrUnavailable},
		{"slow", netboxtest.Fault{Kind: netboxtest.Slow, Delay: time.Minute}, nb, ErrUnavailable},
		{"503", netboxtest.Fault{Kind: netboxtest.Failing}, nb, ErrUnavailable},
		{"500", netboxtest.Fault{Kind: netboxtest.Failing, Status: 500}, nb, ErrUnavailable},
		{"cut mid-answer", netboxtest.Fault{Kind: netboxtest.Cut}, nb, ErrUnavailable},
		{"refused token", netboxtest.Fault{}, other(srv.URL, refusedToken), ErrRefusedToken},
		{"nothing listening", netboxtest.Fault{}, other(nothing, "t"), ErrUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			for name, op := range operations(c.nb, id, inv) {
				srv.Inject(c.fault)
				start := time.Now()
				err := op(t.Context())
				took := time.Since(start)
				srv.Inject(netboxtest.Fault{})
				if !errors.Is(err, c.want) || strings.Contains(err.Error(), srv.Token(userFleetd)) || strings.Contains(err.Error(), refusedToken) {
					t.Errorf("%s: %v, want %v, not showing the token", name, err, c.want)
				}
				// One request's timeout, and a margin for a loaded machine.
				if took > timeout+2*time.Second {
					t.Errorf("%s took %v with NetBox %s; the timeout is %v", name, took, c.name, timeout)
				}
			}
		})
	}
	for _, tok := range []string{srv.Token(userFleetd), refusedToken} {
		if strings.Contains(log.String(), tok) {
			t.Errorf("the log shows a token")
		}
	}
	if n := strings.Count(log.String(), "netbox request"); n < 20 {
		t.Errorf("%d requests logged:\n%s", n, log.String())
	}
	t.Run("caller's deadline", func(t *testing.T) {
		srv.Inject(netboxtest.Fault{Kind: netboxtest.Slow, Delay: time.Minute})
		defer srv.Inject(netboxtest.Fault{})
		slow := client(t, srv, userFleetd, &NetBoxConfig{Timeout: time.Hour})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if _, err := slow.Devices(ctx); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Devices past the caller's deadline: %v, want ErrUnavailable and DeadlineExceeded", err)
		}
	})
}

// refusedToken is a token NetBox has given no user.
const refusedToken = "0123456789abcdef0123456789abcdef01234567"

// fleetState describes what NetBox holds of fleet's nodes, by name, so
// that two NetBoxes can be compared whatever IDs they gave.
func fleetState(t *testing.T, srv *netboxtest.Server) []string {
	t.Helper()
	nb := client(t, srv, userAlice, nil)
	devs, err := nb.Devices(t.Context())
	noErr(t, err)
	var out []string
	for _, d := range devs {
		out = append(out, fmt.Sprintf("device %s serial=%s status=%s model=%s class=%s bmc=%s disk=%s/%s ek=%s/%s address=%s port=%d mac=%s",
			d.Name, d.Serial, d.Status, d.Model, d.Class, d.BMC, d.InstallDisk, d.InstallDiskSerial, d.ApprovedEKHash, d.ApprovedEKHashECC, d.Address, d.SwitchPort, d.MAC))
	}
	for _, uri := range []string{
		"/api/dcim/devices/", "/api/dcim/interfaces/", "/api/ipam/ip-addresses/",
		"/api/dcim/cables/", "/api/dcim/mac-addresses/", "/api/extras/custom-fields/",
		"/api/dcim/device-types/", "/api/dcim/manufacturers/", "/api/dcim/device-roles/",
	} {
		out = append(out, fmt.Sprintf("%s=%d", path.Base(uri), listed(t, srv, uri)))
	}
	slices.Sort(out)
	return out
}

// An apply that NetBox stops at any request leaves nothing a re-run does
// not finish: after the re-run NetBox holds what one clean apply makes.
func TestApplyInterrupted(t *testing.T) {
	inv := parseNodes(t, fleetNodes)
	clean := fleetNetBox(t, true)
	nb := client(t, clean, userTerraform, interruptedConfig)
	clean.ResetRequests()
	applied(t, nb, inv)
	total := clean.RequestCount()
	want := fleetState(t, clean)
	if total < 10 {
		t.Fatalf("a clean plan and apply made only %d requests", total)
	}
	// Failing stops a request before NetBox processes it (as Down does);
	// Cut after, losing only the answer.
	for _, kind := range []netboxtest.FaultKind{netboxtest.Failing, netboxtest.Cut} {
		t.Run(map[netboxtest.FaultKind]string{netboxtest.Failing: "503", netboxtest.Cut: "cut"}[kind], func(t *testing.T) {
			t.Parallel()
			applyInterrupted(t, inv, kind, total, want)
		})
	}
}

// applyInterrupted stops a plan and apply at each of its total requests
// with the fault kind, re-runs it, and compares NetBox with want.
func applyInterrupted(t *testing.T, inv *Inventory, kind netboxtest.FaultKind, total int, want []string) {
	for after := range total {
		srv := fleetNetBox(t, true)
		nb := client(t, srv, userTerraform, interruptedConfig)
		srv.Inject(netboxtest.Fault{Kind: kind, After: after})
		p, err := nb.Plan(t.Context(), inv)
		if err == nil {
			err = nb.Apply(t.Context(), p)
		}
		srv.Inject(netboxtest.Fault{})
		if err == nil {
			t.Fatalf("fault %d after %d of %d requests: no error", kind, after, total)
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("fault %d after %d requests: %v, want ErrUnavailable", kind, after, err)
		}
		p, err = nb.Plan(t.Context(), inv)
		if err != nil {
			t.Fatalf("fault %d after %d requests: the re-run's plan: %v", kind, after, err)
		}
		if err := nb.Apply(t.Context(), p); err != nil {
			t.Fatalf("fault %d after %d requests: the re-run: %v\n%s", kind, after, err, p)
		}
		if diff := cmp.Diff(want, fleetState(t, srv)); diff != "" {
			t.Errorf("fault %d after %d requests: after the re-run (-clean +got):\n%s", kind, after, diff)
		}
		if p, err := nb.Plan(t.Context(), inv); err != nil || !p.Empty() {
			t.Errorf("fault %d after %d requests: a third plan is not empty: %v\n%s", kind, after, err, p)
		}
		srv.Close()
	}
}

// interruptedConfig writes two objects a request, so that a fault can stop
// Apply between the requests of one step too.
var interruptedConfig = &NetBoxConfig{Site: "folly", Switch: "usw", BindingAuthor: userTerraform, BulkSize: 2}

// A plan against a NetBox that answers slowly ends with ErrUnavailable and
// writes nothing the next apply does not finish.
func TestApplySlow(t *testing.T) {
	inv := parseNodes(t, fleetNodes)
	srv := fleetNetBox(t, true)
	nb := client(t, srv, userTerraform, &NetBoxConfig{Site: "folly", Switch: "usw", Timeout: 200 * time.Millisecond})
	p, err := nb.Plan(t.Context(), inv)
	noErr(t, err)
	srv.Inject(netboxtest.Fault{Kind: netboxtest.Slow, Delay: time.Minute, After: 3})
	start := time.Now()
	err = nb.Apply(t.Context(), p)
	srv.Inject(netboxtest.Fault{})
	if !errors.Is(err, ErrUnavailable) || time.Since(start) > 3*time.Second {
		t.Fatalf("Apply against a slow NetBox: %v after %v", err, time.Since(start))
	}
	if err := nb.Apply(t.Context(), p); err == nil || !strings.Contains(err.Error(), "applied already") {
		t.Errorf("a plan applied twice: %v", err)
	}
	applied(t, nb, inv)
	if p, err := nb.Plan(t.Context(), inv); err != nil || !p.Empty() {
		t.Errorf("after the re-run: %v\n%s", err, p)
	}
}
