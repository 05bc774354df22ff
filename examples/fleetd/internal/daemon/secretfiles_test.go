package daemon

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each secret setting may come from a file its _FILE form names, relative
// to $CREDENTIALS_DIRECTORY as systemd's LoadCredential= sets it, read by
// secretenv (TestLookup refuses the file itself), checked as the setting.
func TestReadSettingsSecretFiles(t *testing.T) {
	creds := t.TempDir()
	key := strings.Repeat("ab", 32)
	for name, content := range map[string]string{
		"netbox-token": "nb-token\n", "approver-token": "approver-token-0123456789\n", "sealing-key": key + "\n",
		"short": "short\n",
	} {
		if err := os.WriteFile(filepath.Join(creds, name), []byte(content), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	base := baseSettings()
	delete(base, "NETBOX_TOKEN")
	maps.Copy(base, map[string]string{
		"CREDENTIALS_DIRECTORY":     creds,
		"NETBOX_TOKEN_FILE":         "netbox-token",
		"FLEET_APPROVER_TOKEN_FILE": "approver-token",
		"FLEET_SEALING_KEY_FILE":    filepath.Join(creds, "sealing-key"),
		"FLEET_REPLICA":             "fleetd-0",
		"FLEET_PEERS":               "fleetd-0=https://fleetd-0:8444",
	})
	s, err := readSettings(env(base))
	if err != nil {
		t.Fatal(err)
	}
	if s.NetBoxToken != "nb-token" || s.ApproverToken != "approver-token-0123456789" || len(s.SealingKey) != 32 || s.SealingKey[0] != 0xab {
		t.Errorf("from files: NetBox token %q, approver token %q, sealing key %x", s.NetBoxToken, s.ApproverToken, s.SealingKey)
	}

	for _, c := range []struct {
		name string
		set  map[string]string
		want []string
	}{
		{"both forms", map[string]string{"NETBOX_TOKEN": "nb-token"},
			[]string{"NETBOX_TOKEN and NETBOX_TOKEN_FILE: a setting and its _FILE form are both set; unset one"}},
		{"both forms of the sealing key", map[string]string{"FLEET_SEALING_KEY": key},
			[]string{"FLEET_SEALING_KEY and FLEET_SEALING_KEY_FILE: a setting and its _FILE form are both set"}},
		{"neither form", map[string]string{"NETBOX_TOKEN_FILE": ""},
			[]string{"NETBOX_TOKEN is required (or NETBOX_TOKEN_FILE, a file that holds it)"}},
		{"a short approver token", map[string]string{"FLEET_APPROVER_TOKEN_FILE": "short"},
			[]string{"FLEET_APPROVER_TOKEN_FILE is shorter than 16 characters"}},
		{"a bad sealing key", map[string]string{"FLEET_SEALING_KEY_FILE": "short"},
			[]string{"FLEET_SEALING_KEY_FILE must be 64 hex characters"}},
		{"a sealing key without replicas", map[string]string{"FLEET_REPLICA": "", "FLEET_PEERS": ""},
			[]string{"FLEET_SEALING_KEY_FILE is refused without FLEET_REPLICA"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := maps.Clone(base)
			maps.Copy(m, c.set)
			_, err := readSettings(env(m))
			wantErrs(t, err, c.want...)
			if err != nil && strings.Contains(err.Error(), "nb-token") {
				t.Errorf("the error holds the secret: %v", err)
			}
		})
	}
}
