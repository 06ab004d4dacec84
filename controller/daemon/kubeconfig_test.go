package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKubeConfigRateLimits: every client sluice builds from the
// kubeconfig, the state store's included, gets the raised rate limits.
// With client-go's default 5 QPS, a commit of 100 new rollouts under
// --state-store kubernetes outlasted the store's 10 s call timeout and
// was refused (go run ./e2e/scale -kube -rollouts 100).
func TestKubeConfigRateLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := KubeConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS < kubeQPS || cfg.Burst < kubeBurst {
		t.Errorf("client rate limits QPS %v, burst %d; want at least %d and %d", cfg.QPS, cfg.Burst, kubeQPS, kubeBurst)
	}
}
