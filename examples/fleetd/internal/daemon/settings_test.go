package daemon

import (
	"bytes"
	"context"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetkit/fleet/configserve"
	"github.com/fleetkit/fleet/examples/templates"
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

// Unset (or set to "", which is one to fleetd: its getenv answers "" for
// both), each setting is its default: workers provision at their first
// attestation unless the operator turns it off, control planes never do
// without FLEET_CONTROL_PLANES; the timings are configserve's and
// provision's; the action images are the released ones (none set), and
// the BMCs' Secret bmc-auth. Set, each is what it says. Every refusal is
// named in one error, and every required setting left unset.
func TestReadSettings(t *testing.T) {
	defaults := Settings{
		Listen: ":8443", MetricsListen: ":9464", TLSCert: "c.pem", TLSKey: "k.pem", PublicURL: "https://fleetd.example:8443",
		ReadTimeout: defaultReadTimeout, MaxConns: defaultMaxConns, MaxAdmissions: 16, ReadyWindow: time.Minute,
		ConfigTTL: time.Hour, ConfigWriteTimeout: configserve.DefaultWriteTimeout, PollInterval: 15 * time.Second, RunTimeout: 2 * time.Hour,
		AutoProvision: true, SecretsBundle: "secrets.yaml", NodesFile: "nodes.yaml", NetBoxURL: "https://netbox.example", NetBoxToken: "t",
		Namespace: "tinkerbell", BMCSecret: "bmc-auth",
	}
	images := templates.Images{
		WipeDisk: "registry.lab:5000/fleet/wipe-disk:v2", Install: "registry.lab:5000/fleet/install:v2",
		NextBoot: "registry.lab:5000/fleet/next-boot:v2", Reboot: "registry.lab:5000/waitdaemon:0.2.0",
	}
	for _, c := range []struct {
		set  map[string]string
		edit func(*Settings) // what set changes of the defaults
	}{
		{nil, func(*Settings) {}},
		{map[string]string{"FLEET_AUTO_PROVISION": "", "FLEET_READY_WINDOW": ""}, func(*Settings) {}},
		{map[string]string{"FLEET_AUTO_PROVISION": "true"}, func(*Settings) {}},
		{map[string]string{"FLEET_AUTO_PROVISION": "false", "FLEET_PUBLIC_URL": "https://fleetd.example:8443/", "FLEET_CONFIG_TTL": "2h", "FLEET_READY_WINDOW": "2s"},
			func(s *Settings) { s.AutoProvision, s.ConfigTTL, s.ReadyWindow = false, 2*time.Hour, 2*time.Second }},
		{map[string]string{"FLEET_POLL_INTERVAL": "5s", "FLEET_RUN_TIMEOUT": "90m", "FLEET_CONFIG_WRITE_TIMEOUT": "1m", "FLEET_MAX_ADMISSIONS": "4", "FLEET_READY_WINDOW": "5m"},
			func(s *Settings) {
				s.PollInterval, s.RunTimeout, s.ConfigWriteTimeout, s.MaxAdmissions, s.ReadyWindow = 5*time.Second, 90*time.Minute, time.Minute, 4, 5*time.Minute
			}},
		{map[string]string{
			"FLEET_IMAGE_WIPE_DISK": images.WipeDisk, "FLEET_IMAGE_INSTALL": images.Install,
			"FLEET_IMAGE_NEXT_BOOT": images.NextBoot, "FLEET_IMAGE_REBOOT": images.Reboot, "FLEET_BMC_SECRET": "bmc-lab",
		}, func(s *Settings) { s.Images, s.BMCSecret = images, "bmc-lab" }},
	} {
		want := defaults
		c.edit(&want)
		got, err := readWith(c.set)
		if diff := cmp.Diff(want, got); err != nil || diff != "" {
			t.Errorf("%v: %v; settings (-want +got):\n%s", c.set, err, diff)
		}
	}

	_, err := readSettings(env(map[string]string{
		"FLEET_PUBLIC_URL": "http://fleetd", "FLEET_CONFIG_TTL": "soon", "FLEET_CONTROL_PLANES": "maybe",
		"FLEET_SEALING_KEY": "abc", "FLEET_APPROVER_TOKEN": "short",
		"FLEET_POLL_INTERVAL": "0s", "FLEET_RUN_TIMEOUT": "-1h", "FLEET_CONFIG_WRITE_TIMEOUT": "soon", "FLEET_MAX_ADMISSIONS": "0",
		"FLEET_IMAGE_WIPE_DISK": "wipe disk", "FLEET_IMAGE_INSTALL": "registry.lab/{{ .install_disk }}:v1", "FLEET_BMC_SECRET": "BMC_Auth",
	}))
	wantErrs(t, err,
		"FLEET_TLS_CERT is required", "FLEET_TLS_KEY is required", "FLEET_SECRETS_BUNDLE is required",
		"FLEET_NODES is required", "NETBOX_URL is required", "NETBOX_TOKEN is required",
		`FLEET_PUBLIC_URL="http://fleetd" is not an https URL`, `FLEET_CONFIG_TTL="soon"`,
		`FLEET_CONTROL_PLANES="maybe" is not true or false`, "FLEET_SEALING_KEY is refused",
		"FLEET_APPROVER_TOKEN is shorter than 16 characters",
		`FLEET_POLL_INTERVAL="0s" is not a positive duration such as 15s`,
		`FLEET_RUN_TIMEOUT="-1h" is not a positive duration such as 2h`,
		`FLEET_CONFIG_WRITE_TIMEOUT="soon" is not a positive duration such as 30s`,
		`FLEET_MAX_ADMISSIONS="0" is not a positive number`,
		`FLEET_IMAGE_WIPE_DISK="wipe disk" is not an image reference`,
		`FLEET_IMAGE_INSTALL="registry.lab/{{ .install_disk }}:v1" is not an image reference`,
		`FLEET_BMC_SECRET="BMC_Auth" is not the name of a Secret`)
	// The readiness window is at least 1s.
	for _, v := range []string{"500ms", "0s", "-1m", "soon"} {
		_, err := readWith(map[string]string{"FLEET_READY_WINDOW": v})
		wantErrs(t, err, `FLEET_READY_WINDOW="`+v+`"`)
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

// -help names each image setting with its released default, in its entry:
// its line and the lines below it indented further.
func TestHelpNamesImageDefaults(t *testing.T) {
	im := templates.DefaultImages
	for name, def := range map[string]string{
		"FLEET_IMAGE_WIPE_DISK": im.WipeDisk, "FLEET_IMAGE_INSTALL": im.Install,
		"FLEET_IMAGE_NEXT_BOOT": im.NextBoot, "FLEET_IMAGE_REBOOT": im.Reboot,
		"FLEET_BMC_SECRET": "bmc-auth",
	} {
		if !regexp.MustCompile(`\n  ` + name + ` (?:[^\n]|\n    )*?\(default ` + regexp.QuoteMeta(def) + `[);]`).MatchString(envHelp) {
			t.Errorf("-help does not document %s with the default %s", name, def)
		}
	}
}
