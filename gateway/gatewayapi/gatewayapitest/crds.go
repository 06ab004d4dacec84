// Package gatewayapitest installs the Gateway API route CRDs into a test
// cluster and plays a gateway controller there: no gateway implementation
// runs in the tests, so the fake controller writes route status the way
// the Gateway API conformance rules say a controller does (an entry per
// parentRef with Accepted and ResolvedRefs at the route's generation), and
// can reject a route or hold its status back.
package gatewayapitest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/internal/kubetest"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// CRDFiles are the experimental-channel CRDs the tests install (a
// superset of the standard channel's fields), from the module cache.
var CRDFiles = []string{"gateway.networking.k8s.io_httproutes.yaml", "gateway.networking.k8s.io_grpcroutes.yaml"}

// CRDDir is config/crd/experimental of the sigs.k8s.io/gateway-api module
// this build uses.
func CRDDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return "", fmt.Errorf("go list sigs.k8s.io/gateway-api: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "experimental"), nil
}

// InstallCRDs creates (or keeps) the route CRDs and waits until they are
// Established; several tests may call it.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dir, err := CRDDir()
	if err != nil {
		return err
	}
	for _, f := range CRDFiles {
		if err := kubetest.ApplyCRDFile(ctx, dyn, filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	return nil
}
