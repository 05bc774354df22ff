package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetkit/fleet/internal/testenv"
)

// The host service's files, from this package's directory.
const (
	systemdUnit  = "../../../deploy/systemd/fleetd.service"
	systemdEnv   = "../../../deploy/systemd/fleetd.env"
	nixosModule  = "../../../deploy/nixos/fleetd.nix"
	nixosEvalNix = "../../../deploy/nixos/testdata/eval.nix"
)

// maxExposure is the most systemd-analyze security may score the unit
// (0 is best, 10 worst). systemd 252 scored it 1.1; what it exposes is
// the network (PrivateNetwork=, IPAddressDeny=: fleetd serves machines and
// reaches NetBox and the Kubernetes API), the host's root directory, AF_UNIX
// for the name service, /proc's non-process files and the clock's device.
const maxExposure = 1.3

// unitFile is a unit file's settings: section -> key -> values, in order
// (a key may be given more than once).
type unitFile map[string]map[string][]string

func readUnit(t *testing.T, path string) unitFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.HasSuffix(line, `\`) {
				t.Fatalf("%s:%d: %q is not KEY=VALUE in a section", path, n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// settingNames are the settings fleetd -help lists.
func settingNames() map[string]bool {
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  ([A-Z][A-Z_]+)\b`).FindAllStringSubmatch(envHelp, -1) {
		names[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\b[A-Z][A-Z_]+_FILE\b`).FindAllString(envHelp, -1) {
		names[m] = true
	}
	return names
}

// checkCredentials checks a service's environment against its credentials:
// every variable is a fleetd setting; a secret setting appears only as
// its _FILE form, naming a credential; every %d/NAME names a credential;
// and every credential is used.
func checkCredentials(t *testing.T, where string, env map[string]string, creds []string) {
	t.Helper()
	known := settingNames()
	loaded := map[string]bool{}
	for _, c := range creds {
		name, path, ok := strings.Cut(c, ":")
		if !ok || !filepath.IsAbs(path) {
			t.Errorf("%s: LoadCredential=%s is not NAME:/absolute/path", where, c)
		}
		loaded[name] = true
	}
	used := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		if !known[k] {
			t.Errorf("%s: %s is not a setting fleetd -help lists", where, k)
		}
		switch k {
		case "NETBOX_TOKEN", "FLEET_APPROVER_TOKEN", "FLEET_SEALING_KEY":
			t.Errorf("%s: %s holds a secret in the environment; use %s_FILE", where, k, k)
		}
		cred := ""
		if strings.HasSuffix(k, "_FILE") {
			if filepath.IsAbs(v) {
				t.Errorf("%s: %s=%s is not a credential's name", where, k, v)
			}
			cred = v
		} else if rest, ok := strings.CutPrefix(v, "%d/"); ok {
			cred = rest
		}
		if cred != "" {
			if !loaded[cred] {
				t.Errorf("%s: %s=%s names no LoadCredential", where, k, v)
			}
			used[cred] = true
		}
	}
	for name := range loaded {
		if !used[name] {
			t.Errorf("%s: the credential %s is loaded and used by no setting", where, name)
		}
	}
}

// The unit passes every secret as a credential, and names only settings
// fleetd reads.
func TestSystemdUnitSettings(t *testing.T) {
	u := readUnit(t, systemdUnit)
	env := map[string]string{}
	for _, e := range u["Service"]["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	checkCredentials(t, "fleetd.service", env, u["Service"]["LoadCredential"])

	// The example fleetd.env: settings fleetd reads, none of them secret.
	data, err := os.ReadFile(systemdEnv)
	if err != nil {
		t.Fatal(err)
	}
	envFile := map[string]string{}
	for l := range strings.Lines(string(data)) {
		if l = strings.TrimSpace(l); l != "" && l[0] != '#' {
			k, v, _ := strings.Cut(l, "=")
			envFile[k] = v
		}
	}
	checkCredentials(t, "fleetd.env", envFile, nil)
	for k := range envFile {
		if _, ok := env[k]; ok {
			t.Errorf("fleetd.env sets %s, which fleetd.service sets", k)
		}
	}
	for k, want := range map[string]string{
		"DynamicUser": "yes", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
		"CapabilityBoundingSet": "", "AmbientCapabilities": "",
	} {
		if got := u["Service"][k]; len(got) != 1 || got[0] != want {
			t.Errorf("fleetd.service: %s=%q, want %q", k, got, want)
		}
	}
}

// systemdRoot is a root directory for systemd-analyze verify: systemd's
// own units, the unit at its install path, and an executable at its
// ExecStart path.
func systemdRoot(t *testing.T, unit []byte, execStart string) string {
	t.Helper()
	root := t.TempDir()
	var units string
	for _, dir := range []string{"/usr/lib/systemd/system", "/lib/systemd/system"} {
		if _, err := os.Stat(filepath.Join(dir, "sysinit.target")); err == nil {
			units = dir
			break
		}
	}
	if units == "" {
		testenv.Unavailable(t, "needs systemd's own units (sysinit.target) in /usr/lib/systemd/system: apt-get install -y systemd")
	}
	dst := filepath.Join(root, "usr/lib/systemd/system")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", units+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v: %s", units, err, out)
	}
	for path, f := range map[string]struct {
		data []byte
		mode os.FileMode
	}{
		"etc/systemd/system/fleetd.service": {unit, 0o644},
		strings.TrimPrefix(execStart, "/"):  {[]byte("#!/bin/sh\nexit 0\n"), 0o755},
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// systemd-analyze verify passes the unit as shipped, installed at
// /etc/systemd/system/fleetd.service, without a warning; it fails a unit
// with an unknown key, so a warning would be seen.
func TestIntegrationSystemdVerify(t *testing.T) {
	analyze := testenv.Command(t, "systemd-analyze", "systemd")
	unit, err := os.ReadFile(systemdUnit)
	if err != nil {
		t.Fatal(err)
	}
	execStart := readUnit(t, systemdUnit)["Service"]["ExecStart"]
	if len(execStart) != 1 || !filepath.IsAbs(strings.Fields(execStart[0])[0]) {
		t.Fatalf("ExecStart=%q: want one absolute command", execStart)
	}
	verify := func(unit []byte) (string, error) {
		root := systemdRoot(t, unit, strings.Fields(execStart[0])[0])
		out, err := exec.Command(analyze, "verify", "--root="+root, "fleetd.service").CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := verify(unit); err != nil || out != "" {
		t.Errorf("systemd-analyze verify fleetd.service: %v\n%s", err, out)
	}
	bad := bytes.Replace(unit, []byte("[Service]\n"), []byte("[Service]\nNoSuchSetting=yes\n"), 1)
	if out, _ := verify(bad); !strings.Contains(out, "NoSuchSetting") {
		t.Errorf("systemd-analyze verify said nothing of an unknown key: %q", out)
	}
}

// systemd-analyze security scores the unit's exposure at most maxExposure.
func TestIntegrationSystemdSecurity(t *testing.T) {
	analyze := testenv.Command(t, "systemd-analyze", "systemd")
	help, _ := exec.Command(analyze, "--help").CombinedOutput()
	if !bytes.Contains(help, []byte("--offline")) {
		testenv.Unavailable(t, "systemd-analyze lacks security --offline (systemd 250 or later): apt-get install -y systemd from Debian 12 or later")
	}
	// --threshold is the score times ten; the exit status and the
	// printed score are both checked.
	cmd := exec.Command(analyze, "security", "--offline=true", "--no-pager", fmt.Sprintf("--threshold=%d", int(maxExposure*10)), systemdUnit)
	out, err := cmd.CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for fleetd\.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v, and no overall exposure level:\n%s", err, out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security --offline=true: exposure %.1f (at most %.1f)", score, maxExposure)
	if err != nil || score > maxExposure {
		t.Errorf("exposure %.1f, more than %.1f (%v):\n%s", score, maxExposure, err, out)
	}
}

// nixEnv is the environment nix-instantiate runs in: a machine without
// the nixbld group (Debian's nix-bin as root) warns of it otherwise.
func nixEnv() []string { return append(os.Environ(), "NIX_CONFIG=build-users-group =") }

// The NixOS module parses, and, evaluated with one host's settings
// (testdata/eval.nix, a stand-in for nixpkgs' lib), makes the unit
// examples/deploy/systemd/fleetd.service is: the same hardening, every
// secret as a credential, and only settings fleetd reads.
func TestIntegrationNixOSModule(t *testing.T) {
	nix := testenv.Command(t, "nix-instantiate", "nix-bin")
	cmd := exec.Command(nix, "--parse", nixosModule)
	cmd.Env = nixEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nix-instantiate --parse fleetd.nix: %v\n%s", err, out)
	}

	cmd = exec.Command(nix, "--eval", "--strict", "--json", nixosEvalNix)
	cmd.Env = nixEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nix-instantiate --eval testdata/eval.nix: %v\n%s", err, stderr.String())
	}
	var got struct {
		Options          []string
		FailedAssertions []string
		Firewall         []int
		Service          struct {
			Environment   map[string]string
			ServiceConfig map[string]any
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"enable", "package", "controlPlanes", "netbox", "listen", "metricsListen", "tls", "approverTokenFile"} {
		if !slices.Contains(got.Options, o) {
			t.Errorf("homelab.fleetd has no option %s: %v", o, got.Options)
		}
	}
	if len(got.FailedAssertions) > 0 {
		t.Errorf("failed assertions: %q", got.FailedAssertions)
	}
	if !slices.Equal(got.Firewall, []int{8443}) {
		t.Errorf("openFirewall opens %v, want [8443]", got.Firewall)
	}
	env, sc := got.Service.Environment, got.Service.ServiceConfig
	if env["FLEET_CONTROL_PLANES"] != "true" || env["FLEET_CONFIG_TTL"] != "2h" || env["NETBOX_URL"] != "https://capsule.example" {
		t.Errorf("environment: %v", env)
	}
	var creds []string
	for _, c := range sc["LoadCredential"].([]any) {
		creds = append(creds, c.(string))
	}
	checkCredentials(t, "fleetd.nix", env, creds)

	// Every setting of the unit's [Service] is the module's, but what
	// each sets its own way (ExecStart, the environment, the credentials'
	// source paths).
	unit := readUnit(t, systemdUnit)["Service"]
	for _, e := range unit["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		if env[k] != v {
			t.Errorf("fleetd.nix sets %s=%q, fleetd.service %q", k, env[k], v)
		}
	}
	for k, want := range unit {
		switch k {
		case "ExecStart", "Environment", "EnvironmentFile", "LoadCredential":
			continue
		}
		if got := unitValues(sc[k]); !slices.Equal(words(got), words(want)) {
			t.Errorf("fleetd.nix sets %s=%q, fleetd.service %q", k, got, want)
		}
	}
	for k := range sc {
		if _, ok := unit[k]; !ok && k != "LoadCredential" {
			t.Errorf("fleetd.nix sets %s, which fleetd.service does not", k)
		}
	}
}

// unitValues are a NixOS serviceConfig value as unit file lines: a list
// is a line per element, true and false are yes and no.
func unitValues(v any) []string {
	switch v := v.(type) {
	case nil:
		return nil
	case bool:
		if v {
			return []string{"yes"}
		}
		return []string{"no"}
	case float64:
		return []string{strconv.FormatFloat(v, 'f', -1, 64)}
	case []any:
		var l []string
		for _, e := range v {
			l = append(l, unitValues(e)...)
		}
		return l
	}
	return []string{fmt.Sprint(v)}
}

// words are the space-separated words of values: NixOS writes a list
// as a line per element, which systemd joins.
func words(values []string) []string {
	var w []string
	for _, v := range values {
		w = append(w, strings.Fields(v)...)
	}
	if len(values) > 0 && len(w) == 0 {
		return []string{""} // an empty value, which resets a setting
	}
	return w
}
