package sim

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIntegrationFleetdCredentials runs fleetd, built with go build, as
// examples/deploy/systemd/fleetd.service runs it: every secret setting
// only in its _FILE form, a name relative to $CREDENTIALS_DIRECTORY whose
// files are 0400, as systemd's credentials are. A replica, so that the
// sealing key is read too. Machines attest and get their install codes
// (the NetBox token and the sealing key work), the approvers' API takes the
// token from its file and refuses another, and the first log line names
// the build.
func TestIntegrationFleetdCredentials(t *testing.T) {
	creds := t.TempDir()
	approverToken := hex.EncodeToString([]byte("approver-token-of-the-test"))
	pf := newProcFleet(t, procFleetConfig{replicas: 1, settings: func(i int, s map[string]string) {
		s["FLEET_APPROVER_TOKEN"] = approverToken
		for name, cred := range map[string]string{
			"NETBOX_TOKEN": "netbox-token", "FLEET_SEALING_KEY": "sealing-key", "FLEET_APPROVER_TOKEN": "approver-token",
		} {
			p := filepath.Join(creds, cred)
			if err := os.WriteFile(p, []byte(s[name]+"\n"), 0o400); err != nil {
				t.Fatal(err)
			}
			delete(s, name)
			s[name+"_FILE"] = cred
		}
		s["CREDENTIALS_DIRECTORY"] = creds
	}}, stormNodes(t, 3)...)
	for _, e := range pf.replicas[0].env {
		for _, name := range []string{"NETBOX_TOKEN=", "FLEET_SEALING_KEY=", "FLEET_APPROVER_TOKEN="} {
			if strings.HasPrefix(e, name) {
				t.Fatalf("fleetd's environment holds %s", name)
			}
		}
	}

	if _, err := pf.leaderOf(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	lat := storm(t, pf.testFleet)
	t.Logf("%d machines attested and got their codes; the slowest in %v", len(lat), lat[len(lat)-1].Round(time.Millisecond))

	ask := func(token string) int {
		rsp, _ := claimsAt(t, pf.client, pf.lb.url(), "SN-nobody", token)
		return rsp.StatusCode
	}
	if code := ask(approverToken); code != http.StatusNotFound {
		t.Errorf("the approvers' API with the token from FLEET_APPROVER_TOKEN_FILE: %d, want 404 (no claim waits)", code)
	}
	if code := ask(strings.Repeat("0", len(approverToken))); code != http.StatusUnauthorized {
		t.Errorf("the approvers' API with another token: %d, want 401", code)
	}

	first, _, _ := strings.Cut(pf.replicas[0].log.String(), "\n")
	var line map[string]any
	if err := json.Unmarshal([]byte(first), &line); err != nil || line["msg"] != "fleetd: starting" || line["revision"] == nil || line["version"] == nil {
		t.Errorf("fleetd's first log line is %q, want fleetd: starting with its version and revision", first)
	}
}
