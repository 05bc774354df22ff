package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
)

// TestKubeconfigRateLimits: fleetd's Kubernetes clients are not held to
// client-go's default 5 requests per second (bursts of 10), which would
// admit a boot storm at a few machines per second.
func TestKubeconfigRateLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const file = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
users:
- name: u
  user:
    token: t
contexts:
- name: x
  context:
    cluster: c
    user: u
current-context: x
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Kubeconfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS < 100 || cfg.Burst < 200 {
		t.Errorf("QPS %v, burst %d; want at least 100 and 200 (client-go's defaults are %v and %d)", cfg.QPS, cfg.Burst, rest.DefaultQPS, rest.DefaultBurst)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "t" {
		t.Errorf("host %q, token %q: not the kubeconfig's", cfg.Host, cfg.BearerToken)
	}
	if _, err := Kubeconfig(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing kubeconfig file loaded")
	}
}
