package clusters

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/internal/kubetest"
)

// The clusters are real apiservers: the shared control plane, reached
// directly or through a kubetest.CutProxy.
func TestMain(m *testing.M) { kubetest.Main(m, 0) }

// kubeconfig writes a kubeconfig file for server with the control plane's
// token and returns its bytes and path.
func kubeconfig(t *testing.T, home *rest.Config, server string) ([]byte, string) {
	t.Helper()
	b := fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: %q}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, server, home.BearerToken)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b, path
}
