package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/controller/kubeclient"
)

// TestKubeConfigRateLimits: every client sluice builds from the
// kubeconfig gets the rate limits of --kube-api-qps and --kube-api-burst,
// their defaults when unset.
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
	cfg, err := Options{Kubeconfig: path}.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != kubeclient.DefaultQPS || cfg.Burst != kubeclient.DefaultBurst {
		t.Errorf("default client rate limits QPS %v, burst %d; want %v and %d", cfg.QPS, cfg.Burst, kubeclient.DefaultQPS, kubeclient.DefaultBurst)
	}
	cfg, err = Options{Kubeconfig: path, KubeAPI: kubeclient.Limits{QPS: 30, Burst: 60}}.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 30 || cfg.Burst != 60 {
		t.Errorf("client rate limits QPS %v, burst %d; want the flags' 30 and 60", cfg.QPS, cfg.Burst)
	}
}
