package daemon

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestReadSettings(t *testing.T) {
	full := map[string]string{
		"FLEET_TLS_CERT": "c.pem", "FLEET_TLS_KEY": "k.pem", "FLEET_PUBLIC_URL": "https://fleetd.example:8443/",
		"FLEET_SECRETS_BUNDLE": "secrets.yaml", "FLEET_NODES": "nodes.yaml",
		"NETBOX_URL": "https://netbox.example", "NETBOX_TOKEN": "t",
		"FLEET_CONFIG_TTL": "2h",
	}
	s, err := readSettings(env(full))
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
	for _, want := range []string{
		"FLEET_TLS_CERT is required", "FLEET_TLS_KEY is required", "FLEET_SECRETS_BUNDLE is required",
		"FLEET_NODES is required", "NETBOX_URL is required", "NETBOX_TOKEN is required",
		`FLEET_PUBLIC_URL="http://fleetd" is not an https URL`, `FLEET_CONFIG_TTL="soon"`,
		`FLEET_CONTROL_PLANES="maybe" is not true or false`, "FLEET_SEALING_KEY is refused",
		"FLEET_APPROVER_TOKEN is shorter than 16 characters",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}

// Workers provision at their first attestation unless the operator turns
// it off; control planes never do without FLEET_CONTROL_PLANES.
func TestReadSettingsAutoProvision(t *testing.T) {
	base := map[string]string{
		"FLEET_TLS_CERT": "c.pem", "FLEET_TLS_KEY": "k.pem", "FLEET_PUBLIC_URL": "https://fleetd.example:8443",
		"FLEET_SECRETS_BUNDLE": "secrets.yaml", "FLEET_NODES": "nodes.yaml",
		"NETBOX_URL": "https://netbox.example", "NETBOX_TOKEN": "t",
	}
	for v, want := range map[string]bool{"": true, "true": true, "false": false} {
		m := maps.Clone(base)
		m["FLEET_AUTO_PROVISION"] = v
		s, err := readSettings(env(m))
		if err != nil {
			t.Fatal(err)
		}
		if s.AutoProvision != want || s.ControlPlanes {
			t.Errorf("FLEET_AUTO_PROVISION=%q: AutoProvision %v, ControlPlanes %v; want %v, false", v, s.AutoProvision, s.ControlPlanes, want)
		}
	}
	// A valid key is refused as well: fleetd has no shared record of spent
	// sessions for replicas that share it.
	m := maps.Clone(base)
	m["FLEET_SEALING_KEY"] = strings.Repeat("ab", 32)
	if _, err := readSettings(env(m)); err == nil || !strings.Contains(err.Error(), "FLEET_SEALING_KEY is refused") {
		t.Errorf("a 64-hex-character FLEET_SEALING_KEY: %v, want it refused", err)
	}
}

func TestRunUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"-help"}, env(nil), &out, &errb); code != 0 || !strings.Contains(errb.String(), "FLEET_CONFIG_TTL") {
		t.Errorf("-help: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := Main(context.Background(), nil, env(nil), &out, &errb); code != 2 || !strings.Contains(errb.String(), "NETBOX_URL is required") {
		t.Errorf("no settings: exit %d, %q", code, errb.String())
	}
	if code := Main(context.Background(), []string{"extra"}, env(nil), &out, &errb); code != 2 {
		t.Errorf("an argument: exit %d", code)
	}
}
