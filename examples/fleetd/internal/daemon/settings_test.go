package daemon

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetkit/fleet/configserve"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// baseSettings are the settings fleetd requires, each set.
func baseSettings() map[string]string {
	return map[string]string{
		"FLEET_TLS_CERT": "c.pem", "FLEET_TLS_KEY": "k.pem", "FLEET_PUBLIC_URL": "https://fleetd.example:8443",
		"FLEET_SECRETS_BUNDLE": "secrets.yaml", "FLEET_NODES": "nodes.yaml",
		"NETBOX_URL": "https://netbox.example", "NETBOX_TOKEN": "t",
	}
}

// readWith reads baseSettings with set's settings over them.
func readWith(set map[string]string) (Settings, error) {
	m := baseSettings()
	maps.Copy(m, set)
	return readSettings(env(m))
}

// wantErrs fails t unless err holds each of wants.
func wantErrs(t *testing.T, err error, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}

func TestReadSettings(t *testing.T) {
	s, err := readWith(map[string]string{"FLEET_PUBLIC_URL": "https://fleetd.example:8443/", "FLEET_CONFIG_TTL": "2h"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Listen != ":8443" || s.MetricsListen != ":9464" || s.ConfigTTL != 2*time.Hour || !s.AutoProvision || s.ControlPlanes || s.PublicURL != "https://fleetd.example:8443" || s.Namespace != "tinkerbell" {
		t.Errorf("settings = %+v", s)
	}
	_, err = readSettings(env(map[string]string{
		"FLEET_PUBLIC_URL": "http://fleetd", "FLEET_CONFIG_TTL": "soon", "FLEET_CONTROL_PLANES": "maybe",
		"FLEET_SEALING_KEY": "abc", "FLEET_APPROVER_TOKEN": "short",
	}))
	wantErrs(t, err,
		"FLEET_TLS_CERT is required", "FLEET_TLS_KEY is required", "FLEET_SECRETS_BUNDLE is required",
		"FLEET_NODES is required", "NETBOX_URL is required", "NETBOX_TOKEN is required",
		`FLEET_PUBLIC_URL="http://fleetd" is not an https URL`, `FLEET_CONFIG_TTL="soon"`,
		`FLEET_CONTROL_PLANES="maybe" is not true or false`, "FLEET_SEALING_KEY is refused",
		"FLEET_APPROVER_TOKEN is shorter than 16 characters")
}

// Workers provision at their first attestation unless the operator turns
// it off; control planes never do without FLEET_CONTROL_PLANES.
func TestReadSettingsAutoProvision(t *testing.T) {
	for v, want := range map[string]bool{"": true, "true": true, "false": false} {
		s, err := readWith(map[string]string{"FLEET_AUTO_PROVISION": v})
		if err != nil {
			t.Fatal(err)
		}
		if s.AutoProvision != want || s.ControlPlanes {
			t.Errorf("FLEET_AUTO_PROVISION=%q: AutoProvision %v, ControlPlanes %v; want %v, false", v, s.AutoProvision, s.ControlPlanes, want)
		}
	}
}

// Replicas: FLEET_REPLICA needs FLEET_PEERS naming it and a 32-byte
// FLEET_SEALING_KEY; FLEET_PEERS without FLEET_REPLICA is refused.
func TestReadSettingsReplicas(t *testing.T) {
	replica := map[string]string{
		"FLEET_REPLICA":     "fleetd-1",
		"FLEET_PEERS":       "fleetd-0=https://fleetd-0.fleetd-peers:8443, fleetd-1=https://fleetd-1.fleetd-peers:8443/",
		"FLEET_SEALING_KEY": strings.Repeat("ab", 32),
	}
	s, err := readWith(replica)
	if err != nil {
		t.Fatal(err)
	}
	want := []Peer{{"fleetd-0", "https://fleetd-0.fleetd-peers:8443"}, {"fleetd-1", "https://fleetd-1.fleetd-peers:8443"}}
	if s.Replica != "fleetd-1" || !slices.Equal(s.Peers, want) || len(s.SealingKey) != 32 || s.SealingKey[0] != 0xab || s.PeersListen != ":8444" {
		t.Errorf("replica settings: %q %v %x, peers' API at %q", s.Replica, s.Peers, s.SealingKey, s.PeersListen)
	}
	replica["FLEET_PEERS_LISTEN"] = "10.1.2.3:9444"
	if s, err := readWith(replica); err != nil || s.PeersListen != "10.1.2.3:9444" {
		t.Errorf("FLEET_PEERS_LISTEN=10.1.2.3:9444: %q, %v", s.PeersListen, err)
	}
	for _, c := range []struct {
		name, value, want string
	}{
		{"FLEET_PEERS", "", "FLEET_PEERS is required with FLEET_REPLICA"},
		{"FLEET_PEERS", "fleetd-0=https://fleetd-0:8443", "FLEET_PEERS does not name this replica, fleetd-1"},
		{"FLEET_PEERS", "fleetd-1=http://fleetd-1:8443", `"fleetd-1=http://fleetd-1:8443" is not NAME=URL`},
		{"FLEET_PEERS", "fleetd-1=https://a:1,fleetd-1=https://b:1", "names replica fleetd-1 twice"},
		{"FLEET_SEALING_KEY", "", "FLEET_SEALING_KEY must be 64 hex characters"},
		{"FLEET_SEALING_KEY", strings.Repeat("ab", 16), "FLEET_SEALING_KEY must be 64 hex characters"},
		{"FLEET_REPLICA", "", "FLEET_PEERS is refused without FLEET_REPLICA"},
		{"FLEET_REPLICA", "", "FLEET_PEERS_LISTEN is refused without FLEET_REPLICA"},
		// A valid key is refused as well without FLEET_REPLICA: one fleetd has
		// no shared record of spent sessions for others that share the key.
		{"FLEET_REPLICA", "", "FLEET_SEALING_KEY is refused"},
	} {
		m := maps.Clone(replica)
		m[c.name] = c.value
		if _, err := readWith(m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%q: %v, want %q", c.name, c.value, err, c.want)
		}
	}
}

// The run and config service timings are the operator's: unset, they are
// configserve's and provision's defaults; set, they must be positive
// durations, and a bad one is named.
func TestReadSettingsTimings(t *testing.T) {
	s, err := readWith(nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.PollInterval != 15*time.Second || s.RunTimeout != 2*time.Hour || s.ConfigWriteTimeout != configserve.DefaultWriteTimeout || s.MaxAdmissions != 16 {
		t.Errorf("defaults: poll %v, run timeout %v, config write timeout %v, admissions %d; want 15s, 2h, %v, 16",
			s.PollInterval, s.RunTimeout, s.ConfigWriteTimeout, s.MaxAdmissions, configserve.DefaultWriteTimeout)
	}
	timings := func(poll, run, write, admissions string) map[string]string {
		return map[string]string{"FLEET_POLL_INTERVAL": poll, "FLEET_RUN_TIMEOUT": run, "FLEET_CONFIG_WRITE_TIMEOUT": write, "FLEET_MAX_ADMISSIONS": admissions}
	}
	if s, err = readWith(timings("5s", "90m", "1m", "4")); err != nil {
		t.Fatal(err)
	}
	if s.PollInterval != 5*time.Second || s.RunTimeout != 90*time.Minute || s.ConfigWriteTimeout != time.Minute || s.MaxAdmissions != 4 {
		t.Errorf("set: poll %v, run timeout %v, config write timeout %v, admissions %d; want 5s, 1h30m, 1m, 4", s.PollInterval, s.RunTimeout, s.ConfigWriteTimeout, s.MaxAdmissions)
	}
	_, err = readWith(timings("0s", "-1h", "soon", "0"))
	wantErrs(t, err,
		`FLEET_POLL_INTERVAL="0s" is not a positive duration such as 15s`,
		`FLEET_RUN_TIMEOUT="-1h" is not a positive duration such as 2h`,
		`FLEET_CONFIG_WRITE_TIMEOUT="soon" is not a positive duration such as 30s`,
		`FLEET_MAX_ADMISSIONS="0" is not a positive number`)
}

func TestRunUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"-help"}, env(nil), &out, &errb); code != 0 || !strings.Contains(errb.String(), "FLEET_CONFIG_TTL") {
		t.Errorf("-help: exit %d, %q", code, errb.String())
	}
	for _, name := range []string{"FLEET_POLL_INTERVAL", "FLEET_RUN_TIMEOUT", "FLEET_CONFIG_WRITE_TIMEOUT", "FLEET_MAX_ADMISSIONS",
		"NETBOX_TOKEN_FILE", "FLEET_APPROVER_TOKEN_FILE", "FLEET_SEALING_KEY_FILE", "CREDENTIALS_DIRECTORY"} {
		if !strings.Contains(errb.String(), name) {
			t.Errorf("-help does not list %s", name)
		}
	}
	errb.Reset()
	if code := Main(context.Background(), nil, env(nil), &out, &errb); code != 2 || !strings.Contains(errb.String(), "NETBOX_URL is required") {
		t.Errorf("no settings: exit %d, %q", code, errb.String())
	}
	if code := Main(context.Background(), []string{"extra"}, env(nil), &out, &errb); code != 2 {
		t.Errorf("an argument: exit %d", code)
	}
}
